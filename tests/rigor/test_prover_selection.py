"""The relaxation prover on statements that read the top-N selection (``abar_N``, the mass of the N heaviest tokens).

- a false statement on the selection (for softmax, and for monotone normalisers whose log F increases or decreases in
  the logit) is never PROVED; it is REFUTED by an instance that certifies as violated;
- a true one the model closes is PROVED, and its certificate replays from its JSON alone;
- every relaxed problem has the threshold between the selected tokens and the others as a coordinate over the whole
  span of the logits, and a feasible point has at least one selected token (``N >= 1``: ``nu = N / L >= t = 1 / L``);
- at a feasible point where L and N are whole numbers, the instance realised has that L and N, and its margin is
  the relaxed margin there (the selected atoms are the N heaviest tokens, on the right side of the threshold);
- a statement that reads distinguished tokens and the selection relaxes each on either side of it: true bounds
  are proved for every assignment, false ones never, and an instance is a point of its assignment's problem.
"""

from __future__ import annotations

import itertools
import json
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
import sympy as sp

from attnbounds.theory.deciding import prover
from attnbounds.theory.deciding.certify import certify
from attnbounds.theory.deciding.prover import _instance
from attnbounds.theory.deciding.prover.relax import relax, t_sym
from attnbounds.theory.io.userbounds import load_data
from attnbounds.theory.mathematics.normalisers import constructors_added
from attnbounds.theory.mathematics.instance import Instance

#: log F increasing (bsig: F in (2, 3)) and decreasing (dsig: F in (1, 2)) in the logit
NORMALISERS = """
[[normaliser]]
name = "bsig"
log_F = "log(2 + sigmoid(l/T))"

[[normaliser]]
name = "dsig"
log_F = "log(2 - sigmoid(l/T))"

[[normaliser]]
name = "gauss"
log_F = "-(l/T)**2"
"""
BUDGET = 2.0
nu_sym = sp.Symbol("nu", positive=True)


@contextmanager
def _statement(relation: str, normaliser: str | None) -> Iterator[Any]:
    """The top-N statement ``relation`` (softmax when ``normaliser`` is None), with the normalisers above known."""
    hypotheses = ["top-N"] if normaliser else ["softmax", "top-N"]
    text = (NORMALISERS + f'[[statement]]\nid = "selection"\nrelation = "{relation}"\n'
            f"hypotheses = {json.dumps(hypotheses)}\n" + (f'normaliser = "{normaliser}"\n' if normaliser else ""))
    ub = load_data(tomllib.loads(text), "selection")
    with constructors_added(ub.normalisers):
        yield ub.statements[0]


@pytest.mark.parametrize("relation, normaliser", [
    ("abar_N <= 2.99*N/(2.99*N + 2*(L - N))", "bsig"),  # the heaviest 3 against 2 + epsilon: 3N/(3N + 2(L - N))
    ("abar_N <= 1.99*N/(1.99*N + L - N)", "dsig"),  # the heaviest at the low logits: 2N/(2N + L - N)
    ("abar_N <= 3/(2*L)", "bsig"),  # N = L: abar_N = 1
    ("abar_N <= 0.99", "bsig"),
    ("abar_N >= 1.01*N/L", None),  # all weights alike: abar_N = N/L
])
def test_a_false_statement_on_the_selection_is_refuted_by_a_certified_counterexample_never_proved(
        relation: str, normaliser: str | None) -> None:
    with _statement(relation, normaliser) as st:
        result = prover.prove(st, work=prover.work_for(BUDGET))
        assert result.status != "proved", f"{relation} ({normaliser}) is false and was PROVED"
        assert result.status == "refuted", (result.status, result.reason)
        ce = result.counterexample
        assert ce.N is not None and 1 <= ce.N <= ce.L
        assert certify(st, ce).status == "violated", (ce.L, ce.N)


@pytest.mark.parametrize("relation, normaliser", [
    ("abar_N <= 3*N/(3*N + 2*(L - N))", "bsig"),
    ("abar_N <= 2*N/(2*N + L - N)", "dsig"),
    ("abar_N >= N/L", "bsig"),
    ("abar_N >= N/L", "dsig"),
    ("abar_N <= 1", None),
    ("abar_N >= 0", None),
])
def test_a_true_statement_on_the_selection_is_proved_and_its_certificate_replays(
        relation: str, normaliser: str | None) -> None:
    with _statement(relation, normaliser) as st:
        result = prover.prove(st, work=prover.work_for(BUDGET))
        assert result.status == "proved", (result.status, result.reason)
        ok, why = prover.replay(st, json.loads(json.dumps(result.to_json())))
        assert ok, why


