"""Certification of token-class instances at full L (exact integer counts, nothing materialised): counterexamples
at L = 10^7 certify, and true statements tight as L grows never come out violated by rounding, up to L = 10^9."""

from __future__ import annotations

import numpy as np
import pytest

from attnbounds.theory.mathematics import registry
from attnbounds.theory.deciding.certify import certify
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.normalisers import softmax
from tests.planted import distances, weights_lower, weights_upper


def _one_vs_rest(L: int, top: float, rest: float, **params: float) -> Instance:
    return Instance.from_logits([[top, rest]], softmax(1.0), counts=[[1, L - 1]], **params)


@pytest.mark.parametrize("L", [10**3, 10**6, 10**9])
def test_lemma1_tight_as_L_grows_holds_at_full_length(L: int, monkeypatch) -> None:
    """alpha_min = C_1 / (C_1 + L - 1) is above C_1 / L by a relative 1/L only: still certified, in O(K) (no token
    is written out: expanding the classes would fail the test)."""
    def never(*args, **kwargs):
        raise AssertionError("the certificate wrote the token classes out")

    monkeypatch.setattr(Instance, "expand", never)
    st = registry.get("lemma1")
    for top, rest in ((-3.0, 3.0), (3.0, -3.0)):
        inst = _one_vs_rest(L, top, rest, a=3.0)
        cert = certify(st, inst)
        assert cert.status == "holds", (L, cert)


def test_counterexample_at_ten_million_tokens_certifies_without_expanding() -> None:
    planted = weights_upper(0.01, 3.5)  # false from L = 108469 on
    inst = _one_vs_rest(10**7, 3.5, -3.5, a=3.5)
    cert = certify(planted.statement, inst)
    assert cert.status == "violated" and cert.method == "arb"
    below = _one_vs_rest(planted.threshold - 1, 3.5, -3.5, a=3.5)
    assert certify(planted.statement, below).status == "holds"  # one token short of the threshold: true


@pytest.mark.parametrize("L", [10**5, 10**9])
def test_planted_thresholds_are_exact_at_scale(L: int) -> None:
    lower = weights_lower(1e-7, 3.0)  # false only beyond about 10^7 tokens
    inst = _one_vs_rest(L, -3.0, 3.0, a=3.0)
    expected = "violated" if L >= lower.threshold else "holds"
    assert certify(lower.statement, inst).status == expected


@pytest.mark.parametrize("sid", ["corollary3[spectral,corrected]", "corollary3[frobenius,corrected]",
                                 "corollary3[row,corrected]", "corollary3[entry,corrected]", "lemma2[sharp]"])
def test_jacobian_bounds_hold_on_a_billion_tokens(sid: str) -> None:
    st = registry.get(sid)
    for counts in ([[1, 10**9 - 1]], [[2, 3, 10**9 - 5]]):
        K = len(counts[0])
        inst = Instance.from_logits(np.linspace(2.0, -1.0, K)[None], softmax(0.3), counts=counts)
        assert certify(st, inst).status in ("holds", "inconclusive"), sid


def test_theorem1_bounds_on_a_billion_tokens() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 3, 4))
    inst = Instance.from_logits([[4.0, 1.0, 0.0]], softmax(1.0), counts=[[2, 5, 10**9 - 7]], x=x, N=3)
    for sid in ("theorem1.fixed[R1,g1]", "theorem1.fixed[R2,g2,corrected]"):
        assert certify(sid, inst).status == "holds", sid
    tight = distances(0.0, 2.0)  # dtilde_R1 <= X (1 + N C_2): true, tight only as L grows
    u = np.array([[1.0, 0.0]])
    inst = Instance.from_logits([[2.0, -2.0]], softmax(1.0), counts=[[1, 10**9 - 1]], x=np.stack([u, -u], 1), N=1,
                                a=2.0)
    assert certify(tight.statement, inst).status == "holds"


def test_expectation_over_subsets_is_exact_on_a_billion_tokens() -> None:
    """E over uniform 3-subsets of 10^9 tokens in three classes: a finite sum over count vectors."""
    rng = np.random.default_rng(1)
    inst = Instance.from_logits([[2.0, 0.5, 0.0]], softmax(1.0), counts=[[1, 4, 10**9 - 5]],
                                x=rng.standard_normal((1, 3, 2)), N=3)
    cert = certify("theorem1.random[R1,scaled,weighted]", inst)
    assert cert.status in ("holds", "inconclusive") and cert.method == "enumeration"
