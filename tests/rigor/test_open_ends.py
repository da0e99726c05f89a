"""Open ends of the relaxed box (issue 33): points of the closure that no instance reaches.

A strict bound whose margin tends to 0 only toward such a point (a softmax weight 0 or 1, T = 0, L -> oo) is true,
and the prover proves it by projecting onto that end only where the core strictly grows away from it (there the face
needs ``core >= 0``). Each end is derived from the problem alone (:meth:`Problem.open_end`), so the replay re-derives
it: a proof replayed on a problem where the end is reached (L = 1 for the last weight's 1, a bound that is not
strict) is refused. The false twins, whose margin is 0 or negative at a reachable point, are never proved.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import sympy as sp

from attnbounds.theory.deciding import prover
from attnbounds.theory.deciding.prover import bnb
from attnbounds.theory.deciding.prover.problem import Coordinate, Problem
from attnbounds.theory.deciding.prover.relax import relax
from attnbounds.theory.running import api

#: true strict bounds whose margin reaches 0 only at an open end (truths derived in tests/quality/tight_set.toml,
#: family "open"): a weight never 0, the largest weight never 1 once L >= 2, J_entry's 1/(4T) only as T -> 0
TRUE = {
    "alpha_max < 1": {"ranges": {"L": [2, 10**9]}},
    "J_entry < 1/(4*T) + 1e-6": {},
    # alpha_max >= the others' mean and alpha_min > 0: the multiplier closure on the face of a face, at the corner
    # where t, alpha_max's and alpha_min's shares are all 0
    "alpha_max + alpha_min > 1/L": {},
}
#: their twins, false at a point some instance reaches (L = 1; L = 2 with equal logits)
FALSE = {
    "alpha_max < 1": {},
    "J_entry < 1/(4*T)": {},
    "alpha_max + alpha_min > 2/L": {},
    "alpha_min > 1e-300": {},
}


def _statement(relation: str, extra: dict) -> object:
    return api.statement(relation, hypotheses=["softmax"], id="open", **extra).statements[0]


@pytest.mark.parametrize("relation", list(TRUE))
def test_a_strict_bound_tight_only_at_an_open_end_is_proved_through_it_and_replays(relation: str) -> None:
    st = _statement(relation, TRUE[relation])
    result = prover.prove(st, work=prover.work_for(1.0))
    assert result.status == "proved", (relation, result.reason)
    certificate = json.loads(json.dumps(result.to_json()))
    tokens = [tok for report in result.reports for tok in bnb.decode(report.outcome.tree.encode(), 10**8)]
    assert any((tok.startswith("P") and ("<" in tok or ">" in tok)) or tok.startswith("L") for tok in tokens), tokens
    assert prover.replay(st, certificate)[0]


def test_a_weight_above_0_is_proved_through_a_denominator_positive_at_every_instance() -> None:
    """``alpha_min > 0``: over log F values (every positive F) the weight is ``t / (t + (1 - t) S)``, and both ``t``
    and the denominator are positive at every instance (0 and the infinite ends of D are open: no instance, F
    positive and finite), so the core is 1 and closes at once; the certificate replays."""
    st = _statement("alpha_min > 0", {})
    result = prover.prove(st, work=prover.work_for(1.0))
    assert result.status == "proved", result.reason
    assert prover.replay(st, json.loads(json.dumps(result.to_json())))[0]


@pytest.mark.parametrize("relation", list(FALSE))
def test_their_false_twins_are_never_proved(relation: str) -> None:
    assert prover.prove(_statement(relation, FALSE[relation]), work=prover.work_for(1.0)).status != "proved"


def _problems(relation: str, extra: dict) -> list[Problem]:
    rel = relax(_statement(relation, extra))
    return [p for per in rel.strategies for strat in per for group in strat for p in group.alternatives]


def _weights_problem(relation: str, extra: dict) -> Problem:
    return _problems(relation, extra)[0]


def test_the_largest_weights_one_is_open_only_while_another_token_remains() -> None:
    """alpha_max's share b is 1 only at L = 1 (no other token): open on boxes with t < 1, reached where t = 1."""
    problem = _weights_problem("alpha_max < 1", {})
    t = next(d for d, c in enumerate(problem.coordinates) if c.kind == "length")
    b = next(d for d, c in enumerate(problem.coordinates) if c.kind == "role")
    lo, hi = np.array([c.lo for c in problem.coordinates]), np.array([c.hi for c in problem.coordinates])
    assert hi[t] == 1.0
    assert problem.open_end(b, -1, lo, hi)  # a weight is never 0
    assert not problem.open_end(b, 1, lo, hi)  # L = 1: alpha_max = 1
    narrow = hi.copy()
    narrow[t] = 0.5
    assert problem.open_end(b, 1, lo, narrow)
    inner = lo.copy()
    inner[b] = 0.25  # a box's end inside the coordinate's range is not the coordinate's end
    assert not problem.open_end(b, -1, inner, hi)
    assert problem.open_end(t, -1, lo, hi) and not problem.open_end(t, 1, lo, hi)  # L -> oo only


