"""Every F with its slopes free in the relaxation prover (issue 33, item 5: Lemma 2's quantities over every F).

Under F-positive alone, ``alpha = F / sum F`` for *every* smooth positive F: at distinct logits F takes any positive
values and any slopes ``g = (log F)'`` (Hermite interpolation); tied logits share both, a face. So every instance is
a point of the weights model (the open simplex) with one free slope per token, and a proof over those points proves
the bound for every F at once. Where the margin is homogeneous in the slopes (the Jacobian norms, ``dF_max`` and
``g_absmax`` are of degree 1), scaling every slope by ``1 / max |g|`` keeps the margin's sign: the slopes' box is
``[-1, 1]``. Ground truth, by hand: ``|d alpha_i / d l_j| = alpha_i |delta_ij - alpha_j| |g_j| <= max |g| / 4``
(``alpha (1 - alpha)`` and ``alpha_i alpha_j`` are at most 1/4), attained at two tokens of weight 1/2 with slopes of
size ``max |g|``: ``J_entry <= g_absmax/4`` is true and tight, ``/5`` and the strict ``<`` false; ``dF_max = max_j
alpha_j |g_j| <= alpha_max g_absmax``, while ``dF_max <= alpha_min g_absmax`` is false (the heaviest token the
steepest); ``J_entry <= 1`` is false (scale the slopes up) and not homogeneous, so its slopes stay unbounded.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as hs

from attnbounds.theory.deciding import prover
from attnbounds.theory.deciding.prover.image import relaxed_margins
from attnbounds.theory.deciding.prover.relax import relax
from attnbounds.theory.deciding.prover.space import Declined
from attnbounds.theory.mathematics import normalisers as nm
from attnbounds.theory.mathematics import registry
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.running import api

TRUE = ("J_entry <= g_absmax/4", "dF_max <= alpha_max*g_absmax")
FALSE = ("J_entry <= g_absmax/5", "J_entry < g_absmax/4", "dF_max <= alpha_min*g_absmax", "J_entry <= 1")


def _statement(relation: str):
    return api.statement(relation, id="every.F.slopes", hypotheses=["F-positive"]).statements[0]


@pytest.mark.parametrize("relation", TRUE)
def test_true_bounds_over_every_F_and_its_slopes_are_proved(relation: str) -> None:
    result = prover.prove(_statement(relation), work=prover.work_for(4.0))
    assert result.status == "proved", result.reason


@pytest.mark.parametrize("relation", FALSE)
def test_false_bounds_over_every_F_and_its_slopes_are_never_proved_and_the_search_refutes_them(relation: str) -> None:
    assert prover.prove(_statement(relation), work=prover.work_for(2.0)).status != "proved"
    assert api.check(relation, hypotheses=["F-positive"], budget=2.0, seed=0).verdict == "REFUTED"


@pytest.mark.parametrize("relation, scaled", [("J_entry <= g_absmax/4", True), ("dF_max <= alpha_max*g_absmax", True),
                                              ("J_entry <= 1", False), ("J_entry <= g_absmax**2", False)])
def test_the_slopes_box_is_bounded_only_where_the_margin_is_homogeneous_in_them(relation: str, scaled: bool) -> None:
    """``J_entry <= 1`` and ``J_entry <= g_absmax^2`` read the slopes with no common degree: scaling them changes
    the margin's sign, so their box must stay the whole line (a [-1, 1] box would prove the false bounds)."""
    problems = [p for per in relax(_statement(relation)).strategies for strategy in per for group in strategy
                for p in group.alternatives]
    slopes = [c for p in problems for c in p.coordinates if str(c.symbol).startswith("G_")]
    assert slopes, "no slope coordinate"
    if scaled:
        assert all(-1.0 <= c.lo <= c.hi <= 1.0 for c in slopes), slopes  # (a split at a kink narrows some)
        assert all("slopes scaled to max |g| <= 1" in p.pattern for p in problems
                   if any(str(c.symbol).startswith("G_") for c in p.coordinates))
    else:
        assert all(c.lo == -math.inf or c.hi == math.inf for c in slopes), slopes
    assert all(p.realisation.get("slopes") is not None for p in problems)  # no point is realised as one F's logits


@pytest.mark.parametrize("relation", [*TRUE, "J_entry <= 1", "dF_max <= alpha_min*g_absmax"])
@settings(max_examples=15, deadline=None)
@given(data=hs.data())
def test_an_instance_of_any_F_is_a_point_with_its_own_margin(relation: str, data: hs.DataObject) -> None:
    """A non-monotone log F (``l/T - b l^2``: slopes of both signs, of any size) or softmax: each token an atom, its slope scaled by the instance's ``max |g|`` where the problem scales them; the smallest margin over the
    placements that keep the constraints, scaled back, is the instance's."""
    statement = _statement(relation)
    # one token per class, distinct weights: the image's float weights hold no exact tie (a tie between a role and
    # an atom is a constraint met with equality, which a float point misses by a rounding)
    K = data.draw(hs.integers(1, 4))
    logits = np.array([data.draw(hs.lists(hs.floats(-20, 20), min_size=K, max_size=K, unique=True))])
    counts = np.ones((1, K), dtype=np.int64)
    T = data.draw(hs.sampled_from([0.1, 1.0, 7.0]))
    normaliser = nm.exp_poly(data.draw(hs.sampled_from([0.05, 0.5])), T) if data.draw(hs.booleans()) else nm.softmax(T)
    inst = statement.prepare(Instance.from_logits(logits, normaliser, counts=counts))
    ev = statement.evaluate(inst)
    assume(bool(ev.applicable[0]) and math.isfinite(float(ev.margin[0])))
    weights = np.sort(inst.alpha[0])
    assume(bool(weights[0] > 1e-250) and bool(np.all(np.diff(weights) > 1e-6 * weights[1:])))  # (log alpha read)
    margins = [p.value for p in relaxed_margins(statement, inst) if p.ok and p.exact]
    assert margins, "no placement satisfies the relaxation's constraints"
    tol = 1e-7 * (abs(float(ev.lhs[0])) + abs(float(ev.rhs[0]))) + 1e-12
    assert math.isclose(min(margins), float(ev.margin[0]), abs_tol=tol), (min(margins), float(ev.margin[0]))


def test_a_relaxation_builds_at_most_the_problems_its_budget_pays_for() -> None:
    """The problems are sympy's work, outside the branch and bound's count: the prover's budget bounds how many a
    relaxation builds (Lemma 2's readings over every F and its slopes need hundreds), and says so when it stops."""
    reading = registry.get("multihead")  # 40 problems, one per whole number of heads and pattern
    whole = relax(reading, max_problems=prover.MIN_PROBLEMS)
    assert sum(len(g.alternatives) for per in whole.strategies for strategy in per for g in strategy) == 40
    with pytest.raises(Declined, match="more than 39 relaxed problems"):
        relax(reading, max_problems=39)
    assert prover.problems_for(prover.MIN_WORK) == prover.MIN_PROBLEMS
    assert prover.problems_for(prover.work_for(60.0)) == prover.work_for(60.0) // prover.WORK_PER_PROBLEM > 90
    # Lemma 2's minF reading reads five distinguished tokens through either of two bounds: 2 x 52 patterns at least,
    # declined before sympy builds one (the quota's lower bound), where the budget pays for fewer
    with pytest.raises(Declined, match="more than 90 relaxed problems"):
        relax(registry.get("lemma2[minF]"), max_problems=90)
