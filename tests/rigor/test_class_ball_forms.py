"""Ball forms on token-class instances contain the float value of the same tokens written out.

A token class of ``m`` tokens takes its own code paths in the ball forms (a Jacobian norm gains the singular value
``|alpha_k g_k|`` of the vectors inside a class of two or more tokens; a class of one token has none). For every
quantity with a ball form that reads what a logit instance carries (logits, log F, token vectors, a selection), on
small class instances whose classes hold 1, 2, 3 and 4 tokens (and columns of none), with the largest (and the
smallest) logit in each class in turn, the ball enclosure (arb, 128 bits) on the class instance must contain

- the float value of the same quantity on the dense expansion of the same tokens (:meth:`Instance.expand`), and
- the float value on the class instance itself,

within the float forms' rounding budget (as in ``test_cross_check``: ``ULPS`` units in the last place of the
quantity's magnitude per token). The cases are deterministic, so a class size no random draw happens to hit is
still covered.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from attnbounds.theory.mathematics import balls, normalisers as nm
from attnbounds.theory.mathematics.errors import AttnBoundsError
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.intervals import backend
from attnbounds.theory.mathematics.quantities import QUANTITIES, ball_value, compute, magnitude

#: what an instance built here carries
READS = frozenset({"logits", "ratio", "x", "selection"})
#: quantities with a ball form that read only that (Monte Carlo estimates are compared as intervals elsewhere)
NAMES = sorted(name for name, q in QUANTITIES.items()
               if q.has("ball") and q.has("float") and q.needs <= READS and not q.estimate)
ULPS = 64
EPS = 2.0**-52
TINY_NORMAL = 2.0**-1022
#: class sizes: every class size 1 to 4, a class of two next to classes of one, two and three, and columns that
#: hold no token (count 0: their logit, the largest or the smallest in turn, must play no part)
COUNTS = [[1, 2], [2, 1], [2, 2, 1], [3, 1, 4], [2, 1, 1], [1, 1, 2], [1, 3], [4, 1], [2, 3], [2, 2], [1, 1],
          [2], [3], [1, 2, 3, 4], [2, 0, 1], [0, 3], [1, 2, 0]]
NORMALISERS = {"softmax": nm.softmax(1.0), "exp_poly": nm.exp_poly(0.1, 1.0), "softmax T=0.25": nm.softmax(0.25)}


def _logit_rows(K: int) -> list[np.ndarray]:
    """The largest logit in each class in turn, then the smallest in each class in turn, then all equal."""
    base = np.linspace(-0.7, 0.9, K) if K > 1 else np.zeros(1)
    rows = []
    for k in range(K):
        for extreme in (3.0, -3.0):
            row = base.copy()
            row[k] = extreme
            rows.append(row)
    rows.append(np.full(K, 0.25))
    return rows


def _instances(name: str) -> list[tuple[str, Instance]]:
    q = QUANTITIES[name]
    out = []
    rng = np.random.default_rng(7)
    for counts in COUNTS:
        K, L = len(counts), sum(counts)
        x = rng.standard_normal((1, K, 2))
        for nname, n in NORMALISERS.items():
            for row in _logit_rows(K):
                # N for a selection, and for the quantities of token vectors that read it as the subsets' size
                for N in ((1, L) if q.needs & {"selection", "x"} else (None,)):
                    label = f"counts {counts}, logits {np.round(row, 2).tolist()}, {nname}, N={N}"
                    kwargs: dict[str, Any] = {"counts": [counts], "a": 3.0}  # a: the logits' bound (Lemma 1)
                    if "x" in q.needs or "selection" in q.needs:
                        kwargs["x"] = x
                    if N is not None:
                        kwargs["N"] = N
                    out.append((label, Instance.from_logits(row[None, :], n, **kwargs)))
    return out


def _float(name: str, inst: Instance) -> np.ndarray | None:
    try:
        with np.errstate(all="ignore"):
            return np.asarray(compute(name, inst), dtype=np.float64)
    except AttnBoundsError:
        return None


def _inside(ops: Any, ball: Any, value: float, mag: float, tokens: int) -> bool:
    slack = ULPS * (tokens + 8) * (EPS * mag + TINY_NORMAL)
    return ops.lower_float(ball) - slack <= value <= ops.upper_float(ball) + slack


@pytest.mark.parametrize("name", NAMES)
def test_class_ball_contains_the_dense_tokens_float_value(name: str) -> None:
    ops = backend("arb")
    shape = QUANTITIES[name].shape
    checked = 0
    for label, inst in _instances(name):
        try:
            with ops.precision(128):
                ex = balls.ball_instance(inst, ops)
                ball = ball_value(name, ex)
        except AttnBoundsError:
            continue
        dense = inst.expand()
        value, want = _float(name, inst), _float(name, dense)
        assert want is not None or value is None, f"{name}: the dense expansion is refused, the classes not ({label})"
        if want is None:
            continue
        mag = float(np.max(np.abs(np.asarray(magnitude(name, dense), dtype=np.float64))))
        mag = max(mag, float(np.max(np.abs(np.asarray(magnitude(name, inst), dtype=np.float64)))))
        cls = inst.counts[0]
        token_class = np.repeat(np.arange(inst.K), cls)  # the class of each dense token
        if shape == "B":
            pairs = [(ball, float(want[0]), "dense tokens")]
            if value is not None:
                pairs.append((ball, float(value[0]), "class float"))
        else:
            columns = list(ex.sel) if shape == "BN" else list(np.flatnonzero(cls > 0))
            pairs = []
            for j, c in enumerate(columns):
                b = ball[j] if shape == "BN" else ball[c]
                pairs += [(b, float(want[0, t]), f"dense token {t}") for t in np.flatnonzero(token_class == c)]
                if value is not None:
                    pairs.append((b, float(value[0, c]), f"class float, column {c}"))
        if value is not None:  # the class float is finite where the dense tokens' is (a count-0 column once gave inf)
            finite_dense = bool(np.isfinite(want[0]).all())
            finite_class = bool(np.isfinite(value[0, cls > 0] if shape == "BL" else value[0]).all())
            assert finite_class or not finite_dense, f"{name}: class float {value[0]} not finite ({label})"
        for b, f, what in pairs:
            if not np.isfinite(f):
                continue
            assert ops.is_finite(b), f"{name}: ball {ops.text(b)} is not finite where float gives {f!r} ({label})"
            assert _inside(ops, b, f, mag, inst.L), (
                f"{name}: {what} value {f!r} lies outside the class ball {ops.text(b)} ({label})")
            checked += 1
    assert checked > 0, f"{name}: no class instance could be checked"


@pytest.mark.parametrize("counts, logits, T", [([1, 1], [0.3, 0.3], 1.0), ([1, 1], [0.0, 0.0], 1.0),
                                               ([2, 1], [0.5, -1.0], 0.25), ([1, 1, 1], [2.0, 2.0, -1.0], 1.0),
                                               ([3], [0.7], 1.0), ([1, 2, 1], [1.0, 1.0, 0.2], 0.5),
                                               ([1, 0, 1], [-0.4, 9.0, -0.4], 2.0)])
def test_the_spectral_norm_at_a_tied_largest_weight_is_exact(counts: list[int], logits: list[float], T: float) -> None:
    """softmax with the largest weight t held by two tokens: ``||J||_2 = t / T`` (J = A / T, 0 <= A <= t I, and
    e_i - e_j is an eigenvector of eigenvalue t). The exact tier gives that number (a float eigenvalue enclosure
    never decides the equality case of Corollary 3), in agreement with the dense tokens' float norm; so the strict
    bound ``J_spectral < 1/(2T)`` is certified violated at two equal logits, and the non-strict one holds there."""
    from attnbounds.theory.deciding.certify import certify
    from attnbounds.theory.mathematics.exact import ExactOps
    from attnbounds.theory.running import api

    inst = Instance.from_logits(np.array([logits]), nm.softmax(T), counts=[counts])
    ops = ExactOps()
    with ops.precision(128):
        value = ball_value("J_spectral", balls.ball_instance(inst, ops))
    want = float(_float("J_spectral", inst.expand())[0])
    t = float(inst.alpha[0][np.array(counts) > 0].max())
    assert abs(ops._to_float(value) - t / T) <= 1e-12 * t / T and abs(want - t / T) <= 1e-12 * t / T, (value, want)
    if counts == [1, 1]:
        for expr, status in (("J_spectral < 1/(2*T)", "violated"), ("J_spectral <= 1/(2*T)", "holds")):
            st = api.statement(expr, hypotheses=["softmax"], id="tied").statements[0]
            cert = certify(st, inst)
            assert cert.status == status and cert.margin_lo == 0.0 == cert.margin_hi, (expr, cert)


@pytest.mark.parametrize("normaliser, logits, counts", [(nm.exp_poly(0.1, 1.0), [5.0, 5.0, 3.0], [1, 1, 1]),
                                                        (nm.softmax(1.0), [1.0, 0.0], [1, 1]),
                                                        (nm.softmax(1.0), [0.0, 1.0, 1.0], [2, 1, 0]),
                                                        (nm.softmax(0.5), [1.0, 0.0], [1, 3])])
def test_the_exact_spectral_norm_is_the_tied_top_only_where_that_is_the_norm(normaliser: Any, logits: list[float],
                                                                            counts: list[int]) -> None:
    """Where ``|g| t`` is not ``||J||_2`` the exact tier must give the norm or nothing (Unsupported): exp(l - b l^2)
    at its peak l = 1/(2b), whose two tied top tokens have slope (log F)' = 0 (so ``|g| t = 0``) while a third token
    of slope 0.4 and weight 0.3 makes the norm positive; and softmax with one token alone at the top, whose norm is
    the secular equation's root below ``t``."""
    from attnbounds.theory.mathematics.exact import ExactOps
    from attnbounds.theory.mathematics.intervals import Unsupported

    inst = Instance.from_logits(np.array([logits]), normaliser, counts=[counts])
    want = float(_float("J_spectral", inst.expand())[0])
    assert want > 0.05
    ops = ExactOps()
    try:
        with ops.precision(128):
            value = ball_value("J_spectral", balls.ball_instance(inst, ops))
    except Unsupported:
        return
    assert abs(ops._to_float(value) - want) <= 1e-12 * want, (value, want)


@pytest.mark.parametrize("scale", [2.0, 0.25])
def test_the_finite_difference_ball_form_normalises_its_direction_exactly(scale: float) -> None:
    """g_fd reads 'a unit vector v': its ball form divides v by its exact norm, so a direction of any length gives the
    unit direction's value (the float form, at the unit vector itself), in every tier."""
    logits = np.array([[0.3, -1.2, 2.0, 0.7]])
    unit = np.array([[0.5, -0.5, 0.5, 0.5]])
    at_unit = float(compute("g_fd", Instance.from_logits(logits, nm.softmax(0.7), eps=1e-3, arrays={"v": unit}))[0])
    scaled = Instance.from_logits(logits, nm.softmax(0.7), eps=1e-3, arrays={"v": scale * unit})
    for name in ("arb", "mpmath"):
        ops = backend(name)
        value = ball_value("g_fd", balls.ball_instance(scaled, ops))
        lo, hi = ops.lower_float(value), ops.upper_float(value)
        assert lo <= at_unit * (1 + 1e-9) and at_unit * (1 - 1e-9) <= hi, (name, lo, hi, at_unit)
        assert hi - lo <= 1e-9 * at_unit, (name, lo, hi)
