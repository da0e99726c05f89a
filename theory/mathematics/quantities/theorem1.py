"""Theorem 1 and Corollary 2: distances between the context vector and the other tokens, in float, ball
and torch forms side by side.

``y_i = alpha_i x_i``, ``s = sum_{i in I_N} y_i`` (the context vector), ``m = sum_i y_i`` (the
attention output). Columns are token classes with their counts (one token each for a dense instance).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from attnbounds.theory.mathematics import memory
from attnbounds.theory.mathematics.balls import BallInstance, matmul
from attnbounds.theory.mathematics.errors import InvalidArgument
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.intervals import BallValue
from attnbounds.theory.mathematics.quantities import _float as F
from attnbounds.theory.mathematics.quantities import _subsets
from attnbounds.theory.mathematics.quantities.spec import (NO_RELAXED_VECTORS, MonteCarlo, define, hoeffding_halfwidth,
                                                             mc_settings)
from attnbounds.theory.mathematics.quantities.torch_state import State

if TYPE_CHECKING:
    from torch import Tensor


_FIXED = "Theorem 1 (fixed top-N set)"
_RANDOM = "Theorem 1 (random N-subset)"


# -- magnitudes: the size of the numbers each quantity is computed from ------------------------------
def _A(inst: Instance) -> np.ndarray:
    return (inst.multiplicity * F.y_norms(inst)).sum(-1)


def _r1_scale(inst: Instance) -> np.ndarray:
    """``sum_i ||y_i|| + (L - N) sum_{j in I_N} ||y_j||``: every term ``||y_i - s||`` is computed from ``||y_i|| + ||s||``."""
    sel = (inst.multiplicity * np.where(inst.mask, F.y_norms(inst), 0.0)).sum(-1)
    return _A(inst) + (inst.L - cast(int, inst.N)) * sel


def _r1_scale_random(inst: Instance) -> np.ndarray:
    N = cast(int, inst.N)
    top = F.top_n_sum(F.y_norms(inst), inst.multiplicity, N)
    return _A(inst) + (inst.L - N) * top


def _jensen_scale(inst: Instance) -> np.ndarray:
    xn = np.sqrt(F.norms_sq(inst))
    mult, L, N = inst.multiplicity, inst.L, cast(int, inst.N)
    rho = N / max(L - 1, 1)
    c = inst.alpha * (1 + rho) + rho
    return (mult * c * xn).sum(-1) + L * rho * _A(inst) + (mult * xn).sum(-1)


# -- max_norm ------------------------------------------------------------------------------------------
max_norm = define("max_norm", "B", "max_{j in I_N} ||x_j||_2", definition="max_{j in I_N} ||x_j||_2", reference=_FIXED,
                  needs=("x", "selection"), cost="tokens", closed_form=True, lacks={"relaxed": NO_RELAXED_VECTORS})


@max_norm.float_form
def _max_norm(inst: Instance) -> np.ndarray:
    return np.sqrt(F.masked_max(F.norms_sq(inst), inst.mask & inst.present, 0.0))


@max_norm.ball_form
def _max_norm_ball(ex: BallInstance) -> BallValue:
    return ex.ops.maximum(ex.ops.norm(ex.need_x()[ex.sel], axis=-1))


@max_norm.torch_form
def _max_norm_torch(state: State) -> Tensor:
    return state.masked(state.norm(state.x), state.mask & state.present, "max")


# -- the largest token vector ------------------------------------------------------------------------------
x_max = define("x_max", "B", "max_i ||x_i||_2 over every token (selected or not)", definition="max_i ||x_i||_2",
               reference="Theorem 1 (the norms its bounds use)", needs=("x",), cost="tokens", closed_form=True,
               lacks={"relaxed": NO_RELAXED_VECTORS})


@x_max.float_form
def _x_max(inst: Instance) -> np.ndarray:
    return np.sqrt(F.masked_max(F.norms_sq(inst), inst.present, 0.0))


@x_max.ball_form
def _x_max_ball(ex: BallInstance) -> BallValue:
    return ex.ops.maximum(ex.ops.norm(ex.need_x()[ex.present], axis=-1))


@x_max.torch_form
def _x_max_torch(state: State) -> Tensor:
    return state.masked(state.norm(state.x), state.present, "max")


# -- d_1 -----------------------------------------------------------------------------------------------
d_1 = define("d_1", "B", "d_1 = max_{i not in I_N, j in I_N} ||x_i - x_j||_2 (0 when N = L)",
             definition="max_{i not in I_N, j in I_N} ||x_i - x_j||_2", reference=_FIXED, needs=("x", "selection"),
             cost="tokens", magnitude=lambda inst: 2 * np.sqrt(F.masked_max(F.norms_sq(inst), inst.present, 0.0)),
             closed_form=True, lacks={"relaxed": NO_RELAXED_VECTORS})


@d_1.float_form
def _d1(inst: Instance) -> np.ndarray:
    """Gram-form squared distances over (non-selected, selected) column pairs locate the largest pair,
    whose distance is then recomputed from the difference; rows where every pair nearly coincides or the squares
    overflow (the Gram form cannot rank them) compare all pairs directly. Made chunk by chunk in
    :func:`~attnbounds.theory.mathematics.quantities._float.token_pass` (which reads each chunk of token vectors
    once for the squared norms, the context and this)."""
    x = F.need_x(inst)
    out_mask = ~inst.mask & inst.present
    if inst.N == inst.L:
        return np.zeros(inst.B)
    cols, valid = F.column_sets(inst.mask & inst.present)
    S = cols.shape[1]
    step = max(1, F.CHUNK_ELEMENTS // max(inst.K * S, 1))
    # Gram distances, the product they come from, the pair mask, the masked copy: each (rows, K, S)
    memory.check(4 * 8.0 * min(step, inst.B) * inst.K * S, f"d_1 over {inst.K} x {S} column pairs")

    # per row, the largest pair (i non-selected, j-th selected) and its Gram-form squared distance
    i, j, top = np.zeros(inst.B, dtype=np.intp), np.zeros(inst.B, dtype=np.intp), np.zeros(inst.B)

    def chunk(rows: slice, xb: np.ndarray, n2: np.ndarray) -> None:
        n = xb.shape[0]
        xs = xb[np.arange(n)[:, None], cols[rows]]  # (b, S, d)
        # (b, S, K): the selected columns against every column (the product with the few selected vectors on the
        # left runs faster than with them on the right)
        with np.errstate(over="ignore", invalid="ignore"):  # squares that overflow: compared directly below
            d2 = np.take_along_axis(n2[rows], cols[rows], axis=1)[:, :, None] + n2[rows][:, None, :]
            d2 -= 2.0 * np.matmul(xs, xb.transpose(0, 2, 1))
        np.copyto(d2, -np.inf, where=~(valid[rows][:, :, None] & out_mask[rows][:, None, :]))
        # the largest pair, the first in (non-selected column, selected column) order at a tie
        best = d2.max(axis=(1, 2), keepdims=True)
        hit = d2 == best
        i[rows] = hit.any(axis=1).argmax(-1)
        j[rows] = hit[np.arange(n), :, i[rows]].argmax(-1)
        top[rows] = best[:, 0, 0]

    F.token_pass(inst, step, chunk)
    b = np.arange(inst.B)
    n2 = F.norms_sq(inst)
    result = F.norm(x[b, i] - x[b, cols[b, j]], axis=-1)
    scale = F.masked_max(n2, out_mask, 0.0) + F.masked_max(np.take_along_axis(n2, cols, axis=1), valid, 0.0)
    # rows the Gram form cannot rank: every pair nearly coincides, or the squares overflow
    for r in np.nonzero(~(top > F.CANCELLATION * scale) | ~np.isfinite(top))[0]:
        memory.check(2 * 8.0 * inst.K * S * x.shape[-1], f"d_1 over {inst.K} x {S} nearly equal column pairs")
        diff = F.norm(x[r][:, None, :] - x[r][cols[r]][None, :, :], axis=-1)
        result[r] = np.where(out_mask[r][:, None] & valid[r][None, :], diff, -np.inf).max()
    return result


@d_1.ball_form
def _d1_ball(ex: BallInstance) -> BallValue:
    """Only pairs whose float distance (direct differences, relative error below ``(d + 4) u``) is within a
    relative 1e-6 of the float maximum can attain the maximum; those are recomputed in balls. Any
    non-finite, huge or tiny float value disables the screen (every pair in balls)."""
    sel, out = ex.sel, ex.out
    if len(out) == 0:
        return ex.num(0)
    xf = cast(np.ndarray, ex.inst.x)[0]
    df = np.sqrt(((xf[out][:, None, :] - xf[sel][None, :, :]) ** 2).sum(-1))
    top = df.max()
    safe = np.isfinite(df).all() and top < 1e150 and (top == 0 or df[df > 0].min() > 1e-150)
    pairs = np.argwhere(df >= top * (1 - 1e-6)) if safe else np.argwhere(np.ones_like(df, dtype=bool))
    x = ex.need_x()
    diffs = x[out[pairs[:, 0]]] - x[sel[pairs[:, 1]]]
    return ex.ops.maximum(ex.ops.norm(diffs, axis=-1))


@d_1.torch_form
def _d1_torch(state: State) -> Tensor:
    import torch

    d = state.distances(state.x, state.x)
    pair = (~state.mask & state.present)[:, :, None] & (state.mask & state.present)[:, None, :]
    return torch.where(pair, d, torch.zeros_like(d)).flatten(1).max(-1).values


def _context_ball(ex: BallInstance) -> np.ndarray:
    """``s = sum_{j in I_N} m_j alpha_j x_j``."""
    if "s" not in ex.cache:
        ex.cache["s"] = ex.weighted_total(ex.alpha[:, None] * ex.need_x(), ex.sel) if len(ex.sel) else \
            np.array([ex.num(0)] * ex.need_x().shape[1], dtype=object)
    return ex.cache["s"]


# -- distances to the context vector ------------------------------------------------------------------------
context_distance = define("context_distance", "BL", "||alpha_i x_i - s||_2 for every token (s the context vector)",
                          definition="||alpha_i x_i - s||_2, s = sum_{j in I_N} alpha_j x_j",
                          reference="eq. (7); Definition (geometric distinguishability)", needs=("x", "selection"),
                          cost="tokens", magnitude=lambda inst: F.y_norms(inst)
                          + F.norm(F.context(inst), axis=-1)[:, None], closed_form=True,
                          lacks={"relaxed": NO_RELAXED_VECTORS})


@context_distance.float_form
def _context_distance(inst: Instance) -> np.ndarray:
    return F.dist_to_context(inst)


@context_distance.ball_form
def _context_distance_ball(ex: BallInstance) -> np.ndarray:
    return ex.ops.norm(ex.alpha[:, None] * ex.need_x() - _context_ball(ex)[None, :], axis=-1)


@context_distance.torch_form
def _context_distance_torch(state: State) -> Tensor:
    return state.norm(state.alpha[..., None] * state.x - state.context()[:, None, :])


# -- dtilde (eq. 7) --------------------------------------------------------------------------------------
dtilde_R1 = define("dtilde_R1", "B", "R1 of eq. (7): sum_{i not in I_N} ||alpha_i x_i - s||_2",
                   definition="sum_{i not in I_N} ||alpha_i x_i - s||_2", reference="eq. (7), reading R1",
                   needs=("x", "selection"), cost="tokens", magnitude=_r1_scale, closed_form=True,
                   lacks={"relaxed": NO_RELAXED_VECTORS})


@dtilde_R1.float_form
def _dtilde_r1(inst: Instance) -> np.ndarray:
    return np.where(inst.mask, 0.0, inst.multiplicity * F.dist_to_context(inst)).sum(-1)


@dtilde_R1.ball_form
def _dtilde_r1_ball(ex: BallInstance) -> BallValue:
    out = ex.out
    if len(out) == 0:
        return ex.num(0)
    rows = ex.alpha[out, None] * ex.need_x()[out] - _context_ball(ex)[None, :]
    return ex.ops.total(ex.m[out] * ex.ops.norm(rows, axis=-1))


@dtilde_R1.torch_form
def _dtilde_r1_torch(state: State) -> Tensor:
    return (state.norm(state.alpha[..., None] * state.x - state.context()[:, None, :]) * state.mult * (~state.mask)).sum(-1)


dtilde_R2 = define("dtilde_R2", "B", "R2 of eq. (7): ||sum_{i not in I_N} alpha_i x_i - s||_2",
                   definition="||sum_{i not in I_N} alpha_i x_i - s||_2", reference="eq. (7), reading R2",
                   needs=("x", "selection"), cost="tokens", magnitude=_A, closed_form=True,
                   lacks={"relaxed": NO_RELAXED_VECTORS})


@dtilde_R2.float_form
def _dtilde_r2(inst: Instance) -> np.ndarray:
    w = np.where(inst.mask, -1.0, 1.0) * inst.multiplicity * inst.alpha
    return F.norm(np.einsum("bk,bkd->bd", w, F.need_x(inst)), axis=-1)


@dtilde_R2.ball_form
def _dtilde_r2_ball(ex: BallInstance) -> BallValue:
    x = ex.need_x()
    outside = ex.weighted_total(ex.alpha[:, None] * x, ex.out) if len(ex.out) else \
        np.array([ex.num(0)] * x.shape[1], dtype=object)
    return ex.ops.norm(outside - _context_ball(ex))


@dtilde_R2.torch_form
def _dtilde_r2_torch(state: State) -> Tensor:
    sign = 1 - 2 * state.mask.double()
    return state.norm(((state.alpha * state.mult * sign)[..., None] * state.x).sum(1))


# -- Corollary 2 -------------------------------------------------------------------------------------------
A_norm = define("A_norm", "B", "sum_i ||alpha_i x_i||_2 (Corollary 2 (i))", definition="sum_i ||alpha_i x_i||_2",
                reference="Corollary 2 (i)", needs=("x",), cost="tokens", closed_form=True,
                lacks={"relaxed": NO_RELAXED_VECTORS})


@A_norm.float_form
def _a_norm(inst: Instance) -> np.ndarray:
    return _A(inst)


@A_norm.ball_form
def _a_norm_ball(ex: BallInstance) -> BallValue:
    return ex.ops.total(ex.m * ex.alpha * ex.ops.norm(ex.need_x(), axis=-1))


@A_norm.torch_form
def _a_norm_torch(state: State) -> Tensor:
    return (state.mult * state.alpha * state.norm(state.x)).sum(-1)


m_norm = define("m_norm", "B", "||sum_i alpha_i x_i||_2, the norm of the attention output",
                definition="||sum_i alpha_i x_i||_2", reference="Corollary 2", needs=("x",), cost="tokens",
                magnitude=_A, closed_form=True, lacks={"relaxed": NO_RELAXED_VECTORS})


@m_norm.float_form
def _m_norm(inst: Instance) -> np.ndarray:
    return F.norm(F.output(inst), axis=-1)


def _output_ball(ex: BallInstance) -> np.ndarray:
    if "m_vec" not in ex.cache:
        ex.cache["m_vec"] = ex.weighted_total(ex.alpha[:, None] * ex.need_x())
    return ex.cache["m_vec"]


@m_norm.ball_form
def _m_norm_ball(ex: BallInstance) -> BallValue:
    return ex.ops.norm(_output_ball(ex))


@m_norm.torch_form
def _m_norm_torch(state: State) -> Tensor:
    return state.norm(((state.alpha * state.mult)[..., None] * state.x).sum(1))


# -- Theorem 1, random subset: the Jensen terms ----------------------------------------------------------------
def _need_two(L: int) -> None:
    if L < 2:
        raise InvalidArgument(f"Theorem 1 (random subset) needs L >= 2, got L={L}")


def _jensen(inst: Instance, coefficient: str, xbar: str) -> np.ndarray:
    """``(L-N)/L sum_i ||c_i x_i - xbar||_2``: coefficient ``scaled`` = alpha_i (1 + N/(L-1)), ``printed`` =
    alpha_i + N/(L-1); xbar ``weighted`` = N/(L-1) sum_j alpha_j x_j, ``mean`` = (1/L) sum_j x_j."""
    x, a, L, N, mult = F.need_x(inst), inst.alpha, inst.L, cast(int, inst.N), inst.multiplicity
    _need_two(L)
    rho = N / (L - 1)
    c = a * (1 + rho) if coefficient == "scaled" else a + rho
    xb = rho * F.output(inst) if xbar == "weighted" else np.einsum("bk,bkd->bd", mult, x) / L
    return (L - N) / L * (mult * F.norm(c[..., None] * x - xb[:, None, :], axis=-1)).sum(-1)


def _jensen_ball(ex: BallInstance, coefficient: str, xbar: str) -> BallValue:
    ops = ex.ops
    _need_two(ex.L)
    L, N, one = ex.length, ex.size_N, ops.num(1)
    rho = N / (L - one)
    x = ex.need_x()
    c = ex.alpha * (one + rho) if coefficient == "scaled" else ex.alpha + rho
    xb = _output_ball(ex) * rho if xbar == "weighted" else ex.weighted_total(x) / L
    terms = ops.norm(c[:, None] * x - xb[None, :], axis=-1)
    return (L - N) / L * ops.total(ex.m * terms)


def _jensen_torch(state: State, coefficient: str, xbar: str) -> Tensor:
    L, N, a = state.L, state.top_N, state.alpha
    rho = N / (L - 1)
    c = a * (1 + rho) if coefficient == "scaled" else a + rho
    xb = rho * ((a * state.mult)[..., None] * state.x).sum(1) if xbar == "weighted" else (state.mult[..., None] * state.x).sum(1) / L
    return (L - N) / L * (state.mult * state.norm(c[..., None] * state.x - xb[:, None, :])).sum(-1)


for _c in ("scaled", "printed"):
    for _xb in ("weighted", "mean"):
        _q = define(f"J_{_c}_{_xb}", "B",
                    f"(L-N)/L sum_i ||c_i x_i - xbar||_2 with coefficient '{_c}' and xbar '{_xb}' (Theorem 1, random)",
                    definition="(L-N)/L sum_i ||c_i x_i - xbar||_2", reference=_RANDOM, needs=("x",), cost="tokens",
                    magnitude=_jensen_scale, closed_form=True, lacks={"relaxed": NO_RELAXED_VECTORS})
        _q.float_form(lambda inst, c=_c, xb=_xb: _jensen(inst, c, xb))
        _q.ball_form(lambda ex, c=_c, xb=_xb: _jensen_ball(ex, c, xb))
        _q.torch_form(lambda state, c=_c, xb=_xb: _jensen_torch(state, c, xb))


# -- the Jensen gap bound --------------------------------------------------------------------------------------
jensen_gap_bound = define(
    "jensen_gap_bound", "B",
    "(L-N)/L sum_i sqrt(Var(s | i not in S)): a proven bound on the Jensen gap eps (Theorem 1, random)",
    definition="(L-N)/L sum_i sqrt(N (L-1-N)/(L-2) sigma_i^2), sigma_i^2 the population variance of {y_j : j != i}",
    reference=_RANDOM + ", bound on eps by attnbounds", needs=("x",), cost="tokens", magnitude=_jensen_scale,
    closed_form=True, lacks={"relaxed": NO_RELAXED_VECTORS})


@jensen_gap_bound.float_form
def _gap_bound(inst: Instance) -> np.ndarray:
    """With ``dev_k = ||y_k - mean(y)||^2`` and ``D = sum_i dev_i``, the squared deviations of the other
    tokens about their own mean sum to ``D - dev_k L/(L-1)``; where that difference cancels it is summed
    directly. The subset of the other L-1 tokens is deterministic when ``N >= L - 1``."""
    x, a, L, N, mult = F.need_x(inst), inst.alpha, inst.L, cast(int, inst.N), inst.multiplicity
    if L <= 2 or N >= L - 1:
        return np.zeros(inst.B)
    y = a[..., None] * x
    mu = np.einsum("bk,bkd->bd", mult, y)[:, None, :] / L
    dev = np.einsum("bkd,bkd->bk", y - mu, y - mu)
    D = (mult * dev).sum(-1, keepdims=True)
    ss = D - dev * (L / (L - 1))
    bad = np.nonzero((ss <= F.CANCELLATION * D) & inst.present)
    if bad[0].size:
        b, k = bad
        yb, mb = y[b], mult[b].copy()
        mb[np.arange(b.size), k] -= 1  # the other tokens
        mu_i = np.einsum("nk,nkd->nd", mb, yb) / (L - 1)
        ss[bad] = np.einsum("nk,nkd,nkd->n", mb, yb - mu_i[:, None], yb - mu_i[:, None])
    fpc = N * (L - 1 - N) / (L - 2)  # sampling N of L-1 without replacement
    return (L - N) / L * (mult * np.sqrt(np.maximum(fpc * ss / (L - 1), 0.0))).sum(-1)


@jensen_gap_bound.ball_form
def _gap_bound_ball(ex: BallInstance) -> BallValue:
    ops = ex.ops
    if ex.L <= 2 or cast(int, ex.N) >= ex.L - 1:  # (a growth in L keeps these: L - N never decreases)
        return ops.num(0)
    L, N, one, two = ex.length, ex.size_N, ops.num(1), ops.num(2)
    y = ex.alpha[:, None] * ex.need_x()
    fpc = N * (L - one - N) / (L - two)
    terms = []
    for k in np.flatnonzero(ex.present):
        others = list(ex.m)
        others[k] = others[k] - one
        w = np.array(others, dtype=object)
        mean = (w[:, None] * y).sum(axis=0) / (L - one)
        dev = y - mean[None, :]
        var = ops.total(w * (dev * dev).sum(axis=1)) / (L - one)
        terms.append(ex.m[k] * ops.sqrt(fpc * var))
    return (L - N) / L * ops.total(np.array(terms, dtype=object))


@jensen_gap_bound.torch_form
def _gap_bound_torch(state: State) -> Tensor:
    import torch

    L, N = state.L, state.top_N
    if L <= 2 or N >= L - 1:
        return torch.zeros(state.B, dtype=torch.float64)
    y = state.alpha[..., None] * state.x
    mu = (state.mult[..., None] * y).sum(1, keepdim=True) / L
    dev = ((y - mu) ** 2).sum(-1)
    ss = torch.clamp((state.mult * dev).sum(-1, keepdim=True) - dev * (L / (L - 1)), min=0.0)
    fpc = N * (L - 1 - N) / (L - 2)
    return (L - N) / L * (state.mult * (fpc * ss / (L - 1) + state.TINY).sqrt()).sum(-1)


# -- E over random N-subsets -------------------------------------------------------------------------------
SUBSETS = MonteCarlo(
    over="I_N uniform among the N-subsets of the L tokens (weights and x fixed)",
    exact="the expectation is a finite sum over the class count vectors c (multivariate hypergeometric law, "
          "P(c) = prod_k C(m_k, c_k) / C(L, N)); the float form sums exactly when (count vectors) x (classes) "
          "<= 2^17, the ball form when (count vectors) x (classes) x (d + 5) <= 2^19",
    range="0 <= dtilde_R1 <= (the L - N largest ||alpha_i x_i||) + (L - N) (the N largest); "
          "0 <= dtilde_R2 <= sum_i ||alpha_i x_i|| (dtilde_range)",
    classes="exact through count vectors at any L; sampled count vectors (multivariate hypergeometric) beyond the limit",
)


def _values(y: np.ndarray, mult: np.ndarray, C: np.ndarray, reading: str) -> np.ndarray:
    """dtilde for each count vector ``(b, S)``: ``y`` ``(b, K, d)``, ``mult`` ``(K,)``, ``C`` ``(S, K)``."""
    s = np.einsum("sk,bkd->bsd", C.astype(np.float64), y)
    if reading == "R2":
        m = np.einsum("k,bkd->bd", mult, y)
        return F.norm(m[:, None, :] - 2.0 * s, axis=-1)
    yy = np.einsum("bkd,bkd->bk", y, y)
    ys = np.einsum("bsd,bkd->bsk", s, y)
    ss = np.einsum("bsd,bsd->bs", s, s)
    dist = F.distances(yy[:, None, :], ss[..., None], ys,
                       lambda b, t, k: F.norm(y[b, k] - s[b, t], axis=-1))
    return ((mult[None, :] - C)[None] * dist).sum(-1)


def dtilde_range(norms: list[float] | np.ndarray, m: tuple[int, ...], N: int, reading: str) -> float:
    """The range ``U`` of dtilde over every N-subset S (its values lie in ``[0, U]``: Hoeffding's interval length),
    from the norms ``||y_k||`` of the columns (counts ``m``), by the triangle inequality. R1:
    ``sum_{k not in S} ||y_k - s|| <= sum_{k not in S} ||y_k|| + (L - N) ||s||``, at most the L - N largest norms plus
    L - N times the N largest; R2: ``||m - 2 s|| = ||(m - s) - s|| <= sum_k ||y_k||``. Attained when the norms are
    equal and S's tokens point against the others'."""
    L = sum(m)
    if reading == "R1":
        return _subsets.top_sum(norms, m, L - N) + (L - N) * _subsets.top_sum(norms, m, N)
    return _subsets.top_sum(norms, m, L)


def _expected_dtilde(inst: Instance, reading: str) -> tuple[np.ndarray, np.ndarray]:
    """``E_S[dtilde]`` over uniform N-subsets S: exact over count vectors, or Monte Carlo with a Hoeffding interval."""
    x, N = F.need_x(inst), inst.N
    if N is None:
        raise InvalidArgument("this statement needs N; pass N=... when building the instance")
    counts = np.broadcast_to(np.ones(inst.K, dtype=np.int64), inst.alpha.shape) if inst.counts is None else inst.counts
    y = inst.alpha[..., None] * x
    mean, half = np.empty(inst.B), np.zeros(inst.B)
    draws, seed, level = mc_settings(inst.params)
    groups: dict[tuple[int, ...], list[int]] = {}
    for b in range(inst.B):
        groups.setdefault(tuple(int(c) for c in counts[b]), []).append(b)
    for m, rows in groups.items():
        mult = np.asarray(m, dtype=np.float64)
        exact = _subsets.enumerable(m, N)
        if exact:
            C = _subsets.count_vectors(m, N)
            P = _subsets.probabilities(m, C)
        else:
            memory.check(8.0 * draws * len(m), f"{draws} sampled count vectors over {len(m)} columns")
            C = _subsets.sample_count_vectors(np.random.default_rng(seed), m, N, draws)
            P = np.full(len(C), 1.0 / len(C))
        step = max(1, F.CHUNK_ELEMENTS // max(len(C) * len(m), 1))
        per = max(1, F.CHUNK_ELEMENTS // max(len(m), 1))  # count vectors at once when one row exceeds a chunk
        for start in range(0, len(rows), step):
            r = np.asarray(rows[start:start + step])
            mean[r] = sum(_values(y[r], mult, C[c:c + per], reading) @ P[c:c + per] for c in range(0, len(C), per))
        if not exact:
            U = np.array([dtilde_range(v, m, N, reading) for v in F.y_norms(inst)[rows]])
            half[rows] = hoeffding_halfwidth(U, len(C), level)
    return mean, half


def _expected_dtilde_ball(ex: BallInstance, reading: str) -> BallValue:
    """``E_S[dtilde]`` in balls: the exact sum over count vectors (probabilities from exact integers, or
    rigorous log-Gamma), else the float Monte Carlo mean widened by its rounding and a Hoeffding half-width."""
    N, ops = ex.N, ex.ops
    if N is None:
        raise InvalidArgument("this statement needs N; pass N=... when building the instance")
    m = tuple(ex.counts)
    y = ex.alpha[:, None] * ex.need_x()
    if _subsets.enumerable(m, N, y.shape[1] + 5, _subsets.BALL_ENUMERATION_WORK):
        ex.methods.add("enumeration")
        C = _subsets.count_vectors(m, N)
        vals = _dtilde_values_ball(ex, y, C, reading)
        return ops.total(vals * _probabilities_ball(ops, m, C))
    draws, seed, beta = mc_settings(ex.inst.params)
    C = _subsets.sample_count_vectors(np.random.default_rng(seed), m, N, draws)
    yf = ex.inst.alpha[0][:, None] * cast(np.ndarray, ex.inst.x)[0]
    vals = _values(yf[None], np.asarray(m, dtype=np.float64), C, reading)[0]
    norms = ops.norm(y, axis=-1)
    # the range from the norms' upper ends, widened by the rounding of its float sum (K + 2 terms)
    U = dtilde_range([ops.upper_float(v) for v in norms], m, N, reading) * (1 + (len(m) + 2) * 2.0**-52)
    half = ops.num(float(hoeffding_halfwidth(U, draws, beta))) * ops.num(1 + 1e-12)
    slack = ops.num(1e-9) * ops.num(U)  # float64 error of each draw is below (K + d + 4) u U
    mean = ops.num(float(np.mean(vals)))
    ex.methods.add("hoeffding")
    ex.level = 1.0 - beta
    ex.note(f"E over subsets estimated from {draws} uniform draws (seed {seed}), Hoeffding interval at level "
            f"1 - {beta:g}: a statistical statement")
    return ops.hull(mean - slack - half, mean + slack + half)


def _probabilities_ball(ops: Any, m: tuple[int, ...], C: np.ndarray) -> np.ndarray:
    """``P(c) = prod_k C(m_k, c_k) / C(L, N)`` as balls: exact integers while they are small, else log-Gamma."""
    L, N = sum(m), int(C[0].sum())
    if L <= 20_000 or N <= 64:
        total = ops.num(math.comb(L, N))
        return np.array([ops.num(math.prod(math.comb(mk, int(ck)) for mk, ck in zip(m, row))) / total for row in C],
                        dtype=object)
    logs: dict[tuple[int, int], Any] = {}

    def log_comb(n: int, k: int) -> Any:
        if (n, k) not in logs:
            logs[(n, k)] = ops.log_binomial(n, k)
        return logs[(n, k)]

    log_all = ops.log_binomial(L, N)
    return np.array([ops.exp(ops.total(np.array([log_comb(mk, int(ck)) for mk, ck in zip(m, row)], dtype=object))
                             - log_all) for row in C], dtype=object)


def _dtilde_values_ball(ex: BallInstance, y: np.ndarray, C: np.ndarray, reading: str) -> np.ndarray:
    """dtilde for every count vector (balls): ``s_c = sum_k c_k y_k`` as one ball matrix product; R1 from
    ``||y_k - s_c||^2 = ||y_k||^2 - 2 <y_k, s_c> + ||s_c||^2`` (rigorous in balls; precision is raised by the
    certifier when the enclosure is too wide), weighted by the non-selected counts ``m_k - c_k``."""
    ops = ex.ops
    Cb = np.frompyfunc(ops.num, 1, 1)(C.astype(object))
    S = matmul(ops, Cb, y)  # (S, d)
    if reading == "R2":
        m_vec = ex.weighted_total(y)
        return np.array([ops.norm(m_vec - S[t] * ops.num(2)) for t in range(len(C))], dtype=object)
    yy = (y * y).sum(axis=1)  # (K,)
    ss = (S * S).sum(axis=1)  # (S,)
    ys = matmul(ops, S, y.T.copy())  # (S, K)
    rest = np.array(ex.counts, dtype=object)[None, :] - C.astype(object)
    out = np.empty(len(C), dtype=object)
    for t in range(len(C)):
        terms = [ops.num(int(rest[t, k])) * ops.sqrt(yy[k] - ys[t, k] * ops.num(2) + ss[t])
                 for k in range(len(ex.counts)) if rest[t, k] > 0]
        out[t] = ops.total(np.array(terms, dtype=object)) if terms else ops.zero()
    return out


def _expected_dtilde_torch(state: State, reading: str) -> Tensor:
    """The exact expectation over count vectors, per group of rows with the same class counts."""
    import torch

    parts, order = [], []
    N = state.top_N
    for m, rows in state.count_groups():
        if not _subsets.enumerable(m, N):
            raise InvalidArgument("the torch form of E_dtilde enumerates count vectors only")
        C = _subsets.count_vectors(m, N)
        P = torch.as_tensor(_subsets.probabilities(m, C))
        Ct = torch.as_tensor(C.astype(np.float64))
        index = torch.as_tensor(rows)
        y = state.alpha[index][..., None] * state.x[index]
        mult = state.mult[index]
        s = torch.einsum("sk,bkd->bsd", Ct, y)
        if reading == "R1":
            dist = state.distances(s, y)  # (B, S, K)
            vals = (dist * (mult[:, None, :] - Ct[None])).sum(-1)
        else:
            vals = state.norm((mult[..., None] * y).sum(1)[:, None, :] - 2 * s)
        parts.append(vals @ P)
        order.append(rows)
    inverse = np.argsort(np.concatenate(order), kind="stable")
    return torch.cat(parts)[torch.as_tensor(inverse)]


for _reading, _scale in (("R1", _r1_scale_random), ("R2", lambda inst: 3 * _A(inst))):
    _q = define(f"E_dtilde_{_reading}", "B",
                f"E over uniform N-subsets of dtilde ({_reading}): exact over class count vectors, or MC with interval",
                definition=f"E_{{I_N uniform}}[dtilde_{_reading}]", reference=_RANDOM, needs=("x",), cost="subsets",
                magnitude=_scale, montecarlo=SUBSETS, lacks={"relaxed": NO_RELAXED_VECTORS})
    _q.float_form(lambda inst, r=_reading: _expected_dtilde(inst, r))
    _q.ball_form(lambda ex, r=_reading: _expected_dtilde_ball(ex, r))
    _q.torch_form(lambda state, r=_reading: _expected_dtilde_torch(state, r))

