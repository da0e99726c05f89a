"""The facts a relaxed problem rests on are re-checked, and the prover's refusals say where they stopped (issue 35).

- a sign fact (an absolute value replaced by its argument's sign on the whole box) is accepted only when interval
  arithmetic shows that sign on the whole root box: positive facts need the lower end >= 0, negative ones the upper
  end <= 0 (a fact read the wrong way round would let a replay accept a wrong core);
- a box too narrow to split that stays undecided is reported with its coordinates (the prover says where it
  stopped, rather than failing);
- when the work runs out, the box reported as nearest a counterexample is an open one whose parent has the lowest
  float lower bound of the margin among the open boxes' parents, and that bound is the one reported;
- a parameter's symbol carries exactly the sign its box and domain give (what sympy may simplify with);
- a statement reading a quantity the relaxation cannot read (no relaxed form, or the selection with no top-N
  hypothesis), in any conjunct, is declined by the relaxation and by the prover with the reason that names it;
- the hypotheses are read the same in any order, and log F is found monotone in the logit exactly when it is (the
  top-N selection is then the tokens beyond a threshold), a length-aware log F at every length of the statement's
  range of L and at no other;
- a token placed between two ends (a side of the threshold) has a coordinate whose text names those ends in order:
  its logit is at the first end where the coordinate is 0 and at the second where it is 1;
- a property of F a hypothesis asks for (F positive) is accepted only when it holds at every temperature, not at
  T = 1 alone.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
import sympy as sp

from attnbounds.theory.deciding.prover import _check_core
from attnbounds.theory.deciding.prover.problem import Coordinate, Problem
from attnbounds.theory.mathematics.normalisers import l_sym

x, y = sp.symbols("x y", real=True)


def _problem(lo: float, hi: float, signs: list[tuple[sp.Expr, int]]) -> Problem:
    return Problem("test", 0, "test", [Coordinate(x, lo, hi, "parameter", "x")], x + 2, [], False, x + 2, [], {}, 0, 0,
                   {}, "test", signs)


@pytest.mark.parametrize("lo, hi, sign, holds", [
    (0.0, 1.0, 1, True), (0.5, 2.0, 1, True), (-1.0, 1.0, 1, False), (-1.0, -0.5, 1, False),
    (-1.0, 0.0, -1, True), (-2.0, -0.5, -1, True), (-1.0, 1.0, -1, False), (0.5, 1.0, -1, False),
    (0.0, 0.0, 1, True), (0.0, 0.0, -1, True), (-math.inf, -1.0, -1, True), (1.0, math.inf, 1, True),
])
def test_a_sign_fact_holds_only_when_certain_on_the_whole_box(lo: float, hi: float, sign: int, holds: bool) -> None:
    why = _check_core(_problem(lo, hi, [(x, sign)]))
    assert (why is None) == holds, why


def test_a_sign_fact_over_a_symbol_outside_the_coordinates_is_refused() -> None:
    why = _check_core(_problem(0.0, 1.0, [(sp.Symbol("y", real=True), 1)]))
    assert why is not None and "outside the coordinates" in why


def test_bounds_far_below_the_doubles_are_decided_by_the_prover() -> None:
    """softmax with |l| <= 800 and T = 1: L alpha_min >= exp(-1600) is true (L alpha_min = L e^-1600 / (L - 1 +
    e^-1600) at the worst logits, > e^-1600, approached as L grows) and L alpha_min >= exp(-1599) is false already at
    L = 2 (2 e^-1600 / (1 + e^-1600) < e^-1599); both sides lie far below the doubles, where the float tier sees 0:
    the prover reads those boxes in rigorous arithmetic, proves the first (the certificate replays) and realises a
    counterexample of the second that certification confirms."""
    import json

    from attnbounds.theory.deciding import prover
    from attnbounds.theory.deciding.certify import certify
    from attnbounds.theory.running import api

    def statement(rhs: str) -> Any:
        return api.statement(f"alpha_min*L >= {rhs}", hypotheses=["softmax", "logits-bounded"],
                             fixed={"a": 800.0, "T": 1.0}, id="tiny").statements[0]

    true = statement("exp(-1600)")
    proved = prover.prove(true, work=prover.work_for(1.0))
    assert proved.status == "proved", proved.reason
    assert prover.replay(true, json.loads(json.dumps(proved.to_json())))[0]
    false = statement("exp(-1599)")
    refuted = prover.prove(false, work=prover.work_for(1.0))
    assert refuted.status == "refuted" and refuted.counterexample is not None, refuted.reason
    assert certify(false, refuted.counterexample).status == "violated"


def test_a_box_certainly_negative_below_the_doubles_is_a_counterexample_box_at_once() -> None:
    """``e^-1600 (x^2 - 3)`` on ``|x| <= 1``: the float tier sees 0 on the root box (an underflow), rigorous arithmetic
    shows the margin negative on the whole of it; the root box itself is then the counterexample box (nothing split,
    nothing projected), and it is a box of points where the margin is negative."""
    from attnbounds.theory.deciding.prover import bnb

    core = sp.exp(-1600) * (x**2 - 3)
    problem = Problem("test", 0, "test", [Coordinate(x, -1.0, 1.0, "parameter", "x")], core, [], False, core, [], {},
                      0, 0, {}, "test", [])
    outcome = bnb.branch_and_bound(problem, 10**7)
    assert outcome.status == "negative", outcome.reason
    assert outcome.negative is not None and outcome.boxes == 1, (outcome.reason, outcome.boxes)
    assert outcome.negative.lo.tolist() == [-1.0] and outcome.negative.hi.tolist() == [1.0], outcome.reason
    assert all(core.subs(x, sp.Rational(v)) < 0 for v in (-1, 0, 1))


@pytest.mark.parametrize("lo", [-math.inf, -1.0, -1e-300, 0.0, 1e-300, 0.5, 3.0])
@pytest.mark.parametrize("positive_domain", [False, True])
def test_a_parameter_symbol_carries_exactly_the_sign_its_box_and_domain_give(lo: float, positive_domain: bool) -> None:
    """sympy simplifies with a symbol's assumptions (``Abs(c) = c`` for ``c >= 0``): a parameter's coordinate symbol
    may say ``>= 0`` only when its box's lower end is ``>= 0`` and ``> 0`` only when moreover its domain says so or the
    box's lower end is ``> 0``; and it does say ``>= 0`` whenever the box does (the sign the simplification may use)."""
    from attnbounds.theory.deciding.prover.relax import _symbol

    c = _symbol("c", lo, positive_domain)
    assert c.is_real
    if c.is_nonnegative:
        assert lo >= 0, (lo, positive_domain, c.assumptions0)
    if c.is_positive:
        assert lo > 0 or (lo >= 0 and positive_domain), (lo, positive_domain, c.assumptions0)
    if lo >= 0:
        assert c.is_nonnegative, (lo, positive_domain, c.assumptions0)
    if positive_domain and lo >= 0:
        assert c.is_positive, (lo, positive_domain, c.assumptions0)
    if lo < 0:  # nothing a box reaching below 0 does not allow: |c| stays |c|
        assert sp.Abs(c) != c and c.is_nonnegative is None, (lo, c.assumptions0)