@pytest.mark.parametrize("L_range, opens", [(None, False), ([3, 10], True)])
def test_without_a_length_coordinate_the_last_share_is_open_by_the_shortest_length(L_range: list[int] | None,
                                                                                   opens: bool) -> None:
    """A core that never reads t (``J_entry``) has no length coordinate: the last role's share is 1 only at L = k
    (k roles: every token has a role), so its upper end is open exactly when the shortest length of the statement's
    range exceeds k: from L = 1 (one role) or L = 2 (two roles) it is reached, from L = 3 it is not; the other ends
    as with t."""
    problems = [p for p in _problems("J_entry < 1/(4*T)", {} if L_range is None else {"ranges": {"L": L_range}})
                if p.realisation.get("weights_model")]
    assert len({len(p.realisation["role_coordinates"]) for p in problems}) == 2  # one role and two
    for problem in problems:
        assert not any(c.kind == "length" for c in problem.coordinates)
        roles = [d for d, c in enumerate(problem.coordinates) if c.kind == "role"]
        last = next(d for d, c in enumerate(problem.coordinates) if c.symbol == problem.realisation["role_coordinates"][-1])
        lo, hi = np.array([c.lo for c in problem.coordinates]), np.array([c.hi for c in problem.coordinates])
        assert problem.open_end(last, 1, lo, hi) is opens, (L_range, problem.describe())
        for d in roles:
            assert problem.open_end(d, -1, lo, hi)  # a weight is never 0
            if d != last:
                assert problem.open_end(d, 1, lo, hi)  # a token comes after it


def test_in_the_weights_model_only_the_shares_of_roles_and_atoms_have_open_ends() -> None:
    """A stick-breaking mass of the other tokens' atoms is 0 or 1 at real instances (an atom holding no token, or all
    of them), so neither end of it is open; nor is a role's share whose range is not [0, 1] (a box narrowed from
    outside), while an atom's share is open at 0 (a weight is never 0) and not at 1."""
    problem = _weights_problem("J_frobenius < 1/(2*T)", {})
    assert problem.realisation.get("weights_model")
    lo, hi = np.array([c.lo for c in problem.coordinates]), np.array([c.hi for c in problem.coordinates])
    sticks = [d for d, c in enumerate(problem.coordinates) if c.kind == "weight"]
    atoms = [d for d, c in enumerate(problem.coordinates) if c.kind == "atom"]
    assert sticks and atoms
    for d in sticks:
        assert not problem.open_end(d, -1, lo, hi) and not problem.open_end(d, 1, lo, hi)
    for d in atoms:
        assert problem.open_end(d, -1, lo, hi) and not problem.open_end(d, 1, lo, hi)
    roles = _weights_problem("alpha_max < 1", {})
    b = next(d for d, c in enumerate(roles.coordinates) if c.kind == "role")
    half = dataclasses.replace(roles.coordinates[b], hi=0.5)
    twin = dataclasses.replace(roles, coordinates=[half if d == b else c for d, c in enumerate(roles.coordinates)])
    lo, hi = np.array([c.lo for c in twin.coordinates]), np.array([c.hi for c in twin.coordinates])
    assert not twin.open_end(b, -1, lo, hi) and not twin.open_end(b, 1, lo, hi)


def test_a_parameter_is_open_at_0_only_when_its_domain_is_positive() -> None:
    problem = _weights_problem("J_entry < 1/(4*T) + 1e-6", {})
    T = next(d for d, c in enumerate(problem.coordinates) if str(c.symbol) == "T")
    lo, hi = np.array([c.lo for c in problem.coordinates]), np.array([c.hi for c in problem.coordinates])
    assert problem.open_end(T, -1, lo, hi)
    real = dataclasses.replace(problem.coordinates[T], symbol=sp.Symbol("T", real=True))
    twin = dataclasses.replace(problem, coordinates=[real if d == T else c for d, c in enumerate(problem.coordinates)])
    assert not twin.open_end(T, -1, lo, hi)