CASES = [("abar_N <= 3*N/(3*N + 2*(L - N))", "bsig"), ("abar_N >= N/L", "dsig"), ("abar_N >= N/L", None)]


@pytest.mark.parametrize("relation, normaliser", CASES)
def test_the_threshold_spans_the_logits_and_a_feasible_point_has_at_least_one_selected_token(
        relation: str, normaliser: str | None) -> None:
    with _statement(relation, normaliser) as st:
        rel = relax(st)
    rng = np.random.default_rng(1)
    for problem in rel.problems:
        coords = {c.symbol: c for c in problem.coordinates}
        theta = next(c for c in problem.coordinates if c.symbol.name == "theta")
        atoms = [c for c in problem.coordinates if c.symbol.name.startswith("sigma_")]
        assert atoms and all((theta.lo, theta.hi) == (a.lo, a.hi) for a in atoms), problem.coordinates
        assert coords[nu_sym].lo == 0.0 and coords[nu_sym].hi == 1.0 and t_sym in coords
        for _ in range(200):
            values = {s: rng.uniform(c.lo, min(c.hi, 1e3)) for s, c in coords.items()}
            feasible = all(float(con.xreplace(values)) >= 0 for con in problem.constraints)
            assert not feasible or values[nu_sym] >= values[t_sym], values
            if values[nu_sym] >= values[t_sym]:
                assert feasible, (values, problem.constraints)


@pytest.mark.parametrize("relation, normaliser", CASES)
def test_a_realised_instance_has_the_point_s_length_and_selection_and_its_relaxed_margin(
        relation: str, normaliser: str | None) -> None:
    with _statement(relation, normaliser) as st:
        rel = relax(st)
        rng = np.random.default_rng(2)
        checked = 0
        for problem in rel.problems:
            for _ in range(60):
                L = int(rng.integers(1, 40))
                N = int(rng.integers(1, L + 1))
                values = {c.symbol: rng.uniform(c.lo, c.hi) for c in problem.coordinates}
                values.update({t_sym: 1.0 / L, nu_sym: N / L})
                inst = _instance(problem, rel, values)
                assert inst is not None, values
                assert (inst.L, inst.N) == (L, N), values
                relaxed = float(problem.margin.xreplace({s: sp.Float(v, 30) for s, v in values.items()}))
                ev = st.evaluate(inst)
                assert bool(ev.applicable[0])
                assert float(ev.margin_lo[0]) - 1e-9 <= relaxed <= float(ev.margin_hi[0]) + 1e-9, (values, relaxed)
                checked += 1
        assert checked


def test_without_a_threshold_a_feasible_point_has_its_selected_tokens_heaviest() -> None:
    """A log F that is not monotone in the logit (``-(l/T)^2``) has no threshold: the selected atoms are constrained
    to be at least as heavy as every other atom. At a feasible point with one atom on each side (masses 1, so the
    counts are exact), the instance realised has the point's L and N, and its top-N mass, taken from its own weights,
    gives the relaxed margin; a point with a selected atom lighter than the other is infeasible."""
    with _statement("abar_N >= N/L", "gauss") as st:
        rel = relax(st)
        rng = np.random.default_rng(3)
        checked = refused = 0
        for problem in rel.problems:
            assert not any(c.symbol.name == "theta" for c in problem.coordinates)
            for _ in range(200):
                L = int(rng.integers(2, 40))
                N = int(rng.integers(1, L))
                values = {c.symbol: 1.0 if c.symbol.name in ("w_0", "v_0") else rng.uniform(c.lo, c.hi)
                          for c in problem.coordinates}
                values.update({t_sym: 1.0 / L, nu_sym: N / L})
                if not all(float(con.xreplace(values)) >= 0 for con in problem.constraints):
                    refused += 1
                    continue
                inst = _instance(problem, rel, values)
                assert inst is not None and (inst.L, inst.N) == (L, N), values
                relaxed = float(problem.margin.xreplace({s: sp.Float(v, 30) for s, v in values.items()}))
                ev = st.evaluate(inst)
                assert float(ev.margin_lo[0]) - 1e-9 <= relaxed <= float(ev.margin_hi[0]) + 1e-9, (values, relaxed)
                checked += 1
        assert checked and refused  # both sides drawn


