"""The second-order closure of the branch and bound (issue 33: equality at a critical point), in the prover and in
the replay.

A non-strict bound that holds with equality at an interior point where the margin's gradient vanishes cannot be
closed by the natural enclosure, the mean-value form or a projection on the boxes around that point: every one of
them reads the margin's slope, which straddles 0 there. Taylor's theorem to second order around the exact point can:
``core(x) >= core(p) + |x - p|^T M |x - p| / 2`` with ``M`` from the Hessian's rigorous enclosure. Checked here:

- the exact positive-semidefiniteness test on rational matrices, against the eigenvalues of small integer matrices;
- a true core with an equality at a rational critical point (and one on an end of the box) is proved, with boxes
  closed to second order, and the tree replays;
- a core with a saddle or a maximum at that point, or a strict bound at the equality, is never proved, and a tree
  whose second-order points are moved (off the critical point, out of the box, malformed) does not replay.
"""

from __future__ import annotations

import base64
import itertools
import json
import sys
import zlib
from fractions import Fraction

import numpy as np
import pytest
import sympy as sp

from attnbounds.theory.deciding import prover
from attnbounds.theory.deciding.prover import bnb
from attnbounds.theory.deciding.prover.problem import Coordinate, Problem

x, y = sp.symbols("x y", real=True)
HALF, THIRD = sp.Rational(1, 2), sp.Rational(1, 3)


def _problem(core: sp.Expr, strict: bool = False, lo: float = -1.0, hi: float = 1.0) -> Problem:
    coordinates = [Coordinate(x, lo, hi, "parameter", "x"), Coordinate(y, lo, hi, "parameter", "y")]
    return Problem("second-order", 0, "test", coordinates, core, [], strict, core, [], {}, 0, 0, {}, "test", [])


#: exp(u) - 1 - u >= 0 with equality at u = 0 only (convex, tangent there): not a polynomial, so never factored
def _bowl(u: sp.Expr) -> sp.Expr:
    return sp.exp(u) - 1 - u


