"""Theorem 2 (geometric separability) under Assumptions 1-2, and the empirical radius and separation of
section 3, in float, ball and torch forms side by side.

``xi_i`` is encoded from the proof: ``||s - alpha_i x_i||^2 = sum_{j,k in I_N \\ {i}} alpha_j alpha_k <x_j, x_k>``
with ``<x_j, x_k> = M^2 - ||x_j - x_k||^2 / 2 <= M^2 - delta^2 / 2``, so
``xi_i^2 = M^2 P_i^2 - (delta^2 / 2)(P_i^2 - Q_i)``, ``P_i``, ``Q_i`` the sum and the sum of squares of
the other selected weights. The expectations over random sphere embeddings have no exact
token-class form: they are sampled token by token, up to :data:`SPHERE_TOKENS` tokens.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import numpy as np

from attnbounds.theory.mathematics import memory
from attnbounds.theory.mathematics.balls import BallInstance
from attnbounds.theory.mathematics.errors import NotApplicable
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.intervals import BallValue, Ops, Unsupported
from attnbounds.theory.mathematics.quantities import _float as F
from attnbounds.theory.mathematics.quantities.spec import (NO_RELAXED_PER_SELECTED, NO_RELAXED_RANDOM,
                                                             NO_RELAXED_VECTORS, NO_TORCH_COUNT, NO_TORCH_MC,
                                                             MonteCarlo, define, hoeffding_halfwidth, mc_settings)
from attnbounds.theory.mathematics.quantities.torch_state import State

if TYPE_CHECKING:
    from torch import Tensor


_REF = "Theorem 2 (geometric separability)"
#: the longest context whose sphere expectations are sampled (token by token)
SPHERE_TOKENS = 1024


def _P_R(inst: Instance) -> tuple[np.ndarray, np.ndarray]:
    """``P_i`` and ``R_i = sqrt(Q_i)``: the sum and the Euclidean norm of the other selected weights, per column
    ``(B, K)``, each without the cancellation of ``total - alpha_i`` when one weight dominates, and ``R_i`` without
    squaring weights below 1e-154 to 0."""
    sel = np.where(inst.mask, inst.multiplicity, 0)
    return F.sum_others(inst.alpha, sel), F.norm_others(inst.alpha, sel)


def _P_Q_ball(ex: BallInstance) -> tuple[np.ndarray, np.ndarray]:
    a = ex.alpha[ex.sel]
    return -a + ex.weighted_total(ex.alpha, ex.sel), -(a * a) + ex.weighted_total(ex.alpha * ex.alpha, ex.sel)


def _abar(inst: Instance) -> np.ndarray:
    return F.selected_weight(inst).sum(-1)


xi = define("xi", "BN", "xi_i = sqrt(M^2 P_i^2 - delta^2/2 (P_i^2 - Q_i)), P_i, Q_i the sum and sum of squares "
            "of the other selected weights: the bound on ||s - alpha_i x_i|| from <x_j,x_k> <= M^2 - delta^2/2",
            definition="sqrt(M^2 P_i^2 - delta^2/2 (P_i^2 - Q_i))", reference=_REF + ", proof",
            needs=("selection", "sphere"), cost="weights",
            magnitude=lambda inst: _xi_magnitude(inst), closed_form=True, lacks={"relaxed": NO_RELAXED_PER_SELECTED})


def _xi_magnitude(inst: Instance) -> np.ndarray:
    """``xi = sqrt(z)`` with ``z`` known to ``eps ((M + delta) abar)^2``: its error is at most that over ``2 xi``,
    and never more than ``sqrt(eps) (M + delta) abar``."""
    scale = ((inst.param("M") + inst.param("delta")) * _abar(inst))[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(scale > 0, scale * (scale / np.maximum(2 * _xi(inst), 2.0**-26 * scale)), 0.0)


@xi.float_form
def _xi(inst: Instance) -> np.ndarray:
    """``P_i sqrt(M^2 - delta^2/2 (1 - (R_i / P_i)^2))`` (``R_i <= P_i``): ``xi`` scaled by ``P_i``, so that weights
    below 1e-154 do not square to 0."""
    M, delta = inst.param("M")[:, None], inst.param("delta")[:, None]
    P, R = _P_R(inst)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(P > 0, R / P, 0.0)
    return P * np.sqrt(np.maximum(M**2 - delta**2 / 2 * (1 - ratio**2), 0.0))


@xi.ball_form
def _xi_ball(ex: BallInstance) -> np.ndarray:
    M, delta, ops = ex.param("M"), ex.param("delta"), ex.ops
    P, Q = _P_Q_ball(ex)
    return _xi_of(ops, P, Q, M, delta)


def _xi_of(ops: Ops, P: np.ndarray, Q: np.ndarray, M: Any, delta: Any) -> np.ndarray:
    """``xi = sqrt(max(M^2 P^2 - delta^2/2 (P^2 - Q), 0))`` on balls, per selected token (``Ops.sqrt`` of a ball
    entirely below 0 has no value: xi's definition clamps first)."""
    z = P * P * (M * M) - (P * P - Q) * (delta * delta / ops.num(2))
    return ops.map(lambda v: ops.sqrt(ops.max2(v, ops.zero())), z)


@xi.torch_form
def _xi_torch(state: State) -> Tensor:
    M, delta = state.param("M")[:, None], state.param("delta")[:, None]
    w = state.alpha * state.mult * state.mask
    P = w.sum(-1, keepdim=True) - state.alpha
    Q = (w * state.alpha).sum(-1, keepdim=True) - state.alpha**2
    return (M**2 * P**2 - delta**2 / 2 * (P**2 - Q)).clamp(min=0.0).add(state.TINY).sqrt()


C_other = define("C_other", "BN", "C_i = sum_{j != k in I_N \\ {i}} alpha_j alpha_k = P_i^2 - Q_i for every selected i, "
                 "P_i and Q_i the sum and sum of squares of the other selected weights (Theorem 2)",
                 definition="sum_{j != k in I_N \\ {i}} alpha_j alpha_k", reference=_REF + ", proof (corrected form)",
                 needs=("selection",), cost="weights", magnitude=lambda inst: _abar(inst) ** 2, closed_form=True,
                 lacks={"relaxed": NO_RELAXED_PER_SELECTED})


@C_other.float_form
def _c_other(inst: Instance) -> np.ndarray:
    """``P_i^2 - Q_i = (P_i - R_i)(P_i + R_i)``, exactly 0 when fewer than two other tokens are selected, never < 0."""
    P, R = _P_R(inst)
    return np.maximum((P - R) * (P + R), 0.0) if cast(int, inst.N) > 2 else np.zeros_like(P)


@C_other.ball_form
def _c_other_ball(ex: BallInstance) -> np.ndarray:
    P, Q = _P_Q_ball(ex)
    return P * P - Q


@C_other.torch_form
def _c_other_torch(state: State) -> Tensor:
    w = state.alpha * state.mult * state.mask
    P = w.sum(-1, keepdim=True) - state.alpha
    Q = (w * state.alpha).sum(-1, keepdim=True) - state.alpha**2
    return (P**2 - Q).clamp(min=0.0) if state.top_N > 2 else P * 0.0


# -- N_s for the instance's own token vectors -----------------------------------------------------------------
def _counts(inst: Instance) -> tuple[np.ndarray, np.ndarray]:
    inside = F.dist_to_context(inst) <= inst.param("r")[:, None]
    sel, out = inst.mask & inst.present, ~inst.mask & inst.present
    relaxed = np.where(sel & inside, inst.multiplicity, 0.0).sum(-1)
    return relaxed, relaxed * ~(inside & out).any(-1)


def _classify(ops: Ops, dist: np.ndarray, r: Any) -> tuple[np.ndarray, np.ndarray]:
    """(certainly inside the closed ball, certainly outside) for an object array of distances."""
    inside = np.array([ops.nonnegative(r - d) for d in dist], dtype=bool)
    outside = np.array([ops.positive(d - r) for d in dist], dtype=bool)
    return inside, outside


def _counts_ball(ex: BallInstance) -> tuple[tuple[int, int], tuple[int, int]]:
    """Bounds (lo, hi) on the relaxed and the full count N_s for the instance's own x."""
    ops = ex.ops
    s = ex.weighted_total(ex.alpha[:, None] * ex.need_x(), ex.sel)
    dist = ops.norm(ex.alpha[:, None] * ex.need_x() - s[None, :], axis=-1)
    inside, outside = _classify(ops, dist, ex.param("r"))
    counts = np.asarray(ex.counts)
    sel = ex._need_mask() & ex.present
    out = ~ex._need_mask() & ex.present
    rel = (int(counts[inside & sel].sum()), int(counts[sel].sum() - counts[outside & sel].sum()))
    if (inside & out).any():
        return rel, (0, 0)
    if (outside | ~out).all():
        return rel, rel
    return rel, (0, rel[1])


def _cached_counts_ball(ex: BallInstance) -> tuple[tuple[int, int], tuple[int, int]]:
    if "Ns" not in ex.cache:
        ex.cache["Ns"] = _counts_ball(ex)
    return ex.cache["Ns"]


for _which, _name, _what in ((0, "Ns_relaxed", "selected tokens with alpha_i x_i in the closed ball B_r(s), for the "
                              "instance's x"),
                             (1, "Ns_full", "N_s of the Definition (relaxed count, zero if any non-selected "
                              "alpha_j x_j is in the ball)")):
    _q = define(_name, "B", _what, definition="#{i in I_N : ||alpha_i x_i - s|| <= r}", reference="Definition "
                "(geometric distinguishability)", needs=("x", "selection", "sphere"), cost="tokens",
                lacks={"relaxed": NO_RELAXED_VECTORS, "torch": NO_TORCH_COUNT})
    _q.float_form(lambda inst, w=_which: _counts(inst)[w])
    _q.ball_form(lambda ex, w=_which: ex.ops.hull(*(ex.num(v) for v in _cached_counts_ball(ex)[w])))


# -- the paper's radius and separation (section 3) ------------------------------------------------------------
r_paper = define("r_paper", "B", "r = min_{i not in I_N} ||s - alpha_i x_i||_2, the paper's radius (section 3)",
                 definition="min_{i not in I_N} ||s - alpha_i x_i||_2", reference="section 3 (Fig. 3)",
                 needs=("x", "selection"), cost="tokens",
                 magnitude=lambda inst: F.masked_max(F.y_norms(inst), inst.present, 0.0)
                 + F.norm(F.context(inst), axis=-1), closed_form=True,
                 lacks={"relaxed": NO_RELAXED_VECTORS,
                        'torch': 'the empirical radius of section 3, a minimum only read from real tensors'})


@r_paper.float_form
def _r_paper(inst: Instance) -> np.ndarray:
    return F.masked_min(F.dist_to_context(inst), ~inst.mask & inst.present)


@r_paper.ball_form
def _r_paper_ball(ex: BallInstance) -> BallValue:
    if len(ex.out) == 0:
        raise Unsupported("r_paper needs a non-selected token (N < L)")
    s = ex.weighted_total(ex.alpha[:, None] * ex.need_x(), ex.sel)
    return ex.ops.minimum(ex.ops.norm(ex.alpha[ex.out, None] * ex.need_x()[ex.out] - s[None, :], axis=-1))


delta_min = define("delta_min", "B", "delta = min_{i != j} ||x_i - x_j||_2 (Assumption 2, empirical)",
                   definition="min_{i != j} ||x_i - x_j||_2", reference="Assumption 2; section 3 (Fig. 3)",
                   needs=("x",), cost="tokens",
                   magnitude=lambda inst: 2 * np.sqrt(F.masked_max(F.norms_sq(inst), inst.present, 0.0)),
                   lacks={"relaxed": NO_RELAXED_VECTORS,
                          'torch': 'the empirical separation of section 3, a minimum only read from real tensors'})


@delta_min.float_form
def _delta_min(inst: Instance) -> np.ndarray:
    """The Gram form locates the closest pair of columns, whose distance is then recomputed from the
    difference (chunked over the batch); a column of two or more equal tokens makes it 0."""
    x, n2, K = F.need_x(inst), F.norms_sq(inst), inst.K
    out = np.full(inst.B, np.inf)
    step = max(1, F.CHUNK_ELEMENTS // max(K * K, 1))
    # Gram distances, the product they come from, the pair mask, the masked copy: each (rows, K, K)
    memory.check(4 * 8.0 * min(step, inst.B) * K * K, f"delta_min over {K} x {K} column pairs")
    for start in range(0, inst.B, step):
        rows = np.arange(start, min(start + step, inst.B))
        xb, p = x[rows], inst.present[rows]
        d2 = n2[rows][:, :, None] + n2[rows][:, None, :] - 2.0 * np.matmul(xb, xb.transpose(0, 2, 1))
        valid = p[:, :, None] & p[:, None, :] & ~np.eye(K, dtype=bool)[None]
        d2 = np.where(valid, d2, np.inf)
        i, j = np.divmod(d2.reshape(rows.size, -1).argmin(-1), K)
        bb = np.arange(rows.size)
        has_pair = valid.reshape(rows.size, -1).any(-1)
        out[rows] = np.where(has_pair, F.norm(xb[bb, i] - xb[bb, j], axis=-1), np.inf)
        scale = F.masked_max(n2[rows], p, 0.0)
        for r in np.nonzero(has_pair & (d2[bb, i, j] <= F.CANCELLATION * 2 * scale))[0]:
            # nearly equal vectors: the Gram form cannot rank the pairs, compare them all directly
            memory.check(2 * 8.0 * K * K * x.shape[-1], f"delta_min over {K} x {K} nearly equal column pairs")
            diff = F.norm(xb[r][:, None, :] - xb[r][None, :, :], axis=-1)
            out[rows[r]] = np.where(valid[r], diff, np.inf).min()
    if inst.counts is not None:
        out[(inst.counts >= 2).any(-1)] = 0.0
    return out


@delta_min.ball_form
def _delta_min_ball(ex: BallInstance) -> BallValue:
    if any(c >= 2 for c in ex.counts):
        return ex.num(0)
    p = np.flatnonzero(ex.present)
    if p.size < 2:
        raise Unsupported("delta_min needs two tokens")
    x = ex.need_x()[p]
    return ex.ops.minimum(np.array([ex.ops.norm(x[i] - x[j]) for i in range(len(p)) for j in range(i + 1, len(p))],
                                   dtype=object))


# -- E[N_s] / N over random sphere embeddings ---------------------------------------------------------------
def sphere_embeddings(rng: np.random.Generator, shape: tuple[int, ...], L: int, d: int, M: np.ndarray,
                      delta: np.ndarray, max_tries: int = 200) -> np.ndarray:
    """Uniform points on the sphere of radius M in R^d conditioned on pairwise distance >= delta.

    Rejection sampling (Assumptions 1-2): a draw is kept only if every pair is delta-separated,
    so the result is exactly the conditioned law (the pairwise distances are checked in chunks that fit
    :data:`attnbounds.theory.mathematics.memory.CHUNK_BYTES`; nothing is checked where delta is 0). Raises
    :class:`NotApplicable` when acceptance is too rare.
    """
    memory.check(8.0 * float(np.prod(shape)) * L * d * 2, f"sampling {int(np.prod(shape))} x {L} sphere points in R^{d}")
    out = np.empty((*shape, L, d))
    todo = np.ones(shape, dtype=bool)
    Mb = np.broadcast_to(M, shape)
    db = np.broadcast_to(delta, shape)
    step = memory.rows_per_chunk(8.0 * L * L)
    if L > 1 and np.any(np.broadcast_to(delta, shape) > 0):  # squared norms, Gram product, distances: (rows, L, L)
        memory.check(3 * 8.0 * min(step, int(np.prod(shape))) * L * L, f"checking the separation of {L} sphere points")
    for _ in range(max_tries):
        idx = np.nonzero(todo)
        n = len(idx[0])
        if n == 0:
            return out
        g = rng.standard_normal((n, L, d))
        pts = g / np.linalg.norm(g, axis=-1, keepdims=True) * Mb[idx][:, None, None]
        need = db[idx]
        ok = np.ones(n, dtype=bool)
        separated = np.flatnonzero(need > 0) if L > 1 else np.empty(0, dtype=int)
        for i in range(0, separated.size, step):
            rows = separated[i:i + step]
            p = pts[rows]
            sq = np.einsum("nld,nld->nl", p, p)
            d2 = sq[:, :, None] + sq[:, None, :] - 2 * np.matmul(p, p.transpose(0, 2, 1))
            d2[:, np.arange(L), np.arange(L)] = np.inf
            ok[rows] = d2.min(axis=(1, 2)) >= need[rows] ** 2
        sel = tuple(i[ok] for i in idx)
        out[sel] = pts[ok]
        todo[sel] = False
    raise NotApplicable(
        f"could not sample {L} points on the sphere of radius M in R^{d} with separation delta; "
        "delta is (nearly) infeasible: lower delta or raise d"
    )


def _tokens(inst: Instance) -> tuple[np.ndarray, np.ndarray]:
    """Weights and selection per token ``(B, L)`` (columns written out by their counts)."""
    if inst.counts is None:
        return inst.alpha, inst.mask
    reps = np.stack([np.repeat(np.arange(inst.K), inst.counts[b]) for b in range(inst.B)])
    b = np.arange(inst.B)[:, None]
    return inst.alpha[b, reps], inst.mask[b, reps]


def _sphere_dim(params: dict[str, np.ndarray], x: np.ndarray | None, row: int = 0) -> int:
    """The dimension of row ``row``'s sphere: its parameter ``dim``, else that of ``x`` (16 without either)."""
    if "dim" in params:
        return int(params["dim"][row])
    return int(x.shape[-1]) if x is not None else 16


def _separable_counts(alpha: np.ndarray, x: np.ndarray, mask: np.ndarray, r: np.ndarray, M: np.ndarray,
                      which: int) -> tuple[np.ndarray, np.ndarray]:
    """Bounds ``(lo, hi)`` on the count N_s of the Definition (``which`` 0: relaxed, 1: full) for token vectors ``x``
    (any leading axes; ``r``, ``M`` per leading index): a distance within rounding of ``r`` (``1e-9`` of
    ``r + (alpha_i + sum_sel alpha) M``, far above the float draw's error) counts on both sides, so the two differ
    only at ties (weights [1, 0] put the other token at distance exactly M from the context for every draw)."""
    w = np.where(mask, alpha, 0.0)
    s = np.einsum("...l,...ld->...d", w, x)
    dist = F.norm(alpha[..., None] * x - s[..., None, :], axis=-1)
    tol = 1e-9 * (r[..., None] + (alpha + w.sum(-1, keepdims=True)) * M[..., None])
    sure, maybe = dist <= r[..., None] - tol, dist <= r[..., None] + tol
    lo, hi = (sure & mask).sum(-1), (maybe & mask).sum(-1)
    if which == 0:
        return lo, hi
    return lo * ~(maybe & ~mask).any(-1), hi * ~(sure & ~mask).any(-1)


def _expected_ns(inst: Instance, which: int) -> tuple[np.ndarray, np.ndarray]:
    """``E[N_s]/N`` over x ~ uniform on the M-sphere given delta-separation, weights fixed (Theorem 2): the midpoint
    of the draws' count bounds, and Hoeffding's half-width plus half their spread (non-zero only at ties)."""
    draws, seed, level = mc_settings(inst.params)
    alpha, mask = _tokens(inst)
    rng = np.random.default_rng(seed)
    M, delta, r = inst.param("M"), inst.param("delta"), inst.param("r")
    lo, hi = np.empty(inst.B), np.empty(inst.B)
    for b in range(inst.B):  # one row at a time in its own dim, its draws in chunks: memory stays within CHUNK_BYTES
        d = _sphere_dim(inst.params, inst.x, b)
        step = memory.rows_per_chunk(8.0 * inst.L * max(d, inst.L))  # draws per chunk
        total = np.zeros(2)
        for start in range(0, draws, step):
            n = min(step, draws - start)
            x = sphere_embeddings(rng, (n,), inst.L, d, np.full(n, M[b]), np.full(n, delta[b]))
            c_lo, c_hi = _separable_counts(alpha[b][None], x, mask[b][None], np.full(n, r[b]), np.full(n, M[b]), which)
            total += (c_lo.sum(), c_hi.sum())
        lo[b], hi[b] = total / draws / cast(int, inst.N)
    return (lo + hi) / 2, (hi - lo) / 2 + float(hoeffding_halfwidth(1.0, draws, level))


def _feasible(ex: BallInstance) -> None:
    """Exhibit a configuration with all pairwise distances > delta (so the conditioned law exists)."""
    if "feasible" in ex.cache:
        return
    ops, L = ex.ops, ex.L
    if not ops.positive(ex.param("delta")) or L < 2:
        ex.cache["feasible"] = True
        return
    M = ex.float_param("M", 1.0)
    rng = np.random.default_rng(int(ex.float_param("seed", 0)))
    try:
        pts = sphere_embeddings(rng, (1,), L, _sphere_dim(ex.inst.params, ex.inst.x), np.array([M]),
                                np.array([ex.float_param("delta", 0.0)]))[0]
    except NotApplicable as exc:
        raise Unsupported(f"Assumption 2 may be infeasible: {exc}") from None
    p = ops.array(pts)
    p = p / ops.norm(p, axis=-1)[:, None] * ex.param("M")  # exactly on the sphere
    for i in range(L):
        gaps = ops.norm(p[i + 1:] - p[i][None, :], axis=-1) - ex.param("delta")
        if not all(ops.positive(g) for g in gaps):
            raise Unsupported("could not certify a delta-separated configuration (Assumption 2 may be infeasible)")
    ex.cache["feasible"] = True


def _token_balls(ex: BallInstance) -> tuple[np.ndarray, np.ndarray]:
    """Per-token weights (balls) and selection, the columns written out by their counts."""
    reps = np.repeat(np.arange(ex.K), ex.counts)
    return ex.alpha[reps], ex._need_mask()[reps]


def _norm_bounds(ops: Ops, weights: np.ndarray, M: Any) -> tuple[Any, Any]:
    """Bounds valid for every configuration on the M-sphere of ``||sum_j w_j x_j||`` (``w_j >= 0``):
    below by ``M (w_max - (sum w - w_max))`` (reverse triangle), above by ``M sum w`` (triangle)."""
    if len(weights) == 0:
        return ops.zero(), ops.zero()
    big = ops.maximum(weights)
    total = ops.total(weights)
    return ops.max2(ops.zero(), (big - (total - big)) * M), total * M


def _sphere_bounds(ex: BallInstance, which: int) -> tuple[int, int]:
    """Bounds on N_s valid for EVERY configuration on the sphere with separation delta.

    Selected ``i``: ``||s - alpha_i x_i|| <= xi_i`` (Theorem 2's expansion) and ``>=`` the reverse-triangle
    bound of the other selected weights. Non-selected ``j``: ``||alpha_j x_j - s||`` lies in
    ``[max(alpha_j M - ||s||_hi, ||s||_lo - alpha_j M), alpha_j M + ||s||_hi]``, both directions used.
    """
    ops = ex.ops
    M, r, delta = ex.param("M"), ex.param("r"), ex.param("delta")
    a, mask = _token_balls(ex)
    sel = np.flatnonzero(mask)
    a_sel = a[sel]
    P = np.array([ops.total(np.delete(a_sel, pos)) for pos in range(len(sel))], dtype=object)
    Q = np.array([ops.total(np.delete(a_sel * a_sel, pos)) for pos in range(len(sel))], dtype=object)
    xi_tok = _xi_of(ops, P, Q, M, delta)
    lower = np.array([_norm_bounds(ops, np.delete(a_sel, pos), M)[0] for pos in range(len(sel))], dtype=object)
    inside_sel, _ = _classify(ops, xi_tok, r)
    _, outside_sel = _classify(ops, lower, r)
    relaxed = (int(inside_sel.sum()), len(sel) - int(outside_sel.sum()))
    if which == 0:
        return relaxed
    abar = ops.total(a_sel)
    s_hi = ops.sqrt(M * M * abar * abar - delta * delta / ops.num(2) * (abar * abar - ops.total(a_sel * a_sel)))
    s_lo = _norm_bounds(ops, a_sel, M)[0]
    out = np.flatnonzero(~mask)
    if len(out) == 0:
        return relaxed
    ups = np.array([a[j] * M + s_hi for j in out], dtype=object)
    lows = np.array([ops.max2(ops.zero(), ops.max2(a[j] * M - s_hi, s_lo - a[j] * M)) for j in out], dtype=object)
    sure_in, _ = _classify(ops, ups, r)
    _, sure_out = _classify(ops, lows, r)
    if sure_in.any():
        return (0, 0)
    if sure_out.all():
        return relaxed
    return (0, relaxed[1])


def _expected_ns_ball(ex: BallInstance, which: int) -> BallValue:
    """``E[N_s]/N``: bounds valid for every configuration first (exact when they meet); the
    certifier asks for the Monte Carlo refinement (:func:`refine_sphere`) only when they do not decide."""
    ops, N = ex.ops, cast(int, ex.N)
    _feasible(ex)
    lo, hi = _sphere_bounds(ex, which)
    det = ops.hull(ops.rational(lo, N), ops.rational(hi, N))
    if lo == hi:
        ex.note("N_s takes the same value for every configuration on the sphere (Assumptions 1-2): "
                "the expectation is exact")
        return det
    ex.cache.setdefault("sphere_det", {})[which] = det
    return det


def _expected_ns_mc(ex: BallInstance, which: int) -> BallValue:
    """Monte Carlo refinement of :func:`_expected_ns_ball` (statistical, Hoeffding at level 1 - mc_level)."""
    ops, N, L = ex.ops, cast(int, ex.N), ex.L
    draws, seed, beta = mc_settings(ex.inst.params)
    M, delta, r = ex.float_param("M", 1.0), ex.float_param("delta", 0.0), ex.float_param("r", 1.0)
    rng = np.random.default_rng(seed)
    d = _sphere_dim(ex.inst.params, ex.inst.x)
    x = sphere_embeddings(rng, (draws,), L, d, np.array(M), np.array(delta))
    reps = np.repeat(np.arange(ex.K), ex.counts)
    lo, hi = _separable_counts(ex.inst.alpha[0][reps], x, ex._need_mask()[reps], np.array(r), np.array(M), which)
    half = float(hoeffding_halfwidth(1.0, draws, beta))
    ex.methods.add("hoeffding")
    ex.level = 1.0 - beta
    ex.note(f"E[N_s]/N estimated from {draws} sphere draws (seed {seed}, dim {d}), Hoeffding "
            f"interval at level 1 - {beta:g}: a statistical statement")
    mc = ops.hull(ops.num(float(lo.mean()) / N) - ops.num(half), ops.num(float(hi.mean()) / N) + ops.num(half))
    det = ex.cache["sphere_det"][which]
    return ops.hull(ops.max2(ops.lower(mc), ops.lower(det)), ops.min2(ops.upper(mc), ops.upper(det)))


def refine_sphere(ex: BallInstance) -> bool:
    """Replace undetermined sphere expectations by their Monte Carlo intervals; True if any changed."""
    changed = False
    for which, name in ((0, "E_Ns_relaxed"), (1, "E_Ns_full")):
        if which in ex.cache.get("sphere_det", {}) and "q:" + name in ex.cache:
            ex.cache["q:" + name] = _expected_ns_mc(ex, which)
            changed = True
    return changed


SPHERE = MonteCarlo(
    over="x_1..x_L i.i.d. uniform on the sphere of radius M in R^dim conditioned on pairwise distance >= delta",
    exact="when bounds valid for every configuration on the sphere (xi_i, reverse triangle, both directions "
          "for the non-selected tokens) decide every token",
    range="0 <= N_s / N <= 1",
    classes=f"no exact class form: sampled token by token up to L = {SPHERE_TOKENS}",
)

for _which, _name in ((0, "E_Ns_relaxed"), (1, "E_Ns_full")):
    _q = define(_name, "B", f"E[N_s]/N ({'relaxed' if _which == 0 else 'full Definition'}) over random sphere "
                "embeddings, weights fixed; MC with interval", definition="E_x[N_s] / N", reference=_REF,
                needs=("selection", "sphere"), cost="sphere", montecarlo=SPHERE, class_limit=SPHERE_TOKENS,
                lacks={"relaxed": NO_RELAXED_RANDOM, "torch": NO_TORCH_MC})
    _q.float_form(lambda inst, w=_which: _expected_ns(inst, w))
    _q.ball_form(lambda ex, w=_which: _expected_ns_ball(ex, w))
