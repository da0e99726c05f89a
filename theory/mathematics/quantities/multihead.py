"""The discussion's multi-head remark: the probability that independent heads cover a token, by
summing the probabilities of the head outcomes (never by the closed form it is compared with), in float, ball and
torch forms. The 2^H outcomes are grouped by how many heads cover (``C(H, k)`` outcomes of probability
``p^k (1 - p)^(H - k)`` each), so the sum costs O(H) per instance, not O(2^H)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import sympy as sp

from attnbounds.theory.mathematics.balls import BallInstance
from attnbounds.theory.mathematics.errors import InvalidArgument
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.intervals import BallValue, Unsupported
from attnbounds.theory.mathematics.quantities.spec import define
from attnbounds.theory.mathematics.quantities.torch_state import State

if TYPE_CHECKING:
    from torch import Tensor

    from attnbounds.theory.mathematics.quantities.relaxed import RelaxedInstance


#: the most heads the float and torch forms accept (the domain of H; the interval form takes up to 10000)
MAX_HEADS_ENUMERATED = 20

coverage_enum = define(
    "coverage_enum", "B", "P(a token is covered by at least one of H independent heads), by enumerating "
    "the 2^H head outcomes, grouped by how many heads cover (not by the closed form)",
    definition="sum over head outcomes with >= 1 covering head",
    reference="Discussion (multi-head remark)", needs=("heads",), cost="weights", closed_form=True)


def _heads(H: np.ndarray, limit: int) -> np.ndarray:
    Hi = np.asarray(H)
    if np.any(Hi != np.round(Hi)) or np.any(Hi < 0) or np.any(Hi > limit):
        bad = Hi[(Hi != np.round(Hi)) | (Hi < 0) | (Hi > limit)][0]
        raise InvalidArgument(f"H must be a whole number of heads in [0, {limit}], got H={float(bad):g} (the domain "
                              f"of coverage_enum; the interval form takes up to 10000 heads)")
    return Hi.astype(int)


@coverage_enum.float_form
def _coverage(inst: Instance) -> np.ndarray:
    """``sum_{k >= 1} C(H, k) p^k (1 - p)^(H - k)``: the outcomes in which some head covers, grouped by how many do."""
    p, H = inst.param("p"), _heads(inst.param("H"), MAX_HEADS_ENUMERATED)
    k = np.arange(1, MAX_HEADS_ENUMERATED + 1)
    comb = np.array([[math.comb(int(h), int(j)) for j in k] for h in range(MAX_HEADS_ENUMERATED + 1)], dtype=np.float64)
    with np.errstate(invalid="ignore"):
        terms = comb[H] * p[:, None] ** k * (1 - p[:, None]) ** np.maximum(H[:, None] - k, 0)
    return np.where(k <= H[:, None], terms, 0.0).sum(-1)


@coverage_enum.ball_form
def _coverage_ball(ex: BallInstance) -> BallValue:
    """``sum_{k >= 1} C(H, k) p^k (1 - p)^(H - k)``: the outcomes grouped by how many heads cover."""
    ops = ex.ops
    p = ex.param("p")
    Hf = ex.float_param("H", 1.0)
    if not Hf.is_integer() or Hf < 0 or Hf > 10_000:
        raise Unsupported(f"H must be a whole number of heads in [0, 10000], got H={Hf}")
    H = int(Hf)
    q = ops.num(1) - p
    return ops.total(np.array([ops.num(math.comb(H, k)) * ops.ipow(p, k) * ops.ipow(q, H - k) for k in range(1, H + 1)],
                              dtype=object))


@coverage_enum.torch_form
def _coverage_torch(state: State) -> Tensor:
    import torch

    p, H = state.param("p"), _heads(state.param("H").detach().numpy(), MAX_HEADS_ENUMERATED)
    k = torch.arange(1, MAX_HEADS_ENUMERATED + 1, dtype=p.dtype)
    Ht = torch.as_tensor(H, dtype=p.dtype)[:, None]
    comb = torch.as_tensor([[math.comb(int(h), j) for j in range(1, MAX_HEADS_ENUMERATED + 1)] for h in H], dtype=p.dtype)
    terms = comb * p[:, None] ** k * (1 - p[:, None]) ** torch.clamp(Ht - k, min=0)
    return torch.where(k <= Ht, terms, torch.zeros_like(terms)).sum(-1)


@coverage_enum.relaxed_form
def _coverage_relaxed(rx: RelaxedInstance) -> sp.Expr:
    """``sum_{k >= 1} C(H, k) p^k (1 - p)^(H - k)``, grouped as the float form groups the outcomes, for a fixed whole
    number of heads ``H`` (at most :data:`MAX_HEADS_ENUMERATED`): a polynomial in ``p``, whatever ``p``'s range. The sum's
    length is H, so a range of H is relaxed one whole H at a time (the prover's relax)."""
    H = rx.param("H")
    if not (H.is_number and float(H).is_integer() and 0 <= float(H) <= MAX_HEADS_ENUMERATED):
        raise Unsupported(f"coverage_enum is relaxed for a fixed whole number of heads H in [0, {MAX_HEADS_ENUMERATED}] "
                          f"only, not H = {H}")
    n, p = int(float(H)), rx.param("p")
    return sp.Add(*[sp.binomial(n, k) * p**k * (1 - p) ** (n - k) for k in range(1, n + 1)])
