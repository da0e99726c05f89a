"""Soundness of the relaxation as a whole: every instance is a point of its statement's relaxed space with the same
margin (the issue's property test of the relaxed margin's enclosure).

For statements of the quality set and the paper's readings the prover relaxes, on random and adversarial token-class
instances (L from 1 to 10^9, near ties, T from 1e-2 to 1e2): the smallest relaxed margin over the placements of the
distinguished tokens that satisfy the relaxation's constraints (:func:`attnbounds.theory.deciding.prover.image.relaxed_margins`)
equals the instance's margin. Smaller would let a true statement fail to close; larger would be unsound.

The others' distribution is captured by as many atoms as the distinct functions of a token that the totals read
(Caratheodory): the functions found in the totals' bodies are each of those functions once, whatever constants
multiply them and however the terms are spread over the bodies (one missed would leave the atoms too few). In the
weights model (softmax over unbounded logits) the others are a distribution of their weights with total mass 1: a sum
over them reads moments ``E[f(w)]`` of that distribution, and the mass ``E[1] = 1`` is none of them (it takes no atom).
"""

from __future__ import annotations

import math
import tomllib
from pathlib import Path

import numpy as np
import pytest
import sympy as sp
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as hs

from attnbounds.theory.mathematics import registry
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.normalisers import CONSTRUCTORS, softmax
from attnbounds.theory.deciding.prover.image import relaxed_margins
from attnbounds.theory.deciding.prover.relax import _moments, relax
from attnbounds.theory.io.userbounds import load_data
from attnbounds.theory.mathematics.normalisers import constructors_added
from attnbounds.theory.running import api
from tests._marks import slow_where

SET = Path(__file__).resolve().parents[1] / "quality" / "relaxation_set.toml"
STATEMENTS = ("true.w.bsig.upper", "true.w.bsig.max", "true.w.bsig.min", "true.w.bsig.lemma1", "true.w.softmax.exp",
              "true.w.softmax.max", "true.j.softmax.entry", "true.j.softmax.row", "true.j.softmax.frobenius",
              "true.j.bsig.entry", "true.j.bsig.gmax", "false.w.bsig.far", "true.w.ssm.ranges",
              "true.w.cubic.lemma1", "true.w.softplus1.lemma1")
READINGS = ("corollary3[entry,corrected]", "corollary3[row,corrected]", "corollary3[frobenius,corrected]")
RTOL = 1e-7
#: examples per statement: a few in the default run (sympy evaluates every placement), many in the thorough profile
EXAMPLES = 4 if settings.default.max_examples <= 30 else 60


def _statement(sid: str):
    if sid in READINGS:
        return registry.get(sid), {}
    ub = load_data(tomllib.loads(SET.read_text()), str(SET))
    return ub.get(sid), ub.normalisers


@hs.composite
def _instances(draw: hs.DrawFn, normaliser_name: str) -> Instance:
    K = draw(hs.integers(1, 3))
    base = draw(hs.floats(-20, 20))
    gaps = draw(hs.lists(hs.one_of(hs.floats(-8, 8), hs.sampled_from([0.0, 1e-9, -1e-9])), min_size=K, max_size=K))
    logits = np.array([[base + g for g in gaps]])
    counts = np.array([[int(round(10 ** draw(hs.floats(0, 9 / K)))) for _ in range(K)]])
    T = 10 ** draw(hs.floats(-2, 2))
    n = softmax(T=T) if normaliser_name == "softmax" else CONSTRUCTORS[normaliser_name](T=T)
    return Instance.from_logits(logits, n, counts=counts)


#: the two slowest (20-26 s each) run with -m slow; the others keep every family in the default run
@pytest.mark.parametrize("sid", slow_where([*STATEMENTS, *READINGS], str, {"true.j.bsig.gmax", "true.w.cubic.lemma1"}))
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=hs.data())
def test_the_instance_is_a_point_with_its_own_margin(sid: str, data) -> None:
    statement, normalisers = _statement(sid)
    name = next((n for n in ("bsig", "ssm", "cubic", "softplus1") if f".{n}." in sid), "softmax")
    with constructors_added(normalisers):
        inst = data.draw(_instances(name))
        if "ranges" in sid:
            assume(inst.L <= 10**6 and inst.L >= 2)
        inst = statement.prepare(inst)
        ev = statement.evaluate(inst)
        assume(bool(ev.applicable[0]) and math.isfinite(float(ev.margin[0])))
        placements = relaxed_margins(statement, inst)
    margins = [p.value for p in placements if p.ok and p.exact]
    assert margins, "no placement of the distinguished tokens satisfies the relaxation's constraints"
    scale = abs(float(ev.lhs[0])) + abs(float(ev.rhs[0]))
    tol = RTOL * scale + 1e-300
    assert abs(min(margins) - float(ev.margin[0])) <= tol, (min(margins), float(ev.margin[0]))
    # a strategy that bounds the margin: some group of it has, in each alternative, a satisfying margin at most the
    # instance's conjunct's (else a proof by that strategy would not prove the statement)
    conjunct_margin: dict[int, float] = {}
    best: dict[tuple[int, int, int, int], float] = {}
    for p in placements:
        best.setdefault(p.key, math.inf)
        if p.ok:
            if p.exact:
                conjunct_margin[p.key[0]] = min(conjunct_margin.get(p.key[0], math.inf), p.value)
            best[p.key] = min(best.get(p.key, math.inf), p.value)
    bounding = {p.key[:2] for p in placements if not p.exact}
    for c, s_ in bounding:
        groups: dict[int, list[float]] = {}
        for key, value in best.items():
            if key[:2] == (c, s_):
                groups.setdefault(key[2], []).append(value)
        covered = [g for g, values in groups.items() if max(values) <= conjunct_margin[c] + tol]
        assert covered, f"conjunct {c}, strategy {s_}: no group bounds the margin {conjunct_margin[c]}: {groups}"


