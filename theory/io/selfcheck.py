"""The load-time self-check of a statement: the search's float evaluator and the certifier's ball
evaluator must read its formula the same way.

The search decides which instances are candidates with the statement's float evaluator
(:class:`attnbounds.theory.mathematics.statement.Statement`); the certifier decides verdicts with
:class:`attnbounds.theory.mathematics.intervals.BallEvaluator`. If they read a formula differently, a false bound can
look true to the search and never reach the certifier. :func:`check` feeds both the same numbers:
random values for every quantity and parameter (positive, log-uniform over :data:`VALUES`; a value per
column for per-token quantities) on small token-class instances (:data:`COLUMNS` columns holding 1 to 3
tokens, some of them selected, so that a ``Sum`` over the selected tokens is weighted by the counts).
On every conjunct, each side's float value must lie in the ball's enclosure up to :data:`RTOL` of the
side's condition magnitude (:func:`attnbounds.theory.deciding.margins.condition_magnitude`), which bounds float
rounding. A side that either evaluator cannot evaluate (an unsupported function, a ``Sum`` body that
is not a value per selected token), a disagreement, or a conjunct without a finite value at any
sample point refuses the statement (:class:`InvalidArgument`) with a message naming the part.
"""

from __future__ import annotations

import math
from typing import Any, cast

import numpy as np

from attnbounds.theory.deciding.certify import conjunct_balls
from attnbounds.theory.mathematics.errors import AttnBoundsError, InvalidArgument, NotApplicable
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.intervals import Ops, PrecisionLoss, backend
from attnbounds.theory.deciding.margins import compiled_magnitudes, side_values
from attnbounds.theory.mathematics.normalisers import RatioNormaliser
from attnbounds.theory.mathematics.quantities import QUANTITIES
from attnbounds.theory.mathematics.statement import SELECTED_WEIGHTS, Statement, conjuncts

#: sample points per check
SAMPLES = 16
#: columns (token classes) per sample instance
COLUMNS = 4
#: range of the random values (log-uniform)
VALUES = (1e-2, 1e2)
#: float and ball must agree to this fraction of the side's condition magnitude
RTOL = 1e-6
#: working precision of the balls
BITS = 128
#: the longest dense row :func:`check_hypotheses` builds (a statement whose range of L starts beyond it is checked
#: on token classes only: nothing of size L is allocated before a bound is checked)
DENSE_L = 64


def check(statement: Statement, where: str, *, samples: int = SAMPLES, seed: int = 0) -> None:
    """Refuse ``statement`` (:class:`InvalidArgument`, message prefixed by ``where``) unless its float and
    ball evaluations agree at ``samples`` random points (module docstring)."""
    rng = np.random.default_rng(seed)
    ops = backend(None)
    parts = conjuncts(statement.relation)
    compared = [0] * len(parts)
    for s in range(samples):
        inst = _sample_instance(rng, dense=s == 0)
        env = _values(rng, statement, inst)
        try:
            sides = statement.sides(env, inst)
            mags = [(side_values(lm, env, 1)[0], side_values(rm, env, 1)[0]) for lm, rm in compiled_magnitudes(statement.relation)]
        except Exception as exc:  # noqa: BLE001 - any failure of the float evaluator is the user's formula
            raise InvalidArgument(f"{where}: the float evaluator cannot evaluate {statement.formula}: "
                                  f"{type(exc).__name__}: {exc}") from None
        with ops.precision(BITS):
            balls, selected, weights = _balls(ops, statement, env, inst)
            for c, rel in enumerate(parts):
                try:
                    ball_sides = conjunct_balls(statement, c, ops, balls, selected, weights)
                except PrecisionLoss:
                    continue
                except Exception as exc:  # noqa: BLE001 - Unsupported, or a shape the certifier cannot combine
                    raise InvalidArgument(f"{where}: the certifier cannot evaluate {rel}: {type(exc).__name__}: "
                                          f"{exc}") from None
                lhs, rhs, cols = sides[c]
                pairs = _pairs(inst, lhs.shape[1], len(ball_sides[0]), cols)
                if pairs is None:
                    raise InvalidArgument(f"{where}: the float evaluator and the certifier read {rel} differently: "
                                          f"{lhs.shape[1]} value(s) against {len(ball_sides[0])}")
                finite = 0
                for side, name, expr in ((0, "left", rel.lhs), (1, "right", rel.rhs)):
                    f_all = (lhs, rhs)[side][0]
                    mag = np.broadcast_to(np.abs(mags[c][side]), f_all.shape)
                    ok = 0
                    for fc, bc in pairs:
                        agree = _agree(ops, float(f_all[fc]), ball_sides[side][bc], float(mag[fc]))
                        if agree is False:
                            raise InvalidArgument(
                                f"{where}: the float evaluator and the certifier disagree on the {name} side of {rel}: "
                                f"{expr} is {float(f_all[fc])!r} in float but {ops.text(ball_sides[side][bc], 17)} in "
                                f"interval arithmetic (sample {s}: {_describe(env, inst, fc)})")
                        ok += agree is True
                    finite += ok > 0
                compared[c] += finite == 2
    for c, rel in enumerate(parts):
        if compared[c] == 0:
            raise InvalidArgument(f"{where}: {rel} has no finite value at any of {samples} sample points (a log or "
                                  f"square root of a negative number, or a value beyond the double range?)")