@pytest.mark.parametrize("seed", range(4))
def test_the_exact_psd_test_agrees_with_the_eigenvalues(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(50):
        n = int(rng.integers(1, 5))
        A = rng.integers(-3, 4, size=(n, n))
        A = A @ A.T if rng.uniform() < 0.5 else A + A.T  # PSD (often singular) or indefinite
        A = A.astype(np.int64)
        if rng.uniform() < 0.3:  # a rank-deficient PSD matrix with a zero pivot first
            v = np.zeros(n, dtype=np.int64)
            v[1:] = rng.integers(-2, 3, size=n - 1)
            A = np.outer(v, v)
        expected = bool(np.linalg.eigvalsh(A.astype(float)).min() >= -1e-9)
        assert bnb._psd([[Fraction(int(a)) for a in row] for row in A]) is expected, A


@pytest.mark.parametrize("A, psd", [
    ([[0, 1], [1, 1]], False),  # a zero pivot with a nonzero entry below it: indefinite (det -1)
    ([[0, 0, 1], [0, 1, 0], [1, 0, 2]], False),
    ([[1, 1, 1], [1, 1, 2], [1, 2, 3]], False),  # the zero pivot appears after the first elimination step
    ([[0, 0], [0, 1]], True),  # a zero pivot with a zero column: semidefinite
    ([[1, 1, 1], [1, 1, 1], [1, 1, 2]], True),
    ([[1, 2], [2, 3]], False),  # a negative pivot after elimination
])
def test_the_exact_psd_test_on_zero_pivots(A: list[list[int]], psd: bool) -> None:
    assert bool(np.linalg.eigvalsh(np.array(A, dtype=float)).min() >= -1e-12) is psd
    assert bnb._psd([[Fraction(a) for a in row] for row in A]) is psd, A


def test_an_equality_at_an_interior_critical_point_is_proved_to_second_order_and_replays() -> None:
    # (x - 1/2) and (y - 1/3) meet at a minimum 0 of a convex core; the cross term keeps the Hessian [[1, 1/2], [1/2,
    # 2]] positive definite but reads both coordinates
    core = _bowl(x - HALF) + 2 * _bowl(y - THIRD) + (x - HALF) * (y - THIRD) / 2
    problem = _problem(core)
    outcome = bnb.branch_and_bound(problem, 10**8)
    assert outcome.status == "proved", outcome.reason
    assert outcome.closed.get("second-order", 0) > 0, outcome.closed
    tokens = bnb.decode(outcome.tree.encode(), 10**8)
    assert "T1/2,1/3" in tokens  # the critical point itself, exactly (a third is no double)
    ok, why, leaves = bnb.replay(problem, tokens)
    assert ok, why
    assert leaves == sum(t[0] in "CIETM" for t in tokens)


def test_an_equality_on_an_end_of_the_box_is_proved_to_second_order() -> None:
    # the minimum 0 at x = 1/2 sits on the box's upper end of x, where the core's slope in x is 0 too
    core = _bowl(x - HALF) + _bowl(y - THIRD)
    problem = _problem(core, lo=-0.5, hi=0.5)
    outcome = bnb.branch_and_bound(problem, 10**8)
    assert outcome.status == "proved", outcome.reason
    ok, why, _ = bnb.replay(problem, bnb.decode(outcome.tree.encode(), 10**8))
    assert ok, why


def test_an_exactly_zero_slope_at_a_dyadic_point_inside_the_box_is_closed_to_second_order() -> None:
    """At ``x = 1/2`` (a double) the slope in x is exactly 0 and its rigorous enclosure there the point 0: a box with
    1/2 strictly inside its x-range (the root box [-1, 0.9] is never split at 1/2) is closed to second order around
    ``(1/2, 1/3)``, and the branch and bound proves the core."""
    core = _bowl(x - HALF) + 2 * _bowl(y - THIRD)
    problem = _problem(core, hi=0.9)
    face = bnb.Programs(problem).face(())
    lo, hi = np.array([0.49, 0.33]), np.array([0.51, 0.34])
    assert bnb._second_order(problem, face, (Fraction(1, 2), Fraction(1, 3)), lo, hi, False, [0]) == 1
    outcome = bnb.branch_and_bound(problem, 10**8)
    assert outcome.status == "proved", outcome.reason
    assert outcome.closed.get("second-order", 0) > 0, outcome.closed
    ok, why, _ = bnb.replay(problem, bnb.decode(outcome.tree.encode(), 10**8))
    assert ok, why


def test_an_equality_at_an_upper_corner_of_no_simple_fraction_is_proved_to_second_order() -> None:
    """The minimum 0 at the box's upper corner ``(c, c)``, ``c`` the double nearest 0.3 (no fraction of denominator
    <= 1000: the rounded float minimiser misses it; only the box's corners hold it), with a cross term that keeps the
    slopes of both signs on the boxes at that corner (no projection): proved to second order around the corner."""
    c = sp.Rational(Fraction(0.3))
    core = _bowl(x - c) + 2 * _bowl(y - c) - (x - c) * (y - c) / 2
    problem = _problem(core, lo=-1.0, hi=0.3)
    outcome = bnb.branch_and_bound(problem, 10**8)
    assert outcome.status == "proved", outcome.reason
    tokens = bnb.decode(outcome.tree.encode(), 10**8)
    corner = f"T{c},{c}"
    assert corner in tokens, [t for t in tokens if t.startswith("T")]
    ok, why, _ = bnb.replay(problem, tokens)
    assert ok, why


@pytest.mark.parametrize("core", [
    _bowl(x - HALF) - 2 * _bowl(y - THIRD),  # a saddle: negative along y
    _bowl(x - HALF) + _bowl(y - THIRD) - (x - HALF) ** 2,  # Hessian [[-1, 0], [0, 1]] at the point: negative along x
    _bowl(x - HALF) + _bowl(y - THIRD) + 3 * (x - HALF) * (y - THIRD),  # indefinite through the cross term
], ids=["saddle", "maximum-along-x", "cross-term"])
def test_a_core_negative_near_its_critical_point_is_never_proved(core: sp.Expr) -> None:
    # each is negative somewhere within 1e-2 of (1/2, 1/3): a proof would be wrong
    grid = [(float(HALF) + a, float(THIRD) + b) for a, b in itertools.product(np.linspace(-0.01, 0.01, 9), repeat=2)]
    assert min(float(core.subs({x: u, y: v})) for u, v in grid) < 0
    outcome = bnb.branch_and_bound(_problem(core), 10**7)
    assert outcome.status != "proved", outcome.reason


def test_a_core_with_a_kink_at_its_critical_point_is_not_closed_to_second_order() -> None:
    """``(x - 1/2)^2 - |x - 1/2| / 10^9``: 0 at x = 1/2, where sympy's slope ``2 (x - 1/2) - sign(x - 1/2) / 10^9``
    is exactly 0 too, but negative for ``0 < |x - 1/2| < 10^-9``. A kink has no Hessian, so nothing certifies the
    curvature there: the second-order closure must refuse the boxes around it (assuming the curvature proves this
    false core), and the branch and bound never proves it."""
    core = (x - HALF) ** 2 - sp.Abs(x - HALF) / 10**9 + _bowl(y - THIRD)
    assert core.subs({x: HALF + sp.Rational(1, 10**10), y: THIRD}) < 0
    problem = _problem(core)
    face = bnb.Programs(problem).face(())
    assert face.hessian(problem.symbols, [0]) is None
    lo, hi = np.array([0.49, 0.33]), np.array([0.51, 0.34])
    assert bnb._second_order(problem, face, (Fraction(1, 2), Fraction(1, 3)), lo, hi, False, [0]) != 1
    outcome = bnb.branch_and_bound(problem, 10**7)
    assert outcome.status != "proved", outcome.reason


@pytest.mark.parametrize("sign", [1, -1], ids=["concave root", "convex root"])
def test_the_curvature_is_certified_only_from_a_finite_hessian_enclosure(sign: int) -> None:
    """``+-sqrt(x + 1)`` on a box touching x = -1: its second derivative is unbounded there, so the Hessian's enclosure
    is not finite and the curvature is not certified, whether the core is concave there (+: it must not be) or convex
    (-: a sound refusal); the bowl's, bounded and positive definite, is."""
    lo, hi = np.array([-1.0, 0.2]), np.array([-0.9, 0.4])
    root = _problem(sign * sp.sqrt(x + 1) + _bowl(y - THIRD))
    assert bnb._curvature(root, bnb.Programs(root).face(()), lo, hi, [0]) is False
    bowl = _problem(_bowl(x - HALF) + _bowl(y - THIRD))
    assert bnb._curvature(bowl, bnb.Programs(bowl).face(()), np.array([0.4, 0.3]), np.array([0.6, 0.4]), [0]) is True


def test_an_equality_at_an_irrational_point_leaves_one_box_at_the_split_limit_and_says_where() -> None:
    """``exp(u) - 1 - u >= 0`` with ``u = x - pi/4``: no rational point holds the equality, so the boxes around
    ``pi/4`` shrink to the split limit and no closure takes the last one. The prover says so (stuck, and where), well
    within its work, instead of splitting a box too narrow to split until the work runs out."""
    u = x - sp.pi / 4
    core = sp.exp(u) - 1 - u
    problem = Problem("irrational", 0, "test", [Coordinate(x, 0.0, 1.0, "parameter", "x")], core, [], False, core, [],
                      {}, 0, 0, {}, "test")
    limit = 10**7
    outcome = bnb.branch_and_bound(problem, limit)
    assert outcome.status == "stuck" and "narrower than the split limit" in outcome.reason, outcome.reason
    assert "x in [0.785398, 0.785398]" in outcome.reason and outcome.work < limit / 2, (outcome.reason, outcome.work)


def test_a_strict_bound_at_an_equality_is_not_proved() -> None:
    outcome = bnb.branch_and_bound(_problem(_bowl(x - HALF) + _bowl(y - THIRD), strict=True), 10**8)
    assert outcome.status == "negative", outcome.reason  # the equality point is a counterexample of the strict bound


def _tokens_of_true_core() -> tuple[Problem, list[str]]:
    problem = _problem(_bowl(x - HALF) + 2 * _bowl(y - THIRD) + (x - HALF) * (y - THIRD) / 2)
    tokens = bnb.decode(bnb.branch_and_bound(problem, 10**8).tree.encode(), 10**8)
    assert any(t.startswith("T") for t in tokens)
    return problem, tokens


@pytest.mark.parametrize("replacement", ["T1/2,1/4", "T1/2,3/1", "T1/2", "T1/2,1/0", "Tx,1/3", "T1/2,1/3,0/1",
                                         "T" + "9" * 60 + "/1,1/3"])
def test_a_second_order_closure_around_another_point_does_not_replay(replacement: str) -> None:
    """Off the critical point (the slope at it no longer 0), outside the box, malformed or too long: refused."""
    problem, tokens = _tokens_of_true_core()
    k = tokens.index("T1/2,1/3")
    forged = [*tokens[:k], replacement, *tokens[k + 1:]]
    ok, why, _ = bnb.replay(problem, forged)
    assert not ok, why


def test_the_same_tree_for_a_core_with_a_saddle_does_not_replay() -> None:
    _, tokens = _tokens_of_true_core()
    saddle = _problem(_bowl(x - HALF) - 2 * _bowl(y - THIRD) + (x - HALF) * (y - THIRD) / 2)
    ok, why, _ = bnb.replay(saddle, tokens)
    assert not ok, why


def test_a_kink_at_the_critical_point_is_never_closed_to_second_order() -> None:
    """``(x - 1/2)^2 - |x - 1/2| / 100`` is negative just beside x = 1/2, where the chain rule reads its slope there
    as 0 and its curvature as the square's alone (the kink's second derivative is 0 almost everywhere): the
    second-order closure must refuse the box around the kink, and the branch and bound must not prove the core."""
    from attnbounds.theory.mathematics.opaque import OAbs

    core = (x - HALF) ** 2 - OAbs(x - HALF) / 100 + _bowl(y - THIRD)
    problem = _problem(core)
    face = bnb.Programs(problem).face(())
    lo, hi = np.array([0.49, 0.33]), np.array([0.51, 0.34])
    assert bnb._second_order(problem, face, (Fraction(1, 2), Fraction(1, 3)), lo, hi, False, [0]) == 0
    outcome = bnb.branch_and_bound(problem, 10**7)
    assert outcome.status != "proved", outcome.reason


def test_a_box_beside_an_equality_point_is_closed_on_the_span_of_both() -> None:
    """``Q = (x - 1/2)^2/4 + (x - 1/2) y/4 + y^2/4`` (definite, 0 at ``(1/2, 0)`` only) on a box just beside that point:
    Taylor around the point on the smallest box holding both closes it (the span's Hessian bound is PSD); with a
    saddle's sign on ``y^2`` it does not; and on ``[-1, 0.6]^2``, whose splits never put 1/2 on a box's end, the
    equality is proved and replays."""
    u = x - HALF
    core = u**2 / 4 + u * y / 4 + y**2 / 4
    problem = _problem(core, lo=-1.0, hi=0.6)
    face = bnb.Programs(problem).face(())
    lo, hi = np.array([0.500024, -3.9e-5]), np.array([0.500049, -1.8e-5])
    point = (Fraction(1, 2), Fraction(0))
    assert bnb._second_order(problem, face, point, lo, hi, False, [0]) == 1
    saddle = _problem(u**2 / 4 + u * y / 4 - y**2 / 4, lo=-1.0, hi=0.6)
    assert bnb._second_order(saddle, bnb.Programs(saddle).face(()), point, lo, hi, False, [0]) == 0
    outcome = bnb.branch_and_bound(problem, 10**7)
    assert outcome.status == "proved", outcome.reason
    ok, why, _ = bnb.replay(problem, bnb.decode(outcome.tree.encode(), 10**8))
    assert ok, why


def _longest_fraction() -> Fraction:
    """A fraction with the most characters the replay reads: a signed numerator and a denominator of
    :data:`bnb.FRACTION_DIGITS` digits each (coprime: they differ by 2 and are odd)."""
    return -Fraction(10**bnb.FRACTION_DIGITS - 1, 10**bnb.FRACTION_DIGITS - 3)


@pytest.mark.parametrize("n", range(1, 6))
def test_every_entry_the_replay_reads_fits_the_bytes_a_box_may_inflate_to(n: int) -> None:
    """A second-order point of ``n`` fractions of the most digits the replay reads (one digit more it refuses), the
    split at the longest hex double and the projection along every coordinate each take at most
    :func:`bnb.entry_bytes` bytes in the inflated tree, with their quotes and comma."""
    c = _longest_fraction()
    point = ",".join([str(c)] * n)
    assert bnb._fractions(point, n) == (c,) * n
    assert bnb._fractions(point.replace("/", "0/", 1), n) is None and bnb._fractions(point + "0", n) is None
    digits = "9" * bnb.MULTIPLIER_DIGITS  # a multiplier closure of the most digits the replay reads
    longest = [f"T{point}", f"S{n - 1}:{(-sys.float_info.max).hex()}", "P" + ",".join(f"{d}<" for d in range(n)),
               f"L{digits}:-{digits}/{digits}"]
    for entry in longest:
        assert len(json.dumps(entry)) + 1 <= bnb.entry_bytes(n), entry


def test_a_tree_closed_to_second_order_around_the_longest_fractions_is_read_back_from_its_record() -> None:
    """The core ``bowl(x - c) + bowl(y - c)``, ``c`` a fraction of the most digits the replay reads (no double): every
    box is closed to second order around ``(c, c)`` (the slopes there exactly 0, beside the box or in it). A tree of
    splits with as many such leaves as it can hold replays, and the record reader's inflation limit admits it."""
    c = sp.Rational(_longest_fraction())
    problem = _problem(_bowl(x - c) + _bowl(y - c), lo=-2.0, hi=0.0)
    leaf = f"T{c},{c}"

    def splits(lo: list[float], hi: list[float], depth: int) -> list[str]:
        if depth == 0:
            return [leaf]
        d = depth % 2
        mid = lo[d] / 2 + hi[d] / 2
        left_hi, right_lo = [*hi], [*lo]
        left_hi[d] = right_lo[d] = mid
        return [f"S{d}:{mid.hex()}", *splits(lo, left_hi, depth - 1), *splits(right_lo, hi, depth - 1)]

    tokens = splits([-2.0, -2.0], [0.0, 0.0], 3)
    blob = base64.b64encode(zlib.compress(json.dumps(tokens, separators=(",", ":")).encode(), 9)).decode()
    read = prover._tree({"tree": blob, "boxes": len(tokens)}, len(problem.coordinates), "test")
    assert read == tokens
    ok, why, leaves = bnb.replay(problem, read)
    assert ok and leaves == 8, why


def test_every_second_order_point_the_prover_tries_is_one_the_replay_reads() -> None:
    """The points a box's equality is sought at (points found before, the float minimiser, the centre and corners)
    are written into the tree when they close it: each must be one :func:`bnb.replay` reads back. A double far from 1
    is a fraction of more digits than it reads (``2^-140`` has a 43-digit denominator): such points are not tried."""
    c = 2.0**-140
    problem = _problem(_bowl(x - sp.Rational(Fraction(c))) + _bowl(y), lo=-3 * c, hi=5 * c)
    face = bnb.Programs.build(problem).face(())
    face.critical.append((Fraction(c), Fraction(0)))  # an equality point found on another box
    points = list(bnb._critical_candidates(face, np.array([-3 * c, -3 * c]), np.array([5 * c, 5 * c]), [0]))
    assert points
    for p in points:
        assert bnb._fractions(",".join(f"{v.numerator}/{v.denominator}" for v in p), 2) == p, p


@pytest.mark.parametrize("a, b", [(THIRD, -sp.Rational(2, 7)), (sp.Rational(3, 1000), sp.Rational(-5, 11)),
                                  (sp.Rational(999, 1000), -sp.Rational(123, 1024))])
def test_the_float_minimiser_finds_a_bowls_least_point_to_half_its_finest_grid_step(a: sp.Expr, b: sp.Expr) -> None:
    """On two free coordinates the nested grids reach the step ``(hi - lo) / 2^9`` (:func:`bnb._float_minimiser`),
    each grid spanning the last one's two cells around its least point: the least point of a separable convex core
    lies in every grid, so the minimiser is within half that step of it on each coordinate, inside the box."""
    face = bnb.Programs.build(_problem(_bowl(x - a) + _bowl(y - b))).face(())
    lo, hi = np.array([-1.0, -1.0]), np.array([1.0, 1.0])
    best = bnb._float_minimiser(face, lo, hi, [0, 1], [0])
    assert np.all(lo <= best) and np.all(best <= hi)
    assert np.all(np.abs(best - [float(a), float(b)]) <= (hi - lo) / 2**10 * (1 + 1e-9)), best


@pytest.mark.parametrize("n", range(1, 7))
def test_every_grid_of_the_float_minimiser_holds_at_most_its_grid_points(n: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """However many coordinates are free, one grid of the float minimiser evaluates at most
    :data:`bnb.GRID_POINTS` points (its work and memory stay bounded), and its point lies in the box."""
    zs = sp.symbols(f"z:{n}", real=True)
    coordinates = [Coordinate(z, -1.0, 1.0, "parameter", str(z)) for z in zs]
    core = sum((_bowl(z - THIRD) for z in zs), sp.Integer(0))
    problem = Problem("grid", 0, "test", coordinates, core, [], False, core, [], {}, 0, 0, {}, "test", [])
    face = bnb.Programs.build(problem).face(())
    sizes: list[int] = []
    run_float = bnb.run_float

    def counted(program: bnb.Program, lo: np.ndarray, hi: np.ndarray) -> list:
        sizes.append(len(lo))
        return run_float(program, lo, hi)

    monkeypatch.setattr(bnb, "run_float", counted)
    lo, hi = -np.ones(n), np.ones(n)
    best = bnb._float_minimiser(face, lo, hi, list(range(n)), [0])
    assert sizes and max(sizes) <= bnb.GRID_POINTS, sizes
    assert np.all(lo <= best) and np.all(best <= hi)