TOKENS_AND_SELECTION_TRUE = ["alpha_i <= abar_N", "alpha_max <= abar_N", "abar_N <= N*alpha_max",
                             "abar_N >= N*alpha_min", "abar_N <= 1 - (L - N)*alpha_min"]
TOKENS_AND_SELECTION_FALSE = ["abar_N >= N*alpha_max", "alpha_max <= abar_N/N", "alpha_i >= abar_N/N",
                              "abar_N > N*alpha_min", "abar_N <= (N - 1/2)*alpha_max", "alpha_min >= abar_N/(N + 1)"]


@pytest.mark.parametrize("normaliser", [None, "bsig"])
@pytest.mark.parametrize("relation", TOKENS_AND_SELECTION_TRUE)
def test_distinguished_tokens_with_the_selection_are_proved_each_on_either_side(relation: str, normaliser: str | None
                                                                               ) -> None:
    """Each distinguished token is a selected token or another one (a problem per assignment, all proved): the top-N
    mass against the largest or the smallest weight, true for every F (each selected weight lies between them)."""
    with _statement(relation, normaliser) as st:
        result = prover.prove(st, work=prover.work_for(2 * BUDGET))  # (two plans, each assignment of sides)
        assert result.status == "proved", (relation, result.status, result.reason)
        ok, why = prover.replay(st, json.loads(json.dumps(result.to_json())))
        assert ok, why
        texts = {p.pattern for p in relax(st).problems}
        assert any("; selected none of them" in t for t in texts) and any("; selected r0" in t for t in texts), texts


@pytest.mark.parametrize("relation", TOKENS_AND_SELECTION_FALSE)
def test_false_bounds_with_distinguished_tokens_and_the_selection_are_never_proved(relation: str) -> None:
    """Each fails at some instance (unequal weights; a strict one at equal weights): never PROVED; where the prover
    refutes, its counterexample certifies as violated."""
    with _statement(relation, None) as st:
        result = prover.prove(st, work=prover.work_for(BUDGET))
        assert result.status != "proved", relation
        if result.status == "refuted":
            assert certify(st, result.counterexample).status == "violated"


def test_an_instance_with_distinguished_tokens_and_the_selection_is_a_point_with_its_margin() -> None:
    """``abar_N <= N alpha_max`` under softmax (log F = the logit): an instance of a heaviest token (selected, the
    distinguished one), a second selected class and two other classes is the point of the problem that selects r0 at
    ``D`` = each logit less the heaviest one's, ``t = 1/L``, ``rho = (N - 1)/(L - 1)``, the classes' shares as
    masses (atoms beyond the classes at mass 0): inside the box, every constraint satisfied, and the relaxed margin
    is the instance's. The same instance with the heaviest token counted among the others is no point of it."""
    from attnbounds.theory.mathematics.normalisers import softmax

    with _statement("abar_N <= N*alpha_max", None) as st:
        rel = relax(st)
    logits, counts = [2.0, 1.0, 0.5, -1.0], [1, 2, 2, 3]  # selected: the first two classes, N = 3 of L = 8
    N, L = 3, 8
    inst = Instance.from_logits(np.array([logits]), softmax(1.0), counts=np.array([counts]), N=N)
    ev = st.evaluate(inst)
    checked = 0
    for problem in rel.problems:
        if problem.realisation.get("role_selected") != [True] or problem.realisation.get("reference") is None:
            continue
        coords = {c.symbol.name: c for c in problem.coordinates}
        point = {"t": 1 / L, "rho": (N - 1) / (L - 1), "v_0": 1.0, "v_1": 0.0, "w_0": 2 / 5, "w_1": 1.0}
        for j in range(3):
            point[f"D_s{j}"] = logits[1] - logits[0]
            point[f"D_o{j}"] = (logits[2] if j == 0 else logits[3]) - logits[0]
        assert all(coords[k].lo <= v <= coords[k].hi for k, v in point.items() if k in coords), (point, coords)
        subs = {coords[k].symbol: sp.Float(v, 30) for k, v in point.items() if k in coords}
        assert all(float(con.xreplace(subs)) >= -1e-25 for con in problem.constraints), problem.constraints
        relaxed = float(problem.margin.xreplace(subs))
        assert float(ev.margin_lo[0]) - 1e-12 <= relaxed <= float(ev.margin_hi[0]) + 1e-12, (relaxed, ev.margin)
        checked += 1
    assert checked
    # the heaviest token as one of the others: every selected token would be heavier than it, which none is
    for problem in rel.problems:
        if problem.realisation.get("role_selected") == [False] and problem.realisation.get("reference") is not None:
            coords = {c.symbol.name: c for c in problem.coordinates}
            assert coords["D_s0"].lo >= 0.0, coords["D_s0"]  # a selected atom at least the distinguished one


