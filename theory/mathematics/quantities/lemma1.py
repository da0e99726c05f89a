"""Lemma 1 and Corollary 1: the constants C_1, C_2 and the key norms Delta, in float, ball and torch forms."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import sympy as sp

from attnbounds.theory.mathematics.balls import BallInstance, F_extrema
from attnbounds.theory.mathematics.errors import InvalidArgument
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.intervals import BallValue, Unsupported
from attnbounds.theory.mathematics.normalisers import RatioNormaliser
from attnbounds.theory.mathematics.opaque import OAbs
from attnbounds.theory.mathematics.quantities import _float as F
from attnbounds.theory.mathematics.quantities.spec import define
from attnbounds.theory.mathematics.quantities.torch_state import State

if TYPE_CHECKING:
    from torch import Tensor

    from attnbounds.theory.mathematics.quantities.relaxed import RelaxedInstance

_REFERENCE = "Lemma 1 (extrema of F on the compact [-a, a])"


def _ratio(normaliser: Any) -> RatioNormaliser:
    if not isinstance(normaliser, RatioNormaliser):
        raise InvalidArgument("Lemma 1's constants need a normaliser of the form F / sum F")
    return normaliser


def _log_F_range(inst: Instance) -> tuple[np.ndarray, np.ndarray]:
    """``(log min F, log max F)`` on ``[-a, a]`` per instance, ``a`` the instance parameter."""
    return F.cached(inst, "logFrange", lambda: _ratio(inst.normaliser).log_F_range(inst.param("a")))


def _log_F_range_ball(ex: BallInstance) -> tuple[Any, Any]:
    if "F_range" not in ex.cache:
        n = ex.inst.normaliser
        if not isinstance(n, RatioNormaliser):
            raise Unsupported("Lemma 1's constants need a normaliser of the form F / sum F")
        ex.cache["F_range"] = F_extrema(ex.ops, n, ex.L, ex.param("a"))  # F does not depend on L here
    return ex.cache["F_range"]


def _log_F_range_torch(state: State) -> tuple[Any, Any]:
    """log F at -a, a and at the critical points of log F inside ``[-a, a]`` (the extrema of a smooth F)."""
    import torch

    a = state.param("a") if "a" in state.params else state.masked(state.logits.abs(), state.present, "max")
    crit = torch.as_tensor(np.asarray(state.critical_points, dtype=np.float64))
    pts = torch.cat([-a[:, None], a[:, None], crit.expand(a.shape[0], crit.numel())], dim=1)
    inside = pts.abs() <= a[:, None]
    lf = state.log_F_of(torch.where(inside, pts, a[:, None]))
    lo = torch.where(inside, lf, torch.full_like(lf, float("inf"))).min(-1).values
    hi = torch.where(inside, lf, torch.full_like(lf, -float("inf"))).max(-1).values
    return lo, hi


def _exp_magnitude(sign: float) -> Any:
    """``C = exp(sign (hi - lo))`` from log F values known to about ``eps (|lo| + |hi|)``: its rounding error
    is about ``C (1 + |lo| + |hi|)`` ulps."""
    def magnitude(inst: Instance) -> np.ndarray:
        lo, hi = _log_F_range(inst)
        with np.errstate(over="ignore"):
            return np.exp(sign * (hi - lo)) * (1 + np.abs(lo) + np.abs(hi))
    return magnitude


C_1 = define("C_1", "B", "Lemma 1 lower constant min F / max F on [-a, a]", definition="min_{|l|<=a} F / max_{|l|<=a} F",
             reference=_REFERENCE, needs=("ratio", "logits"), cost="weights", normaliser=True,
             magnitude=_exp_magnitude(-1.0), nonnegative=True, closed_form=True, F_extremes=True, reads_logit_bound=True)


@C_1.float_form
def _c1(inst: Instance) -> np.ndarray:
    lo, hi = _log_F_range(inst)
    return np.exp(lo - hi)


@C_1.ball_form
def _c1_ball(ex: BallInstance) -> BallValue:
    lo, hi = _log_F_range_ball(ex)
    return ex.ops.exp(lo - hi)


@C_1.torch_form
def _c1_torch(state: State) -> Tensor:
    lo, hi = _log_F_range_torch(state)
    return (lo - hi).exp()


def _log_F_range_relaxed(rx: Any, tokens_move: int) -> tuple[Any, Any]:
    """``(min, max)`` of log F on [-a, a] in the relaxed space (:meth:`RelaxedInstance.log_F_extremes`); the
    quantity moves by the sign ``tokens_move`` when the extremes over the tokens replace those over the box."""
    return rx.log_F_extremes(tokens_move)


@C_1.relaxed_form
def _c1_relaxed(rx: RelaxedInstance) -> sp.Expr:
    lo, hi = _log_F_range_relaxed(rx, +1)  # a larger min, a smaller max: C_1 grows
    return sp.exp(lo - hi)


C_2 = define("C_2", "B", "Lemma 1 upper constant max F / min F on [-a, a] (inf when it exceeds the float range)",
             definition="max_{|l|<=a} F / min_{|l|<=a} F", reference=_REFERENCE, needs=("ratio", "logits"),
             cost="weights", normaliser=True, magnitude=_exp_magnitude(1.0), nonnegative=True,
             closed_form=True, F_extremes=True, reads_logit_bound=True)


@C_2.float_form
def _c2(inst: Instance) -> np.ndarray:
    lo, hi = _log_F_range(inst)
    with np.errstate(over="ignore"):  # the bound is then vacuous: C_2 / L = inf
        return np.exp(hi - lo)


@C_2.ball_form
def _c2_ball(ex: BallInstance) -> BallValue:
    lo, hi = _log_F_range_ball(ex)
    return ex.ops.exp(hi - lo)


@C_2.torch_form
def _c2_torch(state: State) -> Tensor:
    lo, hi = _log_F_range_torch(state)
    return (hi - lo).exp()


@C_2.relaxed_form
def _c2_relaxed(rx: RelaxedInstance) -> sp.Expr:
    lo, hi = _log_F_range_relaxed(rx, -1)  # a smaller max, a larger min: C_2 shrinks
    return sp.exp(hi - lo)


def _need_qk(inst: Instance) -> tuple[np.ndarray, np.ndarray]:
    if inst.q is None or inst.k is None:
        raise InvalidArgument("Corollary 1 needs the query and keys; build the instance with from_qk")
    return inst.q, inst.k


Delta_own = define("Delta_own", "BL", "||q||_2 ||k_i||_2 for every key i", definition="||q||_2 ||k_i||_2",
                   reference="Corollary 1 (Delta with the i-th key)", needs=("qk",), cost="weights", nonnegative=True,
                   closed_form=True)


@Delta_own.float_form
def _delta_own(inst: Instance) -> np.ndarray:
    q, k = _need_qk(inst)
    return np.linalg.norm(q, axis=-1)[:, None] * np.linalg.norm(k, axis=-1)


@Delta_own.ball_form
def _delta_own_ball(ex: BallInstance) -> np.ndarray:
    if ex.q is None or ex.k is None:
        raise InvalidArgument("Corollary 1 needs the query and keys; build the instance with from_qk")
    return ex.ops.norm(ex.q) * ex.ops.norm(ex.k, axis=-1)


@Delta_own.torch_form
def _delta_own_torch(state: State) -> Tensor:
    return state.norm(state.q)[:, None] * state.norm(state.k)


@Delta_own.relaxed_form
def _delta_own_relaxed(rx: RelaxedInstance) -> sp.Expr:
    # Cauchy-Schwarz: ||q|| ||k_i|| >= |<q, k_i>| = |l_i|, with equality for a key parallel to q; the relaxation reads
    # this lower bound only where the margin cannot shrink as Delta_i grows (a proof there proves the statement)
    if rx.logit_bound != "keys":
        raise Unsupported("Delta_own is relaxed only under logits-qk, where it bounds its token's logit")
    rx.at_least("Cauchy-Schwarz: ||q|| ||k_i|| >= |<q, k_i>| = |l_i|")
    tok = rx.role("i")
    if tok.l is None:
        raise Unsupported("softmax weights fix the logits only up to a shift: |l_i| is not a function of them")
    return OAbs(tok.l)


Delta_max = define("Delta_max", "B", "||q||_2 max_j ||k_j||_2", definition="||q||_2 max_j ||k_j||_2",
                   reference="Corollary 1 (Delta with the largest key)", needs=("qk",), cost="weights", nonnegative=True,
                   closed_form=True)


@Delta_max.float_form
def _delta_max(inst: Instance) -> np.ndarray:
    return F.masked_max(_delta_own(inst), inst.present)


@Delta_max.ball_form
def _delta_max_ball(ex: BallInstance) -> BallValue:
    return ex.ops.maximum(_delta_own_ball(ex)[ex.present])


@Delta_max.torch_form
def _delta_max_torch(state: State) -> Tensor:
    return state.masked(_delta_own_torch(state), state.present, "max")


@Delta_max.relaxed_form
def _delta_max_relaxed(rx: RelaxedInstance) -> sp.Expr:
    # under logits-qk the relaxed logits lie in [-a, a] with a standing for Delta_max (Cauchy-Schwarz): every instance
    # of q and k is a relaxed point with a = Delta_max, so a bound proved over the relaxed points holds for them
    if rx.logit_bound != "keys":
        raise Unsupported("Delta_max is relaxed only under logits-qk, as the bound of every logit")
    return rx.param("a")