def _user_statement(log_F: str, hypotheses: list[str], **kw: Any) -> Any:
    from attnbounds.theory.running import api

    return api.statement("alpha_max >= 1/L", hypotheses=hypotheses, normaliser={"name": "userF", "log_F": log_F},
                         id="userF", **kw)


@pytest.mark.parametrize("log_F, status", [("l/T", "proved"), ("2*l/T", "declined"), ("l**3/T", "declined")])
def test_the_relaxation_reads_the_hypotheses_in_any_order(log_F: str, status: str) -> None:
    """The hypotheses are a conjunction: the softmax hypothesis with a user normaliser whose ``log F`` is ``l / T``
    (the softmax itself: ``alpha_max >= 1/L``, the largest weight is at least the mean, is proved) is read the same
    whether the normaliser comes before or after it; with a ``log F`` that is not ``l / T + c`` (``2 l / T``, a softmax
    at another temperature than the statement's T, or ``l^3 / T``) the relaxation declines in either order."""
    import dataclasses

    from attnbounds.theory.deciding import prover
    from attnbounds.theory.mathematics.normalisers import constructors_added

    user = _user_statement(log_F, ["softmax"])
    with constructors_added(user.normalisers):
        statement = user.statements[0]
        for order in (statement.hypotheses, tuple(reversed(statement.hypotheses))):
            st = dataclasses.replace(statement, hypotheses=type(statement.hypotheses)(order))
            result = prover._prove(st, work=prover.work_for(1.0))  # its own relaxation, no stronger statement
            assert result.status == status, ([h.id for h in st.hypotheses], result.status, result.reason)


@pytest.mark.parametrize("relation, quantity", [
    ("x_max >= 0", "x_max"),                            # no relaxed form
    ("abar_N <= 1", "abar_N"),                          # reads the selection I_N, and no hypothesis fixes it
    ("(alpha_max >= 1/L) & (x_max >= 0)", "x_max"),     # one conjunct relaxed, the other not
    ("(x_max >= 0) & (alpha_max >= 1/L)", "x_max"),
])
def test_a_quantity_the_relaxation_cannot_read_declines_the_statement(relation: str, quantity: str) -> None:
    """No plan of the relaxation reads the quantity: :func:`relax` raises Declined naming it (a conjunct left with
    no strategy would be closed by nothing), and the prover reports the statement declined with that reason."""
    from attnbounds.theory.deciding import prover
    from attnbounds.theory.deciding.prover.relax import relax
    from attnbounds.theory.deciding.prover.space import Declined
    from attnbounds.theory.running import api

    st = api.statement(relation, hypotheses=["softmax"], id="unread").statements[0]
    with pytest.raises(Declined, match=quantity):
        relax(st)
    result = prover.prove(st, work=prover.work_for(0.2))
    assert result.status == "declined" and quantity in result.reason, (result.status, result.reason)


