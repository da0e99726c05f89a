"""Quantities at the ends of their ranges and their statistical enclosures (issue 35).

- ``jensen_gap_bound`` is exactly 0 when ``N >= L - 1`` (the other ``L - 1`` tokens hold the whole subset, or the
  subset is everything): in the float, the ball and the torch form, for class sizes 1 to 4 and token vectors of any size (a
  general formula there would read ``0 * inf`` where the squared deviations overflow); below (``N = L - 2`` down to
  1) it is > 0 in every form, and the torch form agrees with the float one there;
- the Monte Carlo enclosure of ``E_dtilde`` (float and ball forms beyond exact enumeration) is a Hoeffding interval
  of the documented range ``0 <= dtilde_R1 <= top_{L-N} + (L - N) top_N`` (``sum_i ||alpha_i x_i||`` for R2, ``top_n``
  the sum of the n largest norms): at least that half-width, and it holds the exact expectation (enumerated); the
  range holds every subset's value and is attained (equal norms, the subset's tokens against the others');
- ``xi``'s magnitude (the size of its float rounding error) is at most ``2^26 (M + delta) abar`` as its docstring
  says (``sqrt(eps) (M + delta) abar`` of error), and it bounds the float form's actual error;
- ``delta_min``'s magnitude is the largest distance two tokens of the instance's norms can have: at least every
  ``||x_i - x_j||``, and attained by two opposite tokens.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from attnbounds.theory.mathematics import balls, normalisers as nm
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.intervals import backend
from attnbounds.theory.mathematics.quantities import QUANTITIES, _subsets, ball_value, compute, interval, magnitude
from attnbounds.theory.mathematics.quantities.theorem1 import _values, dtilde_range
from attnbounds.theory.mathematics.quantities.spec import hoeffding_halfwidth

COUNTS = [[1, 1, 1], [2, 1], [1, 2, 1], [3, 1, 4], [2, 2, 2], [4, 4]]


def _ball(name: str, inst: Instance, bits: int = 128) -> Any:
    ops = backend("arb")
    with ops.precision(bits):
        return ops, ball_value(name, balls.ball_instance(inst, ops))


def _instance(counts: list[int], scale: float, N: int, seed: int = 0, **params: Any) -> Instance:
    K = len(counts)
    x = np.random.default_rng(seed).standard_normal((1, K, 3)) * scale
    return Instance.from_logits(np.linspace(-1.0, 1.0, K)[None], nm.softmax(1.0), counts=[counts], x=x, N=N, **params)


@pytest.mark.parametrize("counts", COUNTS, ids=str)
@pytest.mark.parametrize("scale", [1.0, 1e160, 1e200, 1e300])
def test_the_jensen_gap_bound_is_zero_when_the_subset_is_determined(counts: list[int], scale: float) -> None:
    L = sum(counts)
    for N in (L - 1, L):
        inst = _instance(counts, scale, N)
        with np.errstate(all="ignore"):
            value = compute("jensen_gap_bound", inst)
        assert value.tolist() == [0.0], (counts, scale, N, value)
        ops, ball = _ball("jensen_gap_bound", inst)
        assert ops.lower_float(ball) == ops.upper_float(ball) == 0.0, (counts, scale, N, ops.text(ball))
        torch = pytest.importorskip("torch")
        from attnbounds.theory.mathematics.quantities.torch_state import state_of

        with torch.no_grad():
            steer = QUANTITIES["jensen_gap_bound"].forms["torch"](state_of(inst)).numpy()
        assert steer.tolist() == [0.0], (counts, scale, N, steer)


@pytest.mark.parametrize("counts", COUNTS, ids=str)
def test_the_jensen_gap_bound_is_positive_below_the_determined_sizes_in_every_form(counts: list[int]) -> None:
    """Below ``N = L - 1`` (down to ``N = 1``, through ``N = L - 2``) the subset is random: with distinct token vectors
    the others' squared deviations about their mean are > 0 and ``fpc = N (L - 1 - N) / (L - 2) > 0``, so the bound
    is > 0: the ball certainly, the float form to its rounding and the torch form (which steers the search) with it."""
    torch = pytest.importorskip("torch")
    from attnbounds.theory.mathematics.quantities.torch_state import state_of

    L = sum(counts)
    for N in range(1, L - 1):
        inst = _instance(counts, 1.0, N, seed=N)
        value = float(compute("jensen_gap_bound", inst)[0])
        ops, ball = _ball("jensen_gap_bound", inst)
        lo, hi = ops.lower_float(ball), ops.upper_float(ball)
        assert lo > 0.0, (counts, N, ops.text(ball))
        # the float form's rounding: a few ulps per operation of a few dozen, far below 1e-12 relative
        assert abs(value - (lo + hi) / 2) <= 1e-12 * value + (hi - lo), (counts, N, value, ops.text(ball))
        with torch.no_grad():
            steer = float(QUANTITIES["jensen_gap_bound"].forms["torch"](state_of(inst)).numpy()[0])
        assert abs(steer - value) <= 1e-9 * value, (counts, N, steer, value)


def _exact_expectation(name: str, inst: Instance) -> float:
    value = compute(name, inst)
    mean = value[0] if isinstance(value, tuple) else value
    return float(np.asarray(mean).ravel()[0])


@pytest.mark.parametrize("name, reading", [("E_dtilde_R1", "R1"), ("E_dtilde_R2", "R2")])
@pytest.mark.parametrize("counts", [[2, 1, 3], [1, 1, 1, 1], [3, 2, 2, 1]], ids=str)
@pytest.mark.parametrize("draws", [5, 50])
def test_the_sampled_expectation_is_a_hoeffding_interval_of_the_documented_range(
        monkeypatch: pytest.MonkeyPatch, name: str, reading: str, counts: list[int], draws: int) -> None:
    L = sum(counts)
    for N in range(1, L):
        inst = _instance(counts, 1.0, N, seed=N, mc_draws=draws)
        exact = _exact_expectation(name, inst)  # the float form enumerates these few count vectors exactly
        ops = backend("arb")
        with monkeypatch.context() as patch, ops.precision(128):
            patch.setattr(_subsets, "BALL_ENUMERATION_WORK", 0)  # the ball form samples
            ex = balls.ball_instance(inst, ops)
            ball = ball_value(name, ex)
        assert "hoeffding" in ex.methods and ex.level == 1 - 1e-6
        lo, hi = ops.lower_float(ball), ops.upper_float(ball)
        norms = np.linalg.norm(inst.alpha[0][:, None] * inst.x[0], axis=-1)
        m = inst.multiplicity[0]  # the classes (a class the N-th token falls in is split in two)
        tokens = np.sort(np.repeat(norms, m.astype(int)))[::-1]  # the token norms, largest first
        U = tokens[:L - N].sum() + (L - N) * tokens[:N].sum() if reading == "R1" else tokens.sum()
        half = float(hoeffding_halfwidth(U, draws, 1e-6))
        assert (hi - lo) / 2 >= half * (1 - 1e-9), (name, counts, N, lo, hi, half)
        assert lo <= exact <= hi, (name, counts, N, lo, hi, exact)
        with monkeypatch.context() as patch:  # the float form samples too: the same half-width about its mean
            patch.setattr(_subsets, "enumerable", lambda *args: False)
            f_lo, f_hi = interval(name, dataclasses.replace(inst, _cache={}))
        assert (f_hi[0] - f_lo[0]) / 2 == pytest.approx(half, rel=1e-12), (name, counts, N, f_lo, f_hi, half)


@pytest.mark.parametrize("reading", ["R1", "R2"])
@pytest.mark.parametrize("counts", COUNTS, ids=str)
def test_the_range_of_dtilde_holds_every_subset_and_is_attained(reading: str, counts: list[int]) -> None:
    """Every N-subset's dtilde lies in ``[0, dtilde_range]`` (random vectors), and the range is its largest value
    where the norms are equal and the subset's tokens point against the others' (the triangle inequalities are
    equalities there): the Hoeffding interval is neither too short (unsound) nor longer than it needs."""
    L, m = sum(counts), tuple(counts)
    rng = np.random.default_rng(L)
    for N in range(1, L):
        C = _subsets.count_vectors(m, N)
        y = rng.standard_normal((1, len(m), 3))
        U = dtilde_range(np.linalg.norm(y[0], axis=-1), m, N, reading)
        values = _values(y, np.asarray(m, dtype=np.float64), C, reading)[0]
        assert values.min() >= 0 and values.max() <= U * (1 + 1e-12), (reading, counts, N, values.max(), U)
        # equal norms: the columns of one count vector (the first) along +e, the rest along -e (a class split by
        # the subset takes the side of its selected part: the range is attained only for subsets of whole classes)
        whole = [c for c in C if all(ck in (0, mk) for ck, mk in zip(c, m))]
        if not whole:
            continue
        sides = np.where(np.asarray(whole[0]) > 0, 1.0, -1.0)
        y = sides[None, :, None] * np.array([1.0, 0.0, 0.0])
        values = _values(y, np.asarray(m, dtype=np.float64), C, reading)[0]
        assert values.max() == pytest.approx(dtilde_range(np.ones(len(m)), m, N, reading), rel=1e-12), (reading, N)


@pytest.mark.parametrize("counts", COUNTS, ids=str)
@pytest.mark.parametrize("M, delta", [(1.0, 0.5), (3.0, 0.0), (0.5, 2.0)])
def test_the_magnitude_of_xi_bounds_its_float_error_and_is_capped(counts: list[int], M: float, delta: float) -> None:
    L = sum(counts)
    for N in range(1, L + 1):
        inst = _instance(counts, 1.0, N, M=M, delta=delta)
        mag = np.asarray(magnitude("xi", inst), dtype=np.float64)[0]
        abar = float(np.sum(np.where(inst.mask[0], inst.alpha[0] * inst.multiplicity[0], 0.0)))
        cap = 2.0**26 * (M + delta) * abar
        assert np.all(mag <= cap * (1 + 1e-12)), (counts, N, mag, cap)
        value = np.asarray(compute("xi", inst), dtype=np.float64)[0]
        ops, ball = _ball("xi", inst, bits=256)
        selected = np.flatnonzero(inst.mask[0] & inst.present[0])  # the ball form's entries, in column order
        assert len(ball) == len(selected)
        for b, c in zip(ball, selected):
            mid = (ops.lower_float(b) + ops.upper_float(b)) / 2
            assert abs(value[c] - mid) <= 64 * 2.0**-52 * mag[c] + 1e-300, (counts, N, c, value[c], ops.text(b), mag[c])


def _distances(inst: Instance) -> np.ndarray:
    """``||x_i - x_j||`` over the pairs of distinct present columns of row 0 (float64, for comparison)."""
    assert inst.x is not None
    x = inst.x[0][inst.present[0]]
    return np.array([np.linalg.norm(x[i] - x[j]) for i in range(len(x)) for j in range(len(x)) if i != j])


@pytest.mark.parametrize("counts", COUNTS, ids=str)
@pytest.mark.parametrize("scale", [1.0, 1e-120, 1e150])
def test_the_magnitude_of_delta_is_the_largest_distance_its_tokens_allow(counts: list[int], scale: float) -> None:
    """``delta_min``'s magnitude is the size of the numbers it is computed from, the differences ``x_i - x_j``: it
    holds every ``||x_i - x_j||`` and the float form's error (each difference is at most ``||x_i|| + ||x_j||``, at
    most twice the largest norm), and it is no larger than that: where two tokens are opposite, ``x`` and ``-x`` at
    the largest norm, their distance (the largest any two tokens of these norms can have) is the magnitude. A larger
    yardstick would shrink the relative margins of every statement that reads delta."""
    K = len(counts)
    x = np.random.default_rng(1).standard_normal((1, K, 3)) * scale
    inst = Instance.from_logits(np.linspace(-1.0, 1.0, K)[None], nm.softmax(1.0), counts=[counts], x=x, N=1)
    mag = float(np.asarray(magnitude("delta_min", inst), dtype=np.float64)[0])
    assert np.all(_distances(inst) <= mag * (1 + 1e-12)), (counts, scale, mag)
    value = float(compute("delta_min", inst)[0])
    ops, ball = _ball("delta_min", inst)
    assert abs(value - (ops.lower_float(ball) + ops.upper_float(ball)) / 2) <= 2.0**-40 * mag, (counts, value, mag)
    # a column made the opposite of the one of largest norm (every norm stays at most the largest)
    norms = np.linalg.norm(x[0], axis=-1)
    top = int(np.argmax(norms))
    x[0, 1 if top == 0 else 0] = -x[0, top]
    opposite = Instance.from_logits(np.linspace(-1.0, 1.0, K)[None], nm.softmax(1.0), counts=[counts], x=x, N=1)
    widest = float(np.max(_distances(opposite)))
    assert widest == pytest.approx(2 * norms[top], rel=1e-12)
    mag = float(np.asarray(magnitude("delta_min", opposite), dtype=np.float64)[0])
    assert mag == pytest.approx(widest, rel=1e-12), (counts, scale, mag, widest)


@pytest.mark.parametrize("counts", [[1, 1], [2], [1, 2], *COUNTS], ids=str)
@pytest.mark.parametrize("top", [0.0, 12.0])
def test_the_magnitude_of_the_jensen_terms_holds_every_number_they_are_computed_from(counts: list[int],
                                                                                    top: float) -> None:
    """The magnitude of ``J_{scaled,printed}_{weighted,mean}`` (``(L-N)/L sum_i ||c_i x_i - xbar||``, ``rho = N/(L-1)``)
    is at least ``sum_i (||c_i x_i|| + ||xbar||)`` over the tokens, for every N and down to L = 2 (``rho = N``)."""
    K, L = len(counts), sum(counts)
    x = np.random.default_rng(2).standard_normal((1, K, 3))
    x[0, 0] *= 1e-3  # the weight on a token of small norm (``top``): the mean ``xbar`` is then the largest number
    logits = np.linspace(-1.0, 1.0, K)[None]
    logits[0, 0] += top
    for N in range(1, L + 1):
        inst = Instance.from_logits(logits, nm.softmax(1.0), counts=[counts], x=x, N=N)
        assert inst.x is not None
        # the instance's columns (a class holding selected and other tokens is split in two)
        a, m, X, rho = inst.alpha[0], inst.multiplicity[0], inst.x[0], N / (L - 1)
        for coefficient in ("scaled", "printed"):
            c = a * (1 + rho) if coefficient == "scaled" else a + rho
            for xbar in ("weighted", "mean"):
                xb = rho * (m * a) @ X if xbar == "weighted" else m @ X / L
                sizes = float(np.sum(m * (np.abs(c) * np.linalg.norm(X, axis=-1) + np.linalg.norm(xb))))
                name = f"J_{coefficient}_{xbar}"
                mag = float(np.asarray(magnitude(name, inst), dtype=np.float64)[0])
                assert sizes <= mag * (1 + 1e-12), (name, counts, top, N, sizes, mag)