def _sample_instance(rng: np.random.Generator, dense: bool) -> Instance:
    """One instance of :data:`COLUMNS` columns (1 token each when ``dense``, else 1 to 3), some selected."""
    counts = np.ones(COLUMNS, dtype=np.int64) if dense else rng.integers(1, 4, COLUMNS)
    selection = np.zeros(COLUMNS, dtype=bool)
    selection[rng.permutation(COLUMNS)[:rng.integers(1, COLUMNS + 1)]] = True
    w = rng.uniform(0.5, 1.5, COLUMNS)
    return Instance.from_weights(w / (w * counts).sum(), selection=selection,
                                 counts=None if dense else counts[None])


def _values(rng: np.random.Generator, statement: Statement, inst: Instance) -> dict[str, np.ndarray]:
    """The float environment of :meth:`Statement.sides`: a random value for every symbol (L and N from the
    instance, fixed parameters at their values), per column for per-token quantities."""
    lo, hi = np.log(VALUES[0]), np.log(VALUES[1])
    env: dict[str, np.ndarray] = {}
    for name in sorted(statement.symbols()):
        q = statement.bindings.get(name)
        if q is None and name in ("L", "N"):
            env[name] = np.full((1, 1), float(inst.L if name == "L" else cast(int, inst.N)))
        elif q is None and name in statement.fixed:
            env[name] = np.full((1, 1), float(statement.fixed[name]))
        else:
            width = inst.K if q is not None and QUANTITIES[q].shape != "B" else 1
            env[name] = np.exp(rng.uniform(lo, hi, (1, width)))
    env[SELECTED_WEIGHTS] = np.where(inst.mask & inst.present, inst.multiplicity, 0.0)
    return env


def _balls(ops: Ops, statement: Statement, env: dict[str, np.ndarray], inst: Instance
           ) -> tuple[dict[str, Any], dict[str, Any], np.ndarray]:
    """The same values as exact balls, laid out as :func:`attnbounds.theory.deciding.certify.certify` lays them out."""
    sel = np.flatnonzero(inst.mask[0] & inst.present[0])
    balls: dict[str, Any] = {}
    selected: dict[str, Any] = {}
    for name in sorted(statement.symbols()):
        row = env[name][0]
        q = statement.bindings.get(name)
        if q is not None and QUANTITIES[q].shape == "BN":
            selected[name] = np.array([ops.num(float(v)) for v in row[sel]], dtype=object)
        elif row.shape[0] > 1:
            balls[name] = np.array([ops.num(float(v)) for v in row], dtype=object)
        else:
            balls[name] = ops.num(float(row[0]))
    weights = np.array([ops.num(int(m)) for m in inst.multiplicity[0, sel]], dtype=object)
    return balls, selected, weights


def _pairs(inst: Instance, float_width: int, ball_width: int, cols: np.ndarray | None) -> list[tuple[int, int]] | None:
    """(float column, ball entry) pairs to compare, or None when the two readings have different shapes."""
    if float_width == 1 and ball_width == 1:
        return [(0, 0)]
    if float_width != inst.K:
        return None
    keep = np.flatnonzero(inst.present[0] if cols is None else cols[0])
    if ball_width == inst.K:
        return [(int(k), int(k)) for k in keep]
    sel = np.flatnonzero(inst.mask[0] & inst.present[0])
    if ball_width == len(sel) and cols is not None:
        return [(int(k), j) for j, k in enumerate(sel)]
    return None