@pytest.mark.parametrize("log_F, side", [
    ("l/T", 1), ("l**3/T", 1), ("-l**3/T", -1), ("(l/T)**3 + l/T", 1), ("log(2 + sigmoid(l/T))", 1), ("l**2/T", 0)])
@pytest.mark.parametrize("bounded", [False, True])
def test_log_F_is_monotone_in_the_logit_exactly_when_it_is(log_F: str, side: int, bounded: bool) -> None:
    """The top-N selection is the tokens beyond a threshold exactly when log F is monotone in the logit: ``l^3 / T``
    increases (its derivative ``3 l^2 / T`` is 0 at ``l = 0`` only), ``-l^3 / T`` decreases, ``log(2 + sigmoid(l/T))``
    increases (its derivative tends to 0 as the logit goes to infinity, the ends of the compactified coordinate);
    ``l^2 / T`` falls then rises: not monotone (0: no threshold). On unbounded logits and on ``|l| <= a``."""
    import importlib

    from attnbounds.theory.deciding.prover.problem import t_sym
    from attnbounds.theory.deciding.prover.space import TokenModel
    from attnbounds.theory.mathematics.normalisers import constructors_added

    relax = importlib.import_module("attnbounds.theory.deciding.prover.relax")
    user = _user_statement(log_F, ["top-N"] + (["logits-bounded"] if bounded else []),
                           **({"fixed": {"a": 2.0}} if bounded else {}))
    with constructors_added(user.normalisers):
        statement = user.statements[0]
        space = relax._space(statement)
        parameters, coords = relax._parameter_coordinates(statement, space)
        assert TokenModel(space, parameters, 1 / t_sym, coords).monotone() == side


@pytest.mark.parametrize("core", [sp.exp(x * y) - x * y - 1 + (x - y**2) ** 2 - sp.Rational(1, 10**4),
                                  (x**2 - y) ** 2 + sp.Rational(1, 10**6) - x * y / 100])
@pytest.mark.parametrize("work", [10**5, 3 * 10**5])
def test_an_open_outcome_reports_the_open_box_of_lowest_float_bound_on_its_parent(core: sp.Expr, work: int) -> None:
    """Two cores the work limit leaves open: the record's lowest float margin bound is the float tier's lower end of
    the core on an open box's parent (the least of them), finite, and a lower bound of the margin on the box named."""
    from attnbounds.theory.deciding.prover import bnb
    from attnbounds.theory.deciding.prover.program import run_float

    problem = Problem("test", 0, "test", [Coordinate(x, -1.0, 1.0, "parameter", "x"),
                                          Coordinate(y, -1.0, 1.0, "parameter", "y")],
                      core, [], False, core, [], {}, 0, 0, {}, "test", [])
    programs = bnb.Programs.build(problem)
    outcome = bnb.branch_and_bound(problem, work, programs=programs)
    assert outcome.status == "open" and outcome.unexplored is not None, outcome.reason
    left, bound, lo, hi = outcome.unexplored
    parent = {id(c): node for node in outcome.tree.walk() for c in node.children}
    lows = []  # (the float lower end of the core on the parent, the open box)
    for node in outcome.tree.walk():
        if node.kind == "open":
            up = parent[id(node)]
            face = programs.face(up.face)
            outs = run_float(face.enclose, up.lo[None], up.hi[None])
            lows.append((max(float(outs[f][0][0]) for f in range(len(face.forms))), node.lo.tolist(), node.hi.tolist()))
    assert left == len(lows)
    least = min(b for b, _, _ in lows)
    assert math.isfinite(bound) and math.isclose(bound, least, rel_tol=1e-12, abs_tol=1e-300), (bound, least)
    assert any(math.isclose(b, bound, rel_tol=1e-12, abs_tol=1e-300) and (l_, h_) == (lo, hi) for b, l_, h_ in lows)
    # a lower bound of the margin on the box reported
    corners = [{x: sp.Rational(a), y: sp.Rational(c)} for a in (lo[0], hi[0]) for c in (lo[1], hi[1])]
    assert all(bound <= float(core.xreplace(p_)) for p_ in corners)


@pytest.mark.parametrize("log_F, L_range, side", [
    ("l*(10 - L)/T", (2, 8), 1), ("l*(L - 10)/T", (2, 8), -1), ("l*(10 - L)/T", (2, 20), 0), ("l*(10 - L)/T", None, 0),
    ("l*(L - 10)/T", (12, 10**6), 1)])