LAM, G, LOGIT = (sp.Symbol(f"_{n}_x", real=True) for n in ("lam", "g", "l"))
#: functions of a generic token (its log F, the slope of log F, its logit), none a constant times another
TOKEN_FUNCTIONS = (sp.exp(LAM), sp.exp(2 * LAM), G * sp.exp(LAM), G**2 * sp.exp(2 * LAM), LOGIT * sp.exp(LAM), LOGIT,
                   G * LOGIT)
#: constants a total may multiply them by (a parameter, the others' share 1 - t: two terms of one function)
CONSTANTS = (sp.Integer(1), sp.Integer(3), sp.Rational(1, 3), sp.Symbol("T", positive=True),
             1 - sp.Symbol("t", nonnegative=True))


@settings(max_examples=25, deadline=None)
@given(used=hs.lists(hs.sampled_from(TOKEN_FUNCTIONS), min_size=1, max_size=4, unique=True), data=hs.data())
def test_the_totals_read_each_distinct_token_function_once(used: list[sp.Expr], data: hs.DataObject) -> None:
    terms = [data.draw(hs.sampled_from(CONSTANTS)) * f for f in used for _ in range(data.draw(hs.integers(1, 2)))]
    n_bodies = data.draw(hs.integers(1, 3))
    bodies = [sp.Add(*terms[k::n_bodies]) + data.draw(hs.sampled_from(CONSTANTS)) for k in range(n_bodies)]
    found = _moments(bodies, {LAM, G, LOGIT})
    assert len(found) == len(used), (bodies, found)
    for f in used:
        assert any(sp.simplify(f - m) == 0 for m in found), (f, found)


#: quantities of softmax weights and how many moments of the others' weights ``w`` they read (a token of weight ``w``
#: is ``w`` of the mass, so ``sum f(alpha)`` reads ``E[f(w) / w]``): ``||alpha||_2^2 = sum alpha^2`` and
#: ``||alpha g||_2^2`` (``g = 1/T``) read ``E[w]``; ``T^2 ||J||_F^2 = sum alpha^2 - 2 sum alpha^3 +
#: (sum alpha^2)^2`` reads ``E[w]`` and ``E[w^2]``
WEIGHT_MOMENTS = {"F_l2": 1, "dF_l2": 1, "J_frobenius": 2}


@pytest.mark.parametrize("quantity", sorted(WEIGHT_MOMENTS))
def test_the_weights_model_gives_the_others_one_atom_per_moment_and_none_for_their_mass(quantity: str) -> None:
    st = api.statement(f"{quantity} <= 1", hypotheses=["softmax"], id="moments").statements[0]
    problems = relax(st).problems
    assert problems
    for p in problems:
        assert p.realisation["weights_model"], p.describe()
        assert p.moments == p.atoms == len(p.realisation["atom_coordinates"]) == WEIGHT_MOMENTS[quantity], \
            p.describe()


@pytest.mark.parametrize("relation", ["alpha_max <= 1/2", "alpha_min*L <= 1", "alpha_max - alpha_min <= 1",
                                      "alpha_max <= 8*alpha_min"])  # (two weights: the common-reference twin too)
@pytest.mark.parametrize("logits", [[0.3, -1.2, 2.0], [-0.5, 4.0, 1.0, -3.0]])
def test_every_placement_meeting_an_exact_problems_constraints_has_the_instances_margin(relation: str,
                                                                                        logits: list[float]) -> None:
    """At distinct logits the constraints of an exact problem (a maximum's token dominates every other) allow only the
    placements that are the instance: each such placement's relaxed margin is the instance's own, and a placement with
    another margin (the maximum's role on a smaller weight) is marked as violating the constraints."""
    statement = api.statement(relation, hypotheses=["softmax"]).statements[0]
    inst = Instance.from_logits(np.array([logits]), softmax(1.0))
    margin = float(statement.evaluate(inst).margin_hi[0])
    placements = relaxed_margins(statement, inst)
    allowed = [p.value for p in placements if p.ok and p.exact]
    assert allowed and allowed == pytest.approx([margin] * len(allowed), rel=1e-12, abs=1e-15), (margin, allowed)
    assert any(not p.ok for p in placements)
