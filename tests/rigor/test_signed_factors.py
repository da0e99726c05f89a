"""Two rules for equality cases that extend along a whole coordinate (issue 33: Lemma 1's exact constant for a
non-monotone log F holds with equality at every L, and a mixture of two equal atoms is equal at every weight).

- ``strip_signed`` divides the core by the factors of its numerator of known sign on the root box (``t (1 - t)``):
  positive ones always, nonnegative ones only for a non-strict bound, and by a denominator positive on the box; the
  quotient has the core's sign wherever the factors do not vanish.
- the branch and bound replaces a box whose core is concave in a coordinate (affine in it, or its second derivative's
  enclosure ``<= 0`` on the box) by that coordinate's two ends (``A<d>`` in the tree): the replay re-checks the
  concavity on that box and refuses the token elsewhere; at the end t = 0 of t = 1/L a strict bound needs only
  ``>= 0``;
- an absolute value whose argument changes sign inside the root box at ``c (x - v)`` cuts the problem at ``x = v``
  (each part resolves it; Corollary 1 with the i-th key: ``|l_i|``, an identity on either side at its tight face).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import sympy as sp

from attnbounds.theory.deciding.prover import bnb
from attnbounds.theory.deciding.prover.problem import Coordinate, Problem, t_sym
from attnbounds.theory.deciding.prover.relax import strip_signed

t = t_sym
x, w = sp.symbols("x w", real=True)
COORDS = [Coordinate(t, 0.0, 0.5, "length", "t = 1/L"), Coordinate(x, -1.0, 1.0, "parameter", "x"),
          Coordinate(w, 0.0, 1.0, "weight", "w")]


def _values(expr: sp.Expr, rng: np.random.Generator) -> list[tuple[dict[sp.Symbol, float], float]]:
    out = []
    for _ in range(20):
        point = {t: rng.uniform(1e-3, 0.5), x: rng.uniform(-1, 1), w: rng.uniform(0, 1)}
        out.append((point, float(expr.xreplace({k: sp.Float(v, 30) for k, v in point.items()}))))
    return out


@pytest.mark.parametrize("strict", [False, True])
def test_factors_of_known_sign_go_and_the_sign_of_the_core_stays(strict: bool) -> None:
    rest = sp.exp(x) - sp.Rational(3, 2)  # changes sign on the box: what is left to decide
    core = t * (1 - t) * (1 + x**2) * rest / (t + (1 - t) * sp.exp(x))
    out, stripped = strip_signed(core, COORDS, strict)
    # 1 + x^2 and the denominator are > 0 on the box: they go either way; t >= 0 (0 at L -> oo) only when not strict
    assert (t in out.free_symbols) is strict, (out, stripped)
    assert any(">= 0" in s_ for s_ in stripped) is not strict  # the record says which factors were only >= 0
    rng = np.random.default_rng(0)
    for point, value in _values(core, rng):
        reduced = float(out.xreplace({k: sp.Float(v, 30) for k, v in point.items()}))
        assert math.copysign(1, reduced) == math.copysign(1, value) or abs(value) < 1e-12, (point, value, reduced)


def test_a_factor_of_unknown_sign_is_kept() -> None:
    core = (x - sp.Rational(1, 3)) * (sp.exp(x) - 1)  # both factors change sign on the box
    out, stripped = strip_signed(core, COORDS, False)
    assert stripped == [] and out == core


@pytest.mark.parametrize("den", [x, x - sp.Rational(1, 2), sp.exp(x) - 2, t - sp.Rational(1, 4), -(1 + w),
                                 x + w * (1 - t)])
def test_a_denominator_not_positive_at_every_instance_stays(den: sp.Expr) -> None:
    """Dividing the core by its denominator keeps its sign only where the denominator is > 0: one that changes sign
    on the box (x, e^x - 2, t - 1/4, x + w (1 - t)) or is negative on it (-(1 + w)) stays in the core, whatever
    its numerator lets go (t >= 0 and 1 + x^2 > 0), and the core keeps its sign at every point."""
    rest = sp.exp(x) - sp.Rational(3, 2)
    core = t * (1 + x**2) * rest / den
    out, stripped = strip_signed(core, COORDS, False)
    assert not any(s_.startswith("1/(") for s_ in stripped), (out, stripped)
    rng = np.random.default_rng(1)
    for point, value in _values(core, rng):
        reduced = float(out.xreplace({k: sp.Float(v, 30) for k, v in point.items()}))
        assert math.copysign(1, reduced) == math.copysign(1, value) or abs(value) < 1e-12, (point, value, reduced)


def test_a_positive_denominator_reading_what_the_numerator_does_not_goes_only_on_a_bounded_box() -> None:
    """``(e^(20/3 - D) - 1) / (t + (1 - t) (w e^x + 1))``: the denominator is > 0 at every instance and reads t, w,
    the others' coordinates, which the numerator does not: on a bounded box it goes (the sign is the numerator's, a
    function of D alone, monotone: T's range end in alpha_max <= e^(20/3) alpha_min, open before); with an infinite end
    of one of its coordinates it stays, since such an end stands for instances where the denominator has no value
    (sparsemax's weight 0 at D = oo: alpha_min > 0 was proved through it)."""
    D = sp.Symbol("D", nonnegative=True)
    num = sp.exp(sp.Rational(20, 3) - D) - 1
    den = t + (1 - t) * (w * sp.exp(x) + 1)
    bounded = [*COORDS, Coordinate(D, 0.0, 7.0, "parameter", "D")]
    out, stripped = strip_signed(num / den, bounded, False)
    assert out == num and stripped == [f"1/({den}) (> 0 at every instance of the box)"], (out, stripped)
    unbounded = [Coordinate(t, 0.0, 0.5, "length", "t = 1/L"), Coordinate(x, 0.0, math.inf, "atom", "x"),
                 Coordinate(w, 0.0, 1.0, "weight", "w"), Coordinate(D, 0.0, 7.0, "parameter", "D")]
    out, stripped = strip_signed(num / den, unbounded, False)
    assert out == num / den and stripped == [], (out, stripped)


def test_a_factor_negative_on_the_box_goes_with_its_sign_kept() -> None:
    core = (t - 1) * (sp.exp(x) - 2)  # t - 1 < 0 on t in [0, 1/2]: the core is -(1 - t) (e^x - 2)
    out, stripped = strip_signed(core, COORDS, True)
    assert t not in out.free_symbols and stripped
    assert sp.simplify(out - (2 - sp.exp(x))) == 0


def _problem(core: sp.Expr, strict: bool = False) -> Problem:
    return Problem("ends", 0, "test", COORDS, core, [], strict, core, [], {}, 0, 0, {}, "test", [])


def test_a_core_affine_in_a_coordinate_is_closed_through_its_two_ends_and_replays() -> None:
    # w e^x + (1 - w) e^(-x) - e^(-1) (1 - w) ... : affine in w; each end is >= 0 with equality at an end of x
    core = w * (sp.exp(x) - sp.exp(-1)) + (1 - w) * (sp.exp(-x) - sp.exp(-1))
    problem = _problem(core)
    outcome = bnb.branch_and_bound(problem, 10**7)
    assert outcome.status == "proved", outcome.reason
    tokens = bnb.decode(outcome.tree.encode(), 10**8)
    assert "A2" in tokens
    ok, why, _ = bnb.replay(problem, tokens)
    assert ok, why


def test_the_two_ends_of_a_coordinate_the_core_is_not_concave_in_do_not_replay() -> None:
    """The same tree for a core that dips below 0 between the ends of w (less ``w (1 - w)``: convex in w): refused."""
    core = w * (sp.exp(x) - sp.exp(-1)) + (1 - w) * (sp.exp(-x) - sp.exp(-1))
    tokens = bnb.decode(bnb.branch_and_bound(_problem(core), 10**7).tree.encode(), 10**8)
    dipped = _problem(core - w * (1 - w))
    ok, why, _ = bnb.replay(dipped, tokens)
    assert not ok and "concave" in why, why
    forged = ["A7" if tok == "A2" else tok for tok in tokens]  # a coordinate the problem does not have
    assert not bnb.replay(_problem(core), forged)[0]


@pytest.mark.parametrize("core", [
    t + (1 - t) * (1 - w) * sp.exp(x),  # monotone in w, then growing in t: the limit projection
    t + (1 - t) * (x - sp.Rational(1, 3)) ** 2,  # affine in t with a slope 1 - (x - 1/3)^2 of both signs: its two ends
], ids=["monotone", "affine"])
def test_a_strict_bound_whose_margin_vanishes_only_at_t_zero_is_proved(core: sp.Expr) -> None:
    # 0 only at t = 0 (no instance there: L -> oo), > 0 at every t in (0, 1/2]
    outcome = bnb.branch_and_bound(_problem(core, strict=True), 10**7)
    assert outcome.status == "proved", outcome.reason
    # and the same core less a constant, negative at small t > 0 (an instance): never proved
    outcome = bnb.branch_and_bound(_problem(core - sp.Rational(1, 100), strict=True), 10**7)
    assert outcome.status != "proved", outcome.reason


def test_a_core_concave_but_not_affine_in_a_coordinate_is_closed_through_its_ends() -> None:
    # (e^x - 1/e)(1 - w^2) + w^2 (e^-x - 1/e) + w (1 - w): second derivative in w is -2 (e^x - e^-x) - 2 ... concave
    # where e^x >= e^-x - 1, i.e. on x >= 0 say; both ends of w are >= 0 with equality at an end of x
    core = (sp.exp(x) - sp.exp(-1)) * (1 - w) + w * (sp.exp(-x) - sp.exp(-1)) + w * (1 - w)
    problem = _problem(core)
    outcome = bnb.branch_and_bound(problem, 10**7)
    assert outcome.status == "proved", outcome.reason
    tokens = bnb.decode(outcome.tree.encode(), 10**8)
    assert "A2" in tokens
    assert bnb.replay(problem, tokens)[0]
    face = bnb.Programs(problem).face(())
    box_lo, box_hi = np.array([0.1, -1.0, 0.0]), np.array([0.2, 1.0, 1.0])
    assert not face.affine(2, problem.symbols) and face.concave(problem.symbols, box_lo, box_hi, [0])[2]
    convex = bnb.Programs(_problem(core - 2 * w * (1 - w))).face(())
    assert not convex.concave(problem.symbols, box_lo, box_hi, [0])[2]


def test_a_coordinate_the_core_is_affine_in_is_concave_also_where_no_second_derivative_is_enclosed() -> None:
    """Affine in w (its second derivative in w is identically 0): the least value on every box is at an end of w,
    also across a kink (|x|), where no second derivative is enclosed and affinity is all the face can read; x (read
    through the kink and a square) and t (not read) are not affine coordinates."""
    face = bnb.Programs(_problem(w * sp.Abs(x) + (1 - w) * x**2)).face(())
    syms = [c.symbol for c in COORDS]
    assert [face.affine(d, syms) for d in range(3)] == [False, False, True]
    box_lo, box_hi = np.array([0.1, -1.0, 0.0]), np.array([0.2, 1.0, 1.0])
    assert face.concave(syms, box_lo, box_hi, [0]) == [False, False, True]
    curved = bnb.Programs(_problem(w**2 * sp.Abs(x) + (1 - w) * x**2)).face(())
    assert not any(curved.concave(syms, box_lo, box_hi, [0]))


def test_a_root_against_a_nonnegative_rest_is_squared_away_with_the_same_sign() -> None:
    from attnbounds.theory.deciding.prover.relax import rationalise_root

    q = 1 + x**2 * w - x * w  # >= 3/4 on the box
    core = 1 + t - 2 * sp.sqrt(q)
    out, note = rationalise_root(core, COORDS)
    assert note and not out.has(sp.sqrt(q))
    assert sp.expand(out - ((1 + t) ** 2 - 4 * q)) == 0
    rng = np.random.default_rng(1)
    for point, value in _values(core, rng):
        squared = float(out.xreplace({k: sp.Float(v, 30) for k, v in point.items()}))
        assert math.copysign(1, squared) == math.copysign(1, value) or abs(value) < 1e-12
    # a coefficient that reaches 0 on the box (w in [0, 1]) still squares: 1 - w sqrt(q) >= 0 iff 1 >= w^2 q
    out, note = rationalise_root(1 - w * sp.sqrt(q), COORDS)
    assert note and sp.expand(out - (1 - w**2 * q)) == 0
    # a rest that may be negative (x - 2 sqrt(q) < 0 does not follow from x^2 < 4 q when x < 0), or a root with a
    # coefficient of either sign: kept as they are
    for kept in (x - 2 * sp.sqrt(q), 1 + x * sp.sqrt(q), 1 - sp.sqrt(q) - sp.sqrt(1 + w)):
        assert rationalise_root(kept, COORDS) == (kept, [])


def test_an_even_power_of_an_interval_around_zero_is_never_negative() -> None:
    """(y0 - y1)^2 on a box where y0 = y1 is possible: every rigorous tier encloses it in [0, ...] (a ball centred at
    0 squared would keep a negative lower end, and a concavity read from it would be lost)."""
    from attnbounds.theory.deciding.prover.program import compile_program, run_rigorous

    y0, y1 = sp.symbols("y0 y1", real=True)
    program = compile_program([-8 * (y0 - y1) ** 2, (y0 - y1) ** 4], [y0, y1])
    lo, hi = np.array([0.500953, 0.500953]), np.array([0.500954, 0.500954])
    for tier in ("arb", "mpmath.iv"):
        (a_lo, a_hi), (b_lo, b_hi) = run_rigorous(program, lo, hi, tier)
        assert b_lo >= 0 and b_hi > 0, tier
        assert a_lo < 0 and a_hi <= 2.1e-20, tier  # at most a rounding above 0 (arb's balls)


def _kink_problem(core: sp.Expr, coords: list[Coordinate]) -> Problem:
    return Problem("test", 0, "test", coords, core, [], False, core, [], {}, 0, 0, {}, "test", [])


@pytest.mark.parametrize("arg, cut", [
    (lambda b, u, y: b * u, ("u", 0.0)),                       # a nonnegative parameter times a coordinate
    (lambda b, u, y: -3 * (u - sp.Rational(1, 4)), ("u", 0.25)),  # an affine factor with a constant
    (lambda b, u, y: (1 + y**2) * (2 * u + 1), ("u", -0.5)),     # the other factor positive on the box
    (lambda b, u, y: y * u, None),                              # the other factor changes sign too: no single cut
    (lambda b, u, y: u - sp.Rational(1, 3), None),              # 1/3 is not a double: no exact cut
    (lambda b, u, y: u + 2, None),                              # no sign change inside the box
    (lambda b, u, y: (1 + y**2) * (u + 1), None),               # a sign change at the range's lower end only
    (lambda b, u, y: 2 * (1 - u), None),                        # at its upper end only
    (lambda b, u, y: u**2 - sp.Rational(1, 4), None),           # not affine in u
])
def test_an_absolute_value_is_cut_exactly_where_its_argument_changes_sign(arg: Any, cut: tuple[str, float] | None
                                                                          ) -> None:
    """A kink ``|c (x - v)|`` the root box leaves unresolved is cut at ``x = v`` (a double strictly inside the range),
    where each side resolves its sign; nothing else is cut, a sign change at an end of the range neither (one side
    would be the end alone) (:func:`relax._kink`)."""
    from attnbounds.theory.deciding.prover.relax import _kink
    from attnbounds.theory.mathematics.opaque import OAbs

    b, u, y = sp.symbols("beta u y", real=True)
    coords = [Coordinate(b, 0.0, math.inf, "parameter", "beta"), Coordinate(u, -1.0, 1.0, "role", "u"),
              Coordinate(y, -1.0, 1.0, "role", "y")]
    found = _kink(_kink_problem(sp.exp(b) - OAbs(arg(b, u, y)), coords))
    assert (None if found is None else (str(found[0]), found[1])) == cut


def test_a_margin_whose_quotient_hides_its_monotonicity_is_proved_in_its_own_grouping() -> None:
    """``alpha_max <= e^(2a/T) / (e^(2a/T) + L - 1)``: divided by ``t (1 - t)`` the core is one fraction whose
    numerator expands the others' mixture ``w A + (1 - w) B``, and no projection reads its monotonicity in the
    logits; the problem before that division is an alternative of the same group, and its monotone projections
    close it at once (the margin is exactly 0 on the face they reach). Either alternative proves the group."""
    from attnbounds.theory.deciding.prover.relax import relax
    from attnbounds.theory.running.api import statement

    st = statement("alpha_max <= exp(2*a/T)/(exp(2*a/T) + L - 1)", hypotheses=["softmax", "logits-bounded"],
                   defaults={"a": "logit_absmax"}).statements[0]
    pairs = [g.alternatives for per in relax(st).strategies for strategy in per for g in strategy
             if len(g.alternatives) == 2 and g.alternatives[0].unsigned is not None]
    assert pairs, "no problem with factors of known sign divided out"
    for quotient, own in pairs:
        assert own.unsigned is None and own.core == quotient.unsigned[0] and own.coordinates == quotient.coordinates
        assert len(own.stripped) < len(quotient.stripped)
    logits = [pair for pair in pairs if any(str(c.symbol).startswith("u_") for c in pair[1].coordinates)]
    assert logits
    outcome = bnb.branch_and_bound(logits[0][1], 2 * 10**6)
    assert outcome.status == "proved", outcome.reason
    assert bnb.replay(logits[0][1], bnb.decode(outcome.tree.encode(), 10**8))[0]


def test_the_undivided_twin_is_tried_first_on_a_probe_and_the_quotient_gets_the_rest() -> None:
    """A group's budgets (:func:`prover._budgets`): each undivided twin is tried first on ``TWIN_SHARE`` of the share
    (its proofs close in a few boxes), then the other alternatives, fewest coordinates first, split what is left and
    never less than half an equal part; with every alternative spending its budget the share is not exceeded."""
    import dataclasses

    from attnbounds.theory.deciding import prover
    from attnbounds.theory.deciding.prover.relax import relax
    from attnbounds.theory.running.api import statement

    st = statement("alpha_max <= exp(2*a/T)/(exp(2*a/T) + L - 1)", hypotheses=["softmax", "logits-bounded"],
                   defaults={"a": "logit_absmax"}).statements[0]
    quotient, own = next(g.alternatives for per in relax(st).strategies for strategy in per for g in strategy
                         if len(g.alternatives) == 2 and g.alternatives[0].unsigned is not None)
    plain = dataclasses.replace(quotient, unsigned=None, core=quotient.core + 0)  # an alternative of no twin
    share = 10**6
    for alternatives in ([quotient, own], [own, quotient], [plain, quotient, own]):
        used, order = 0, []
        for problem, budget in prover._budgets(alternatives, share):
            order.append(problem)
            used += budget(used)
        assert order[0] is own and sorted(map(id, order)) == sorted(map(id, alternatives)), order
        assert used <= share, (len(alternatives), used)
        rest = [p for p in alternatives if p is not own]
        probe = int(share * prover.TWIN_SHARE)
        budgets = dict((id(p), b) for p, b in prover._budgets(alternatives, share))
        assert budgets[id(own)](0) == probe
        assert budgets[id(order[1])](probe) == (share - probe) // len(rest)
        assert budgets[id(order[-1])](share) == share // (2 * len(rest))  # the twins overspent: half an equal part


def test_every_box_of_a_batch_is_taken_after_one_closes_through_its_two_ends() -> None:
    """``1/2 + x^4 - 4 x (w - 1/2)^2`` (min about 0.027, at x = 4^(-1/3), w = 1/2) is monotone in no coordinate and
    concave in w only where x >= 0: boxes split in x come in one batch, and one closing through its two ends (A2) must
    not end the batch (the boxes after it would stay open: the branch and bound reports 'never closed', open)."""
    core = sp.Rational(1, 2) + x**4 - 4 * x * (w - sp.Rational(1, 2))**2
    problem = _problem(core)
    outcome = bnb.branch_and_bound(problem, 10**7)
    assert outcome.status == "proved", outcome.reason
    tokens = bnb.decode(outcome.tree.encode(), 10**8)
    assert "A2" in tokens and "O" not in tokens
    assert bnb.replay(problem, tokens)[0]
