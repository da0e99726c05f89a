"""The discussion's multi-head remark: the probability that independent heads cover a token, by
enumerating head outcomes (never by the closed form it is compared with), in float, ball and torch forms."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from attnbounds.theory import memory
from attnbounds.theory.balls import ExactInstance
from attnbounds.theory.errors import InvalidArgument
from attnbounds.theory.instance import Instance
from attnbounds.theory.intervals import Unsupported
from attnbounds.theory.quantities.spec import define

#: the most heads the enumeration of 2^H outcomes (float, torch) accepts
MAX_HEADS_ENUMERATED = 20

coverage_enum = define(
    "coverage_enum", "B", "P(a token is covered by at least one of H independent heads), by enumerating "
    "all 2^H head outcomes (not by the closed form)", definition="sum over head outcomes with >= 1 covering head",
    reference="Discussion (multi-head remark)", needs=("heads",), cost="weights")


def _heads(H: np.ndarray, limit: int) -> np.ndarray:
    Hi = np.asarray(H)
    if np.any(Hi != np.round(Hi)) or np.any(Hi < 0) or np.any(Hi > limit):
        bad = Hi[(Hi != np.round(Hi)) | (Hi < 0) | (Hi > limit)][0]
        raise InvalidArgument(f"H must be a whole number of heads in [0, {limit}], got H={float(bad):g} (coverage_enum "
                              f"enumerates the 2^H head outcomes; the interval form takes up to 10000 heads)")
    return Hi.astype(int)


@coverage_enum.float_form
def _coverage(inst: Instance) -> np.ndarray:
    """Sums the probabilities of the 2^H outcomes in which some head covers (chunked: at most 2^22 numbers at once)."""
    p, H = inst.param("p"), _heads(inst.param("H"), MAX_HEADS_ENUMERATED)
    out = np.empty(inst.B)
    for h in np.unique(H):
        rows = np.nonzero(H == h)[0]
        if h == 0:  # no head: nothing covers
            out[rows] = 0.0
            continue
        outcomes = np.array(np.meshgrid(*[[0, 1]] * h, indexing="ij")).reshape(h, -1).T == 1  # (2^h, h)
        covered = outcomes.any(axis=1)
        for chunk in np.array_split(rows, max(1, rows.size * outcomes.size // 2**22)):
            pc = p[chunk, None, None]
            prob = np.prod(np.where(outcomes[None], pc, 1 - pc), axis=2)  # (b, 2^h)
            out[chunk] = prob[:, covered].sum(-1)
    return out


@coverage_enum.ball_form
def _coverage_ball(ex: ExactInstance) -> Any:
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
def _coverage_torch(st: Any) -> Any:
    import torch

    p, H = st.param("p"), _heads(st.param("H").detach().numpy(), MAX_HEADS_ENUMERATED)
    memory.check(2 * 8.0 * p.shape[0] * int(H.max(initial=0)) * 2.0 ** int(H.max(initial=0)),
                 f"{p.shape[0]} x 2^{int(H.max(initial=0))} head outcomes in torch")
    out = torch.zeros_like(p)
    for h in np.unique(H):
        if h == 0:
            continue
        outcomes = torch.as_tensor(np.array(np.meshgrid(*[[0, 1]] * h, indexing="ij")).reshape(h, -1).T == 1)
        covered = outcomes.any(dim=1)
        pc = p[:, None, None]
        prob = torch.where(outcomes[None], pc, 1 - pc).prod(dim=2)
        out = torch.where(torch.as_tensor(H == h), prob[:, covered].sum(-1), out)
    return out