@pytest.mark.parametrize("multipliers", [True, False])
def test_a_proof_through_an_open_end_replays_only_where_the_end_is_open_and_the_bound_strict(
        multipliers: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The proof of alpha_max < 1 (L >= 2) closes its box by the multiplier 0 (the core alone, >= 0, growing off the
    open share 1), or, with no multiplier tried, projects onto the share 1; on its problem with L from 1 (the end
    reached) or with a share that is not open there the same tree is refused; a projection's limit also needs the
    bound strict."""
    if not multipliers:
        monkeypatch.setattr(bnb, "MULTIPLIER_TRIES", 0)
    st = _statement("alpha_max < 1", TRUE["alpha_max < 1"])
    result = prover.prove(st, work=prover.work_for(1.0))
    # (the longest length, 10^9, whose 1/L no float holds, is a problem of its own: t exact, no length coordinate)
    (report,) = [r for r in result.reports if any(c.kind == "length" for c in r.problem.coordinates)]
    problem, tokens = report.problem, bnb.decode(report.outcome.tree.encode(), 10**8)
    if multipliers:
        assert tokens == ["L0:0/1"], tokens
    else:
        assert any(">" in tok for tok in tokens if tok.startswith("P")), tokens
    assert bnb.replay(problem, tokens)[0]
    t = next(d for d, c in enumerate(problem.coordinates) if c.kind == "length")
    reached = dataclasses.replace(problem, coordinates=[dataclasses.replace(c, hi=1.0) if d == t else c
                                                        for d, c in enumerate(problem.coordinates)])
    twins = [reached, dataclasses.replace(problem, realisation={**problem.realisation, "weights_model": False})]
    for twin in twins if multipliers else [*twins, dataclasses.replace(problem, strict=False)]:
        ok, what, _ = bnb.replay(twin, tokens)
        assert not ok and ("does not re-check" if multipliers else "onto a limit along") in what, what
    if not multipliers:
        plain = [tok.replace(">", "+") if tok.startswith("P") else tok for tok in tokens]  # the face kept strict
        assert not bnb.replay(problem, plain)[0]


def test_of_a_concave_coordinates_two_open_ends_one_at_most_is_read_as_a_limit() -> None:
    """``core(lo) >= 0`` and ``core(hi) > 0`` make a concave core ``> 0`` inside; ``>= 0`` at both ends would not."""
    checked = 0
    for problem in _problems("alpha_max + alpha_min > 1/L", {}):  # two roles: the first one's share is open at 0 and 1
        P = bnb.Programs.build(problem)
        lo, hi = bnb._box(problem)
        for d in range(len(lo)):
            if problem.open_end(d, -1, lo, hi) and problem.open_end(d, 1, lo, hi):
                children = bnb._ends(P, (), bnb.Node(lo, hi, lo.copy(), hi.copy()), d)
                assert [c.at_limit for c in children] == [True, False]
                checked += 1
    assert checked


@pytest.mark.parametrize("side", [-1, 1])
def test_growth_off_an_open_end_below_the_doubles_range_is_read_in_rigorous_arithmetic(side: int) -> None:
    """``10^-400 b > 0`` and ``10^-400 (1 - b) > 0`` for a share ``b`` that is never 0 or 1 (a distinguished token
    before the last): the slope off the open end, +-10^-400, rounds to 0 in doubles; its sign is read in balls, and
    the projection onto that end is a limit (``<`` or ``>``) that the replay accepts."""
    b, other = sp.Symbol("b_r0", nonnegative=True), sp.Symbol("b_r1", nonnegative=True)
    core = sp.Integer(10) ** -400 * (b if side < 0 else 1 - b)
    coords = [Coordinate(b, 0.0, 1.0, "role", "share of r0")]
    realisation = {"weights_model": True, "role_coordinates": [b, other], "atom_coordinates": []}
    problem = Problem("tiny", 0, "tiny", coords, core, [], True, core, [], {}, 0, 0, {}, "weights",
                      realisation=realisation)
    assert problem.open_end(0, -1, [0.0], [1.0]) and problem.open_end(0, 1, [0.0], [1.0])
    out = bnb.branch_and_bound(problem, 10**6)
    assert out.status == "proved", out.reason
    tokens = bnb.decode(out.tree.encode(), 10**8)
    assert any(tok == "P0" + ("<" if side < 0 else ">") for tok in tokens), tokens
    assert bnb.replay(problem, tokens)[0]


def test_an_other_tokens_weight_is_open_at_0_and_not_at_1() -> None:
    """An atom of the other tokens has weight ``left * y`` (``y`` over the others' total): never 0 under softmax, so
    ``y = 0`` is open; ``y = 1`` (one token holding the others' whole weight) is an instance when it is the only one.
    Outside the weights model (logits in a box) neither end is open."""
    y, b = sp.Symbol("y_o0", nonnegative=True), sp.Symbol("b_r0", nonnegative=True)
    coords = [Coordinate(y, 0.0, 1.0, "atom", "weight of a token of o0"), Coordinate(b, 0.0, 1.0, "role", "share")]
    weights = {"weights_model": True, "role_coordinates": [b], "atom_coordinates": [y]}
    lo, hi = [0.0, 0.0], [1.0, 1.0]
    problem = Problem("atom", 0, "atom", coords, y, [], True, y, [], {}, 1, 0, {}, "weights", realisation=weights)
    assert problem.open_end(0, -1, lo, hi) and not problem.open_end(0, 1, lo, hi)
    boxed = dataclasses.replace(problem, realisation={**weights, "weights_model": False, "bounded": True})
    assert not any(boxed.open_end(d, side, lo, hi) for d in (0, 1) for side in (-1, 1))


def test_the_record_lists_the_open_ends_of_each_problem() -> None:
    """``faces_as_limits`` in a proof's record: the ends the prover read as limits, derived as it derives them."""
    st = _statement("J_entry < 1/(4*T) + 1e-6", TRUE["J_entry < 1/(4*T) + 1e-6"])
    problems = prover.prove(st, work=prover.work_for(1.0)).to_json()["problems"]
    assert all({"T = 0", "b_r0 = 0"} <= set(p["faces_as_limits"]) for p in problems), problems
    assert any("b_r1 = 1" in p["faces_as_limits"] for p in problems), problems  # a share before the last one
    st = _statement("alpha_max + alpha_min > 1/L", {})
    problems = prover.prove(st, work=prover.work_for(1.0)).to_json()["problems"]
    assert all("t = 0 (L -> oo)" in p["faces_as_limits"] for p in problems), problems


def test_the_two_ends_of_a_concave_coordinate_mark_the_open_one_whichever_side_it_is() -> None:
    """``bnb._ends`` fixes a concave coordinate at each end of the box; the child at an end no instance reaches
    (:meth:`Problem.open_end`) is at the limit (a strict bound needs only ``core >= 0`` there), the other not. alpha_max's
    share on a box from 1/4 up to 1 with t <= 1/2: its upper end 1 is open (another token remains), its lower end is
    inside the range; from 0 up to 3/4: the lower end 0 is open (a softmax weight is never 0), the upper end inside."""
    problem = _weights_problem("alpha_max < 1", {})
    t = next(d for d, c in enumerate(problem.coordinates) if c.kind == "length")
    b = next(d for d, c in enumerate(problem.coordinates) if c.kind == "role")
    P = bnb.Programs(problem)
    for b_lo, b_hi, opened in ((0.25, 1.0, 1), (0.0, 0.75, -1), (0.25, 0.75, 0)):
        lo, hi = np.array([c.lo for c in problem.coordinates]), np.array([c.hi for c in problem.coordinates])
        lo[b], hi[b], hi[t] = b_lo, b_hi, 0.5
        assert [problem.open_end(b, side, lo, hi) for side in (-1, 1)] == [opened == -1, opened == 1]
        node = bnb.Node(lo.copy(), hi.copy(), lo.copy(), hi.copy())
        children = bnb._ends(P, (), node, b)
        assert [(float(c.lo[b]), float(c.hi[b])) for c in children] == [(b_lo, b_lo), (b_hi, b_hi)]
        assert [c.at_limit for c in children] == [opened == -1, opened == 1], (b_lo, b_hi)


@pytest.mark.parametrize("relation", ["J_entry < 1/(4*T)", "alpha_max + alpha_min > 2/L"])
def test_a_strict_bound_refuted_at_its_equality_case_says_so(relation: str) -> None:
    """The margin is exactly 0 at two equal logits: the reason names an equality case, not a negative margin."""
    result = prover.prove(_statement(relation, {}), work=prover.work_for(1.0))
    assert result.status == "refuted", result.reason
    assert "0 at an equality case of a strict bound" in result.reason and "negative" not in result.reason, result.reason