def test_every_F_with_the_selection_is_relaxed_through_log_F_differences() -> None:
    """Every F at once (log F values as coordinates) with the top-N selection: the selected atoms are shifted with the
    others when the relation is checked to read log F only through differences (abar_N, a ratio of totals, is free of
    a common shift once exp(D + c) = exp(D) e^c cancels), so the statement is relaxed, not declined for reading log F
    itself. ``abar_N <= 1`` and ``abar_N >= N/L`` are proved and replay; ``abar_N <= 0.99`` (false: one selected
    token of all the weight), ``abar_N > N/L`` (false at equal F values) and ``abar_N < 1`` (false at N = L) never."""
    from attnbounds.theory.running import api

    def st(relation: str) -> Any:
        return api.statement(relation, hypotheses=["F-positive", "top-N"], id="every-F").statements[0]

    for relation in ("abar_N <= 1", "abar_N >= N/L"):
        result = prover.prove(st(relation), work=prover.work_for(BUDGET))
        assert result.status == "proved", (relation, result.reason)
        ok, why = prover.replay(st(relation), json.loads(json.dumps(result.to_json())))
        assert ok, why
    for relation in ("abar_N <= 0.99", "abar_N > N/L", "abar_N < 1"):
        assert prover.prove(st(relation), work=prover.work_for(BUDGET)).status != "proved", relation


@pytest.mark.parametrize("relation", ["abar_N >= N/L", "abar_N <= 1", "abar_N*L >= 2*N - L"])
def test_every_F_with_the_selection_holds_every_instance_at_a_point_with_its_margin(relation: str) -> None:
    """The every-F relaxation with the selection anchors log F at the least selected token's: the selected atoms'
    ``D >= 0``, the others' ``D <= 0``. An instance of two selected classes and two others (softmax, so log F is the
    logit; any F has such log-F values) is the point with those differences, masses count / N and count / (L - N),
    t = 1/L, nu = N/L: inside the box, every constraint satisfied, and the relaxed margin is the instance's."""
    from attnbounds.theory.mathematics.normalisers import softmax
    from attnbounds.theory.running import api

    st = api.statement(relation, hypotheses=["F-positive", "top-N"], id="every-F").statements[0]
    problems = relax(st).problems
    assert problems
    rng = np.random.default_rng(5)
    for problem, _ in itertools.product(problems, range(20)):
        coords = {c.symbol.name: c for c in problem.coordinates}
        sel = np.sort(rng.normal(0.0, 3.0, 2))[::-1] + 1.0
        oth = np.minimum(rng.normal(0.0, 3.0, 2), sel.min() - rng.uniform(0.0, 2.0))
        n_sel, n_oth = rng.integers(1, 6, 2), rng.integers(1, 6, 2)
        N, L = int(n_sel.sum()), int(n_sel.sum() + n_oth.sum())
        inst = Instance.from_logits(np.array([[*sel, *oth]]), softmax(1.0), counts=np.array([[*n_sel, *n_oth]]), N=N)
        theta = sel.min()
        point = {"t": 1.0 / L, "nu": N / L, "D_s0": sel[0] - theta, "D_s1": sel[1] - theta, "D_o0": oth[0] - theta,
                 "D_o1": oth[1] - theta, "v_0": n_sel[0] / N, "w_0": n_oth[0] / (L - N)}
        values = {coords[k].symbol: v for k, v in point.items() if k in coords}
        assert all(coords[k].lo <= v <= coords[k].hi for k, v in point.items() if k in coords), point
        subs = {s: sp.Float(float(v), 30) for s, v in values.items()}
        assert all(float(con.xreplace(subs)) >= 0 for con in problem.constraints), point
        relaxed = float(problem.margin.xreplace(subs))
        ev = st.evaluate(inst)
        assert float(ev.margin_lo[0]) - 1e-9 <= relaxed <= float(ev.margin_hi[0]) + 1e-9, (point, relaxed, ev)
