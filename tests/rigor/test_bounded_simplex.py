"""Threshold maps over bounded logits in the relaxation prover: the bounded simplex (issue 33).

An alpha-entmax map ``alpha_i = ((q l_i / T - tau)_+)^(1/q)``, ``q = alpha - 1`` (sparsemax q = 1, entmax-1.5 q =
1/2), takes logits in [-a, a] exactly onto the points p of the closed simplex with ``p_i^q - p_j^q <= 2 q a / T`` for
every pair. Necessity (what soundness rests on) is checked against the maps' own float weights; sufficiency (what
makes the relaxation exact) by building logits for such points. Ground truth of the bounds, derived by hand: with
``s = 2 a / T < 1`` sparsemax's largest weight is at most ``s + (1 - s) / L`` (every other weight at least the
largest minus s, the weights summing to 1), attained at one logit +a and the others -a; at a = 1/8, T = 5/8 (s =
2/5) entmax-1.5's is at most 0.64 at L = 2 (``sqrt(p) - sqrt(1 - p) = 1/5``).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as hs

from attnbounds.theory.deciding import prover
from attnbounds.theory.deciding.prover.image import relaxed_margins
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.normalisers import Entmax15, Sparsemax
from attnbounds.theory.running import api

MAPS = {"sparsemax": (Sparsemax, 1.0), "entmax15": (Entmax15, 0.5)}
#: a = 1/8, T = 5/8: doubles, so that the search's corners are the exact extremes
FIXED = {"a": 0.125, "T": 0.625}


@pytest.mark.parametrize("name", sorted(MAPS))
@settings(max_examples=200, deadline=None)
@given(data=hs.data())
def test_bounded_logits_give_weights_within_the_spread(name: str, data: hs.DataObject) -> None:
    cls, q = MAPS[name]
    L = data.draw(hs.integers(2, 8))
    a = data.draw(hs.floats(0.01, 5.0))
    T = data.draw(hs.floats(0.05, 5.0))
    corner = hs.sampled_from([-a, a])
    logits = np.array([data.draw(hs.lists(hs.one_of(corner, hs.floats(-a, a)), min_size=L, max_size=L))])
    p = cls(T=T).weights(logits)[0]
    spread = np.power(p, q)[:, None] - np.power(p, q)[None, :]
    assert spread.max() <= 2 * q * a / T * (1 + 1e-9) + 1e-12, (p, 2 * q * a / T)


@pytest.mark.parametrize("name", sorted(MAPS))
@settings(max_examples=200, deadline=None)
@given(data=hs.data())
def test_every_point_within_the_spread_is_the_weights_of_bounded_logits(name: str, data: hs.DataObject) -> None:
    """Logits for a point p within the spread s: ``l_j / T = (p_j^q - min p^q) / q - a / T``, which lie in [-a, a]."""
    cls, q = MAPS[name]
    L = data.draw(hs.integers(2, 8))
    raw = np.array(data.draw(hs.lists(hs.floats(0.0, 1.0), min_size=L, max_size=L)))
    if raw.sum() == 0:
        raw[0] = 1.0
    p = raw / raw.sum()
    T = data.draw(hs.floats(0.1, 5.0))
    s = p.max() ** q - p.min() ** q
    a = T * (s / (2 * q) + data.draw(hs.floats(0.0, 1.0)))  # any a with 2 q a / T >= s
    logits = T * ((np.power(p, q) - np.power(p, q).min()) / q) - a
    assert np.all(np.abs(logits) <= a * (1 + 1e-12))
    np.testing.assert_allclose(cls(T=T).weights(logits[None])[0], p, atol=1e-9)


def _statement(relation: str, name: str, **spec):
    return api.statement(relation, id="bounded.simplex", normaliser=name, hypotheses=["logits-bounded"],
                         fixed=FIXED, ranges={"L": [2, 10**6]}, **spec).statements[0]


@pytest.mark.parametrize("relation, name", [
    ("alpha_max <= 2*a/T + (1 - 2*a/T)/L", "sparsemax"),  # an equality at every L
    ("alpha_max <= 0.7", "sparsemax"),
    ("alpha_max - alpha_min <= 0.4", "sparsemax"),
    ("alpha_max <= 0.75", "entmax15"),
])
def test_true_bounds_of_threshold_maps_over_bounded_logits_are_proved(relation: str, name: str) -> None:
    result = prover.prove(_statement(relation, name), work=prover.work_for(4.0))
    assert result.status == "proved", result.reason


@pytest.mark.parametrize("relation, name", [
    ("alpha_max < 2*a/T + (1 - 2*a/T)/L", "sparsemax"),
    ("alpha_max <= 2*a/T + (1 - 2*a/T)/L - 1/1000000", "sparsemax"),
    ("alpha_max <= 0.69", "sparsemax"),
    ("alpha_max - alpha_min < 0.4", "sparsemax"),
    ("alpha_max <= 0.63", "entmax15"),
    ("alpha_max <= 2*a/T", "sparsemax"),  # false at L = 2 (0.7 > 0.4): the spread alone is no bound of the weight
    # a weight 0 (the closed simplex's D = oo over the least weight's token): sparsemax at L = 4, weights (0.35, 0.35,
    # 0.3, 0) within s = 0.4; entmax-1.5 from L = 26 (sqrt(p_max) <= 0.2 with a weight 0)
    ("alpha_min > 0", "sparsemax"),
    ("L*alpha_min > 0", "entmax15"),
])
def test_false_bounds_of_threshold_maps_over_bounded_logits_are_never_proved(relation: str, name: str) -> None:
    statement = _statement(relation, name)
    assert prover.prove(statement, work=prover.work_for(2.0)).status != "proved"
    wide = api.statement(relation, id="bounded.simplex", normaliser=name, hypotheses=["logits-bounded"],
                         fixed={"a": 1.0, "T": 1.0}).statements[0]  # s = 2 (q = 1) or 1 (q = 1/2): weights 0 at L = 2
    if "alpha_min" in relation:
        assert prover.prove(wide, work=prover.work_for(2.0)).status != "proved"
    assert api.check(relation, normaliser=name, hypotheses=["logits-bounded"], fixed=FIXED,
                     ranges={"L": [2, 10**6]}, budget=2.0, seed=0).verdict == "REFUTED"


@pytest.mark.parametrize("relation", ["alpha_max <= 0.7", "alpha_max - alpha_min <= 0.4", "alpha_min >= 0"])
@pytest.mark.parametrize("name", sorted(MAPS))
@settings(max_examples=15, deadline=None)
@given(data=hs.data())
def test_an_instance_is_a_point_of_the_bounded_simplex_with_its_own_margin(relation: str, name: str,
                                                                            data: hs.DataObject) -> None:
    """Every instance over bounded logits is a point of the relaxation (each token class an atom) that satisfies
    its constraints, the spread's among them, with the instance's margin."""
    statement = _statement(relation, name)
    a = FIXED["a"]
    K = data.draw(hs.integers(1, 3))
    logits = np.array([data.draw(hs.lists(hs.one_of(hs.sampled_from([-a, a, 0.0]), hs.floats(-a, a)),
                                          min_size=K, max_size=K))])
    counts = np.array([[data.draw(hs.integers(1, 5)) for _ in range(K)]])
    assume(counts.sum() >= 2)  # the statement's range of L
    inst = statement.prepare(Instance.from_logits(logits, MAPS[name][0](T=FIXED["T"]), counts=counts))
    ev = statement.evaluate(inst)
    assert bool(ev.applicable[0])
    q = MAPS[name][1]
    powers = np.power(inst.alpha[0], q)
    # (a point on the spread's boundary, +-a both present, is a tie the image's float weights cannot hold exactly)
    assume(powers.max() - powers.min() < 2 * q * a / FIXED["T"] * (1 - 1e-9))
    margins = [p.value for p in relaxed_margins(statement, inst) if p.ok and p.exact]
    assert margins, "no placement satisfies the relaxation's constraints"
    tol = 1e-7 * (abs(float(ev.lhs[0])) + abs(float(ev.rhs[0]))) + 1e-12
    assert math.isclose(min(margins), float(ev.margin[0]), abs_tol=tol), (min(margins), float(ev.margin[0]))


@pytest.mark.parametrize("relation, name", [
    ("alpha_max <= 2*a/T + (1 - 2*a/T)/L - 1/1000000", "sparsemax"),
    ("L*alpha_min >= 1/1000", "entmax15"),
    ("L*alpha_min >= 1/1000", "sparsemax"),  # a weight 0 (D = -oo): at the logits' lower end
])
def test_the_prover_realises_a_negative_box_of_the_bounded_simplex_as_logits(relation: str, name: str) -> None:
    """A point of the bounded simplex is the weights of logits in [-a, a] (``l_j = T (p_j^q - min p^q) / q - a``):
    the prover's negative box becomes a certified counterexample of its own, with logits inside the box."""
    from attnbounds.theory.deciding.certify import certify

    statement = _statement(relation, name)
    result = prover.prove(statement, work=prover.work_for(3.0))
    inst = result.counterexample
    assert result.status == "refuted" and inst is not None, result.reason
    assert np.all(np.abs(inst.logits) <= FIXED["a"]) and isinstance(inst.normaliser, MAPS[name][0])
    assert certify(statement, inst).status == "violated"
