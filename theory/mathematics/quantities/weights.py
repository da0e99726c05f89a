"""The weights of paper eq. (3) and their summaries, in float, ball and torch forms side by side."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import numpy as np

from attnbounds.theory.mathematics.balls import BallInstance
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.intervals import BallValue, Unsupported
from attnbounds.theory.mathematics.opaque import OAbs
from attnbounds.theory.mathematics.quantities import _float as F
from attnbounds.theory.mathematics.quantities.spec import Quantity, define
from attnbounds.theory.mathematics.quantities.torch_state import State

if TYPE_CHECKING:
    import sympy as sp
    from torch import Tensor

    from attnbounds.theory.mathematics.quantities.relaxed import RelaxedInstance

alpha_i = define("alpha_i", "BL", "attention weight of every token", definition="alpha_i = F(l_i) / sum_j F(l_j)",
                 reference="eq. (3)", needs=(), cost="weights",
                 magnitude=lambda inst: inst.alpha * (1 + F.exponent_size(inst)), nonnegative=True, closed_form=True,
                 elementwise=True)


@alpha_i.float_form
def _alpha_i(inst: Instance) -> np.ndarray:
    return inst.alpha


@alpha_i.ball_form
def _alpha_i_ball(ex: BallInstance) -> np.ndarray:
    return ex.alpha


@alpha_i.torch_form
def _alpha_i_torch(state: State) -> Tensor:
    return state.alpha


@alpha_i.relaxed_form
def _alpha_i_relaxed(rx: RelaxedInstance) -> sp.Expr:
    return rx.weight(rx.role("i"))


def _extreme_weight(how: Literal["min", "max"]) -> Quantity:
    """``alpha_min`` (smallest weight) or ``alpha_max`` (largest), with its four forms; Lemma 2."""
    q = define(f"alpha_{how}", "B", f"{'smallest' if how == 'min' else 'largest'} weight {how}_i alpha_i",
               definition=f"{how}_i alpha_i", reference="Lemma 2", needs=(), cost="weights", nonnegative=True,
               closed_form=True, elementwise=True)
    masked = F.masked_min if how == "min" else F.masked_max
    sign = -1 if how == "min" else 1  # the token of the extreme dominates every other: sign * (lam_r - lam_k) >= 0

    @q.float_form
    def _float(inst: Instance) -> np.ndarray:
        return masked(inst.alpha, inst.present)

    @q.ball_form
    def _ball(ex: BallInstance) -> BallValue:
        extreme = ex.ops.minimum if how == "min" else ex.ops.maximum
        return extreme(ex.alpha[ex.present])

    @q.torch_form
    def _torch(state: State) -> Tensor:
        return state.masked(state.alpha, state.present, how)

    @q.relaxed_form
    def _relaxed(rx: RelaxedInstance) -> sp.Expr:
        return rx.weight(rx.role(how, dominates=lambda r, k: sign * (r.lam - k.lam), extreme=how))

    return q


alpha_min, alpha_max = _extreme_weight("min"), _extreme_weight("max")


abar_N = define("abar_N", "B", "selected mass abar_N = sum_{i in I_N} alpha_i", definition="sum_{i in I_N} alpha_i",
                reference="Theorem 1", needs=("selection",), cost="weights", nonnegative=True, closed_form=True)


@abar_N.float_form
def _abar(inst: Instance) -> np.ndarray:
    return F.selected_weight(inst).sum(-1)


@abar_N.ball_form
def _abar_ball(ex: BallInstance) -> BallValue:
    return ex.weighted_total(ex.alpha, ex.sel)


@abar_N.torch_form
def _abar_torch(state: State) -> Tensor:
    return (state.alpha * state.mult * state.mask).sum(-1)


@abar_N.relaxed_form
def _abar_relaxed(rx: RelaxedInstance) -> sp.Expr:
    return rx.total(lambda k: k.F, selected=True) / rx.total(lambda k: k.F)


logit_absmax = define("logit_absmax", "B", "max_i |l_i|, the tightest a with l_i in [-a, a]",
                      definition="max_i |l_i|", reference="Lemma 1", needs=("logits",), cost="weights", nonnegative=True,
                      closed_form=True, reads_logit_bound=True, elementwise=True)


@logit_absmax.float_form
def _absmax(inst: Instance) -> np.ndarray:
    return F.masked_max(np.abs(F.need_logits(inst)), inst.present)


@logit_absmax.ball_form
def _absmax_ball(ex: BallInstance) -> BallValue:
    return ex.ops.maximum(ex.ops.map(ex.ops.abs, ex.need_logits()[ex.present]))


@logit_absmax.torch_form
def _absmax_torch(state: State) -> Tensor:
    return state.masked(state.logits.abs(), state.present, "max")


@logit_absmax.relaxed_form
def _absmax_relaxed(rx: RelaxedInstance) -> sp.Expr:
    tok = rx.role("absmax", dominates=lambda r, k: r.l**2 - k.l**2 if r.l is not None and k.l is not None else 0,
                  extreme="max")
    if tok.l is None:
        raise Unsupported("softmax weights fix the logits only up to a shift: max |l_i| is not a function of them")
    return OAbs(tok.l)