def _agree(ops: Ops, f: float, ball: Any, magnitude: float) -> bool | None:
    """True when the float value lies in the ball up to rounding, False when it clearly does not, None
    when the float value is not finite (overflow, or undefined like the ball)."""
    if not math.isfinite(f):
        return None
    if not ops.is_finite(ball):
        return False
    slack = RTOL * max(abs(f), magnitude if math.isfinite(magnitude) else 0.0) + 1e-300
    return ops.lower_float(ball) - slack <= f <= ops.upper_float(ball) + slack


def _describe(env: dict[str, np.ndarray], inst: Instance, column: int) -> str:
    """The sample's values, for a message."""
    parts = [f"L = {inst.L}", f"N = {inst.N}"]
    for name, v in sorted(env.items()):
        if name != SELECTED_WEIGHTS and name not in ("L", "N"):
            parts.append(f"{name} = {v[0, min(column, v.shape[1] - 1)]:.6g}")
    return ", ".join(parts)


def check_normaliser(normaliser: RatioNormaliser, where: str, *, samples: int = SAMPLES, seed: int = 0) -> None:
    """Refuse a user's normaliser unless its ``log F`` evaluates in interval arithmetic (every certificate
    recomputes the weights from it) and agrees with the float kernel at random logits in [-5, 5]."""
    from attnbounds.theory.mathematics.normalisers.ratio import log_F

    rng = np.random.default_rng(seed)
    ops = backend(None)
    finite = 0
    for _ in range(samples):
        L = int(rng.integers(1, 11))
        logits = np.round(rng.uniform(-5.0, 5.0, (1, L)), 3)
        floats = normaliser.log_F_values(logits, L)[0]
        with ops.precision(BITS):
            try:
                balls = np.atleast_1d(log_F(ops, normaliser, L, ops.array(logits[0])))
            except PrecisionLoss:
                continue
            except Exception as exc:  # noqa: BLE001 - Unsupported, or anything else the user's formula causes
                raise InvalidArgument(f"{where}: the certifier cannot evaluate log F = {normaliser.log_F}: "
                                      f"{type(exc).__name__}: {exc}") from None
            for f, ball, l in zip(floats, balls, logits[0]):
                agree = _agree(ops, float(f), ball, 1.0)
                if agree is False:
                    raise InvalidArgument(f"{where}: log F = {normaliser.log_F} is {float(f)!r} in float but "
                                          f"{ops.text(ball, 17)} in interval arithmetic at l = {l}, L = {L}")
                finite += agree is True
    if finite == 0:
        raise InvalidArgument(f"{where}: log F = {normaliser.log_F} has no finite value at {samples} random logits")


def check_hypotheses(statement: Statement, where: str, *, seed: int = 0) -> None:
    """Refuse ``statement`` unless each of its hypotheses can be checked on the instances the search builds for
    it (dense and token classes): a hypothesis reading an input none of its quantities asks for (the direction
    ``v`` of ``unit-direction``, the sphere parameters of ``assumptions-1-2``) would fail on every instance."""
    from attnbounds.theory.mathematics import families

    rng = np.random.default_rng(seed)
    shortest = statement.ranges.get("L", (1.0, 1.0))[0]
    for classes in (False, True):
        if not classes and shortest > DENSE_L:  # long contexts only: token-class forms, never a dense row of L tokens
            continue
        try:
            spec = families.random_spec(rng, statement, B=2, max_L=6, classes=classes)
            inst = statement.prepare(families.build(statement, spec))  # defaults filled in, as evaluate does
        except AttnBoundsError:  # a parameter no family provides: the search says so itself
            continue
        for h in statement.hypotheses:
            try:
                h(inst)
            except NotApplicable:
                continue
            except Exception as exc:  # noqa: BLE001 - a KeyError for a missing input, an InvalidArgument, ...
                raise InvalidArgument(f"{where}: hypothesis {h.id!r} cannot be checked on the instances this statement "
                                      f"reads (it needs an input none of its quantities asks for): "
                                      f"{type(exc).__name__}: {exc}") from None
