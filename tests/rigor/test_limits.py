"""The limit analysis (:mod:`attnbounds.theory.deciding.limits`): along a family of token-class instances growing with
L, a certified "violated for every L >= L0" never starts below where the statement is actually false, a true
statement is never certified violated along a family, and the analysis is bounded by work, not by the clock
(the same result in any thread, on any machine)."""

from __future__ import annotations

import threading

import pytest
import sympy as sp

from attnbounds.theory.deciding import limits
from attnbounds.theory.deciding.certify import certify
from attnbounds.theory.mathematics import hypotheses as hyp
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.normalisers import softmax
from attnbounds.theory.mathematics.statement import Citation, Statement
from attnbounds.theory.mathematics.statements._symbols import dF_l2
from tests.planted import weights_lower, weights_upper


def _one_vs_rest(top: float, rest: float, L: int, a: float) -> Instance:
    return Instance.from_logits([[top, rest]], softmax(1.0), counts=[[1, L - 1]], a=a, T=1.0)


@pytest.mark.parametrize("planted, top, rest", [(weights_lower(0.05, 3.0), -3.0, 3.0),
                                                (weights_upper(0.05, 1.0), 1.0, -1.0)])
def test_violated_for_every_L_from_L0_and_never_below_the_threshold(planted, top, rest) -> None:
    """One token at one end of F, the rest at the other: false exactly from ``planted.threshold`` tokens on."""
    start = planted.threshold + 5
    inst = _one_vs_rest(top, rest, start, 3.0 if top == -3.0 else 1.0)
    assert certify(planted.statement, inst).status == "violated"
    results = limits.analyse(planted.statement, inst, violated=True)
    grows = [r for r in results if r.status.startswith("violated")]
    assert grows, [r.to_json() for r in results]
    for r in grows:
        assert r.L0 is not None and planted.threshold <= r.L0 <= start, r.to_json()
        growth = next(g for g in limits.growths(inst) if g.name == r.growth)
        for L in (r.L0, r.L0 + 1, 10**6, 10**9):  # spot checks of the certificate at full length
            if r.L_max is not None and L > r.L_max:
                continue
            t = (L - growth.length(0)) // sum(growth.growth)
            if t < 0 or growth.length(t) != L:
                continue
            assert certify(planted.statement, growth.at(t)).status == "violated", (r.growth, L)


@pytest.mark.parametrize("planted, top, rest, a", [(weights_lower(0.0, 3.0), -3.0, 3.0, 3.0),
                                                   (weights_upper(0.0, 3.0), 3.0, -3.0, 3.0)])
def test_a_true_statement_tight_as_L_grows_is_never_violated_along_a_family(planted, top, rest, a) -> None:
    inst = _one_vs_rest(top, rest, 50, a)
    for r in limits.analyse(planted.statement, inst, violated=False):
        assert not r.status.startswith("violated"), r.to_json()


def test_the_analysis_is_bounded_by_work_and_the_same_in_any_thread() -> None:
    planted = weights_lower(0.05, 3.0)
    inst = _one_vs_rest(-3.0, 3.0, planted.threshold + 5, 3.0)
    starved = limits.analyse(planted.statement, inst, violated=True, work_limit=5)
    assert all(r.status == "unsupported" and "WorkLimit" in r.detail for r in starved), [r.to_json() for r in starved]
    here = [r.to_json() for r in limits.analyse(planted.statement, inst, violated=True)]
    there: list = []
    worker = threading.Thread(target=lambda: there.extend(
        r.to_json() for r in limits.analyse(planted.statement, inst, violated=True)))
    worker.start()
    worker.join()
    assert here == there


def test_a_bound_on_the_norm_of_F_prime_is_certified_along_growths_and_holds_at_their_members() -> None:
    """``||F'||_2 / sum_k F(l_k)`` (``dF_l2``) reads the counts only through the classes' sizes, so the analysis
    gives its closed form along each growth: ``dF_l2 <= 1/2``, false at the base instance, is certified to hold from
    some ``L0`` on, and certify agrees at members of the growth from ``L0``."""
    statement = Statement("limits.dF_l2-half", "||F'||_2 / sum_k F(l_k) <= 1/2", sp.Le(dF_l2, sp.Rational(1, 2)),
                          Citation("test"), (hyp.F_POSITIVE, hyp.F_LENGTH_INDEPENDENT, hyp.LOGITS_BOUNDED, hyp.SOFTMAX),
                          bindings={"dF_l2": "dF_l2"}, fixed={"a": 3.0, "T": 1.0})
    inst = Instance.from_logits([[2.0, -1.0]], softmax(1.0), counts=[[1, 9]], a=3.0, T=1.0)
    assert certify(statement, inst).status == "violated"
    results = limits.analyse(statement, inst, violated=False)
    assert results and all(r.status == "holds-for-all" for r in results), [r.to_json() for r in results]
    for r in results:
        growth = next(g for g in limits.growths(inst) if g.name == r.growth)
        step = sum(growth.growth)
        first = -(-(r.L0 - growth.length(0)) // step)  # the first member with L >= L0
        for value in (first, first + 1, 10**6):
            assert certify(statement, growth.at(value)).status == "holds", (r.growth, growth.length(value))