def test_a_length_aware_log_F_is_monotone_exactly_when_it_is_at_every_length_of_the_range(
        log_F: str, L_range: tuple[int, int] | None, side: int) -> None:
    """``(log F)' = (10 - L) / T`` is positive at every ``L < 10`` and negative beyond: log F increases in the logit
    on a range of L below 10 (its upper end bounds ``t = 1/L`` away from 0), is not monotone on a range reaching
    beyond 10 (or with no upper end), and ``(L - 10) / T`` decreases on the same range below 10."""
    import importlib

    from attnbounds.theory.deciding.prover.problem import t_sym
    from attnbounds.theory.deciding.prover.space import TokenModel
    from attnbounds.theory.mathematics.normalisers import constructors_added

    relax = importlib.import_module("attnbounds.theory.deciding.prover.relax")
    user = _user_statement(log_F, ["top-N"], **({"ranges": {"L": list(L_range)}} if L_range else {}))
    with constructors_added(user.normalisers):
        statement = user.statements[0]
        space = relax._space(statement)
        parameters, coords = relax._parameter_coordinates(statement, space)
        assert TokenModel(space, parameters, 1 / t_sym, coords).monotone() == side


@pytest.mark.parametrize("bounded", [False, True])
def test_a_token_between_two_ends_has_a_coordinate_naming_them_in_order(bounded: bool) -> None:
    """The text of the coordinate of a token placed between ``lo`` and ``hi`` (what a certificate says the
    coordinate is) names ``lo`` then ``hi``: the token's logit is a token's at ``lo`` where the coordinate is 0 and
    at ``hi`` where it is 1."""
    import importlib
    import re

    from attnbounds.theory.deciding.prover.problem import t_sym
    from attnbounds.theory.deciding.prover.space import TokenModel
    from attnbounds.theory.mathematics.normalisers import constructors_added

    relax = importlib.import_module("attnbounds.theory.deciding.prover.relax")
    user = _user_statement("l/T", ["top-N"] + (["logits-bounded"] if bounded else []),
                           **({"fixed": {"a": 2.0}} if bounded else {}))
    theta = sp.Symbol("theta", real=True)
    with constructors_added(user.normalisers):
        statement = user.statements[0]
        space = relax._space(statement)
        parameters, coords = relax._parameter_coordinates(statement, space)
        model = TokenModel(space, parameters, 1 / t_sym, coords)
        lo_c, hi_c = model.span
        plain = model.new("ref", "role")
        base = plain.coordinates[0].symbol
        for within in ((sp.Integer(int(lo_c)), theta), (theta, sp.Integer(int(hi_c))),
                       (sp.Rational(1, 4), sp.Rational(3, 4))):
            tok = model.new("x", "atom", within)
            coord = tok.coordinates[0]
            match = re.fullmatch(r"place of x between (.+) and (.+)", coord.text)
            assert match is not None, coord.text
            named = [sp.sympify(end, locals={"theta": theta}) for end in match.groups()]
            assert named == list(within), (coord.text, within)
            for value, end in zip((0, 1), named):
                assert tok.l is not None and plain.l is not None
                at = sp.simplify(tok.l.xreplace({coord.symbol: value}))  # -oo or oo at an end of the unbounded s
                assert at == sp.simplify(plain.l.xreplace({base: end})), (coord.text, value, at)


T_ = sp.Symbol("T")


@pytest.mark.parametrize("log_F, holds", [
    (l_sym / T_, True),
    (l_sym / T_ - sp.log(1 + l_sym ** 2), True),
    (sp.log(l_sym ** 2 + (T_ - 1) ** 2), False),  # F(0) = 0 at T = 1
    (sp.log(l_sym ** 2 + (T_ - 2) ** 2), False),  # positive at T = 1, F(0) = 0 at T = 2
    (sp.log(2 - T_ + l_sym ** 2), False),         # positive at T = 1, not real for T > 2
])
def test_a_property_of_F_is_accepted_only_when_it_holds_at_every_temperature(log_F: sp.Expr, holds: bool) -> None:
    """The relaxation ranges over every temperature T > 0: a normaliser whose F is positive at some temperatures and
    not at others does not satisfy 'F positive' (the simplex hypothesis reads it too, and its instances include
    those of F with a zero weight)."""
    from attnbounds.theory.deciding.prover.space import Space
    from attnbounds.theory.running import api

    st = api.statement("alpha_max >= 1/L", hypotheses=["simplex"], id="simplex").statements[0]
    space = Space(st)
    space.normaliser(log_F, {}, "test")
    space.normaliser_property(lambda n: n.positive, "F positive")
    space.check_properties()
    assert (not space.problems) == holds, space.problems
