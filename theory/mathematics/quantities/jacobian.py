"""Lemma 2 and Corollary 3: norms of the Jacobian of the normaliser, in float, ball and torch forms side by side.

For ``alpha = F / sum F`` the Jacobian is ``J = A diag(g)`` with ``A = diag(alpha) - alpha alpha^T`` and
``g = (log F)'`` (quotient rule on eq. 3), so its norms have O(L) closed forms. With token classes
(``m_k`` tokens of weight ``alpha_k``): on vectors supported in one class and summing to zero, ``J``
and ``J^T`` act as ``alpha_k g_k`` (singular value ``|alpha_k g_k|``, multiplicity ``m_k - 1``); on the
class indicators ``u_k = 1_k / sqrt(m_k)`` they act as the K x K matrix ``(diag(alpha) - w w^T) diag(g)``,
``w_k = sqrt(m_k) alpha_k``. Maps not of the form F / sum F (sparsemax, entmax-1.5, sigmoid) use their
dense closed-form Jacobian.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import sympy as sp

from attnbounds.theory.mathematics import memory
from attnbounds.theory.mathematics.balls import BallInstance, spectral_norm, weights_from_logits
from attnbounds.theory.mathematics.normalisers.ratio import log_F, log_F_map
from attnbounds.theory.mathematics.errors import InvalidArgument, NotApplicable
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

_L2 = "Lemma 2 (Jacobian of a general normaliser)"
_C3 = "Corollary 3 (softmax)"


# -- float helpers -----------------------------------------------------------------------------------------
def _ratio(inst: Instance) -> RatioNormaliser | None:
    if inst.normaliser is None or inst.logits is None:
        raise InvalidArgument("Jacobian quantities need logits and a normaliser (from_logits / from_qk)")
    return inst.normaliser if isinstance(inst.normaliser, RatioNormaliser) else None


def _g(inst: Instance) -> np.ndarray:
    """``g = (log F)'`` at each column's logit ``(B, K)``."""
    n = _ratio(inst)
    if n is None:
        raise InvalidArgument("Lemma 2 needs a normaliser of the form F / sum F")
    return F.cached(inst, "g", lambda: n.dlog_F_values(inst.logits, inst.L))


def _dense_jacobian(inst: Instance) -> np.ndarray:
    """``(B, L, L)`` closed-form Jacobian of a map not of the form F / sum F (dense instances only)."""
    if inst.counts is not None:
        raise NotApplicable(f"the Jacobian of {inst.normaliser!r} has no token-class form")
    # J, a temporary of its size and the norm's workspace (an SVD copies its matrix)
    memory.check(3 * 8.0 * inst.B * inst.K * inst.K, f"the dense {inst.B} x {inst.K} x {inst.K} Jacobian of "
                 f"{type(inst.normaliser).__name__}")
    return F.cached(inst, "J", lambda: inst.normaliser.jacobian(inst.logits))  # type: ignore[union-attr]


def top_eigenvalue(a: np.ndarray, r: np.ndarray, mult: np.ndarray) -> np.ndarray:
    """Largest eigenvalue of ``diag(alpha) - alpha alpha^T`` over tokens (columns ``a`` with ``mult`` tokens each,
    rows on the simplex, ``r = 1 - a``).

    It is the largest weight ``t`` when ``t`` is tied (two tokens of that weight). Else, with ``k`` the
    column of ``t``, ``c = t r_k`` and ``psi(lam) = sum_{i != k} m_i a_i^2 / (lam - a_i)``, it is the root in
    ``(a_(2), t]`` of ``g(lam) = lam - c + (lam - t) psi(lam)`` (the secular equation times ``lam - t``;
    increasing there), which lies in ``[max(a_(2), max_i a_i r_i), min(t, 2 max_i a_i r_i)]`` (interlacing,
    Rayleigh quotients of e_i, Gershgorin). Each step models ``psi`` by ``u + s / (lam - a_(2))`` matching
    its value and slope at the current point (exact when one other weight is positive) and solves the
    resulting quadratic, falling back to a Newton step (monotone from the left, ``g`` being concave) and
    then to bisection of the bracket.
    """
    B, K = a.shape
    present = mult > 0
    b = np.arange(B)
    aa = np.where(present, a, -np.inf)
    k = aa.argmax(-1)
    top = aa[b, k]
    rest = aa.copy()
    rest[b, k] = np.where(mult[b, k] >= 2, top, -np.inf)  # a second token of the top column ties it
    second = rest.max(-1)
    diag = np.where(present, a * r, 0.0)
    lo = np.maximum(second, diag.max(-1))
    hi = np.minimum(top, 2.0 * diag.max(-1))
    lam = np.where(second >= top, top, hi)
    lam = np.where(np.isfinite(second), lam, 0.0)  # one token: A = 0
    todo = np.nonzero((second < top) & (hi > lo) & np.isfinite(second))[0]
    others = np.where(present, a, 0.0)[todo]
    others[np.arange(todo.size), k[todo]] = 0.0
    m = mult[todo]
    c, t, p = diag[todo, k[todo]], top[todo], second[todo]
    lo, hi = lo[todo], hi[todo]
    x = hi.copy()
    for _ in range(100):
        if x.size == 0:
            break
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            q = others / (x[:, None] - others)  # a_i / (lam - a_i): no a_i^2 to underflow
            psi = (m * others * q).sum(-1)
            dpsi = -(m * q * q).sum(-1)
            g = x - c + (x - t) * psi
            # psi ~ u + s / (lam - p); in mu = lam - p: (1 + u) mu^2 + (p - c + s - u D) mu - D s = 0, D = t - p
            mu0 = x - p
            s = -dpsi * mu0 * mu0
            u = psi - s / mu0
            P, Q, R = 1.0 + u, p - c + s - u * (t - p), -(t - p) * s
            root = np.sqrt(np.maximum(Q * Q - 4.0 * P * R, 0.0))
            mu = np.where(Q >= 0, -2.0 * R / (Q + root), (root - Q) / (2.0 * P))
            step = p + mu
            newton = x - g / (1.0 + psi + (x - t) * dpsi)
        right = g > 0
        hi = np.where(right, x, hi)
        lo = np.where(right, lo, x)
        inside = lambda v: (v >= lo) & (v <= hi)  # noqa: E731
        new = np.where(inside(step), step, np.where(inside(newton), newton, 0.5 * (lo + hi)))
        done = (g == 0) | (np.abs(new - x) <= 4e-16 * x) | (hi - lo <= 4e-16 * hi)
        x = np.where(g == 0, x, new)
        lam[todo[done]] = x[done]
        keep = ~done
        todo, others, m, c, t, p, lo, hi, x = (v[keep] for v in (todo, others, m, c, t, p, lo, hi, x))
    lam[todo] = x
    return lam


# -- J_spectral ------------------------------------------------------------------------------------------
J_spectral = define("J_spectral", "B", "||d alpha / d l||_2, the spectral norm of the Jacobian",
                    definition="||d alpha / d l||_2", reference=f"{_L2}; {_C3}", needs=("logits",), cost="jacobian",
                    normaliser=True, nonnegative=True, autograd=True, elementwise=True)


@J_spectral.float_form
def _j_spec(inst: Instance) -> np.ndarray:
    if _ratio(inst) is None:
        return np.linalg.norm(_dense_jacobian(inst), ord=2, axis=(1, 2))
    a, r, g, mult = inst.alpha, F.one_minus_alpha(inst), _g(inst), inst.multiplicity
    present = inst.present
    g0 = np.take_along_axis(g, present.argmax(-1)[:, None], -1)
    flat = np.all((g == g0) | ~present, axis=-1)  # (log F)' constant on the row (softmax): J = g A
    out = np.empty(inst.B)
    if flat.any():
        rows, step = np.flatnonzero(flat), max(1, 2**16 // inst.K)  # blocks that stay in cache
        for i in range(0, rows.size, step):
            blk = rows[i:i + step]
            out[blk] = np.abs(g0[blk, 0]) * top_eigenvalue(a[blk], r[blk], mult[blk])
    rows = np.flatnonzero(~flat)
    step = max(1, F.CHUNK_ELEMENTS // max(inst.K * inst.K, 1))
    if rows.size:  # diag, outer product, their difference times g, the SVD's copy: each (rows, K, K)
        memory.check(4 * 8.0 * min(step, rows.size) * inst.K * inst.K,
                     f"the spectral norm of {min(step, rows.size)} reduced {inst.K} x {inst.K} Jacobians")
    for i in range(0, rows.size, step):
        blk = rows[i:i + step]
        ab, gb, mb = np.where(present[blk], a[blk], 0.0), np.where(present[blk], g[blk], 0.0), mult[blk]
        w = np.sqrt(mb) * ab
        red = -w[:, :, None] * w[:, None, :]
        # the diagonal a_k - m_k a_k^2 = a_k ((1 - a_k) - (m_k - 1) a_k): from 1 - alpha, without the cancellation
        # that loses every digit of a weight within 1e-16 of 1 (Jacobians of 1e-20 and below came out 20-30 % low)
        idx = np.arange(inst.K)
        red[:, idx, idx] = ab * (np.where(present[blk], r[blk], 0.0) - (mb - 1) * ab)
        red = red * gb[:, None, :]
        same = F.masked_max(np.abs(ab * gb), mb >= 2, 0.0)  # vectors inside a class summing to zero
        out[blk] = np.maximum(np.linalg.norm(red, ord=2, axis=(1, 2)), same)
    return out


def _F_parts(ex: BallInstance) -> tuple[np.ndarray, np.ndarray, Any]:
    """``F(l_k)``, ``F'(l_k) = F (log F)'``, ``S = sum_k m_k F(l_k)`` at the instance's logits (``S`` None for an
    element-wise map, whose weights are F itself)."""
    if "F" not in ex.cache:
        own = ex.inst.normaliser
        n = log_F_map(own)
        if n is None:
            raise Unsupported(f"Jacobian quantities are certified for normalisers F / sum F and element-wise maps "
                              f"only, not {ex.inst.normaliser!r}")
        ops, lg = ex.ops, ex.need_logits()
        F_ = ops.map(ops.exp, log_F(ops, n, ex.length, lg))
        dF = F_ * log_F(ops, n, ex.length, lg, derivative=True)
        ex.cache["F"] = (F_, dF, ex.weighted_total(F_) if isinstance(own, RatioNormaliser) else None)
    return ex.cache["F"]


def _total_F(ex: BallInstance, S: Any) -> Any:
    """``S = sum_k m_k F(l_k)``, which an element-wise map has not (Lemma 2's quantities read F over it)."""
    if S is None:
        raise Unsupported(f"Lemma 2's quantities read F / sum F: {ex.inst.normaliser!r} is element-wise")
    return S


def _token_entries(ex: BallInstance) -> tuple[np.ndarray, np.ndarray]:
    """``D_k = d alpha_i / d l_i`` (a token i of column k) and ``C_kj = d alpha_i / d l_j`` (tokens i in k,
    j in column j, i != j): ``D_k = F'_k / S - F_k F'_k / S^2``, ``C_kj = - F_k F'_j / S^2`` (quotient rule); for
    an element-wise map ``D_k = F'_k`` and ``C = 0``."""
    F_, dF, S = _F_parts(ex)
    if S is None:
        zero = ex.ops.zero()
        return dF, np.array([[zero] * len(dF) for _ in dF], dtype=object)
    C = -(F_[:, None] * dF[None, :]) / (S * S)
    D = dF / S - F_ * dF / (S * S)
    return D, C


def _exactly_zero(ops: Any, v: Any) -> bool:
    """:meth:`Ops.certainly_zero`, False where a tier cannot decide it."""
    try:
        return ops.certainly_zero(v)
    except Unsupported:
        return False


def _tied_top(ex: BallInstance, p: np.ndarray, F_: np.ndarray, dF: np.ndarray, S: Any) -> Any:
    """``||J||_2 = |g| t`` exactly where ``(log F)' = g`` is one number on every token and the largest weight ``t``
    is held by two tokens (a column of two or more, or two columns of certainly equal weight): then
    ``J = g A``, ``0 <= A = diag(alpha) - alpha alpha^T <= diag(alpha) <= t I`` and ``e_i - e_j`` is an
    eigenvector of eigenvalue ``t``. The equality case of Corollary 3's spectral bound (two equal logits) is an
    exact number there, not a float eigenvalue enclosure; None when any of it is not certain."""
    ops = ex.ops
    if len(p) == 0 or not all(_exactly_zero(ops, dF[k] * F_[p[0]] - dF[p[0]] * F_[k]) for k in p[1:]):
        return None  # (log F)' = dF / F is not certainly the same on every column
    try:  # the column certainly at least as heavy as every other (none when the balls leave it open)
        top = next((k for k in p if all(ops.nonnegative(F_[k] - F_[j]) for j in p)), None)
    except Unsupported:
        return None
    if top is None:
        return None
    tied = ex.counts[top] >= 2 or any(k != top and _exactly_zero(ops, F_[k] - F_[top]) for k in p)
    return ops.abs(dF[top] / S) if tied else None


@J_spectral.ball_form
def _j_spec_ball(ex: BallInstance) -> BallValue:
    F_, dF, S = _F_parts(ex)
    ops, p = ex.ops, np.flatnonzero(ex.present)
    if S is None:  # an element-wise map: J = diag(F'(l_k))
        return ops.maximum(np.array([ops.abs(dF[k]) for k in p], dtype=object))
    tied = _tied_top(ex, p, F_, dF, S)
    if tied is not None:
        return tied
    m = [ex.counts[k] for k in p]
    root = np.array([[ops.sqrt(ops.num(m[i] * m[j])) for j in range(len(p))] for i in range(len(p))], dtype=object)
    red = -(root * (F_[p][:, None] * dF[p][None, :])) / (S * S)
    for i, k in enumerate(p):
        red[i, i] = red[i, i] + dF[k] / S
    value = spectral_norm(ops, red)
    for k in p:
        if ex.counts[k] >= 2:
            value = ops.max2(value, ops.abs(dF[k] / S))
    return value


@J_spectral.torch_form
def _j_spec_torch(state: State) -> Tensor:
    import torch

    a, g, m = state.alpha * state.present, state.dlog_F_of(state.logits) * state.present, state.mult
    w = m.sqrt() * a
    diag = a * (state.others(a) - (m - 1) * a)  # a_k - m_k a_k^2 from the other tokens' weight, without cancellation
    red = (torch.diag_embed(diag) - w[:, :, None] * w[:, None, :] * (1 - torch.eye(state.K, dtype=a.dtype))) * g[:, None, :]
    value = torch.linalg.svdvals(red)[:, 0]
    same = torch.where(m >= 2, (a * g).abs(), torch.zeros_like(a)).max(-1).values
    return torch.maximum(value, same)


def _diagonal_extreme(rx: RelaxedInstance, name: str) -> sp.Expr:
    """The largest ``|d alpha_i / d l_i| = |F_i g_i|`` of an element-wise map (its Jacobian is diagonal)."""
    top = rx.role(name, dominates=lambda r, k: OAbs(r.g) - sp.exp(k.lam - r.lam) * OAbs(k.g), extreme="max")
    return rx.weight(top) * OAbs(top.g)


@J_spectral.relaxed_form
def _j_spec_relaxed(rx: RelaxedInstance) -> sp.Expr:
    """An upper bound (the spectral norm solves a secular equation, not a function of finitely many totals), one of:

    - Schur's test ``||J||_2^2 <= ||J||_1 ||J||_inf``: the largest absolute column sum ``2 |g_j| alpha_j (1 -
      alpha_j)`` times the largest row sum ``alpha_i (|g_i| (1 - alpha_i) + sum_{j != i} alpha_j |g_j|)``, the sum as
      ``alpha_i / t`` times the total of ``(F_j / F_i) |g_j|`` over the other tokens. Equal to the norm where ``J``
      is symmetric with equal absolute row sums: softmax on two tokens (``1 / (2T)`` at equal logits);
    - interlacing ``||J||_2 <= ||A||_2 max_j |g_j| <= max_i alpha_i max_j |g_j|`` (``A = diag(alpha) - alpha
      alpha^T`` has its eigenvalues in ``[0, max alpha]``): equal to the norm at equal logits (``1 / (L T)``).

    An element-wise map's Jacobian is ``diag(F'(l_i))``: its norm is the largest ``|F_i g_i|``, exactly."""
    if rx.elementwise:
        return _diagonal_extreme(rx, "diagonal")
    if rx.at_most("Schur's test: ||J||_2 <= sqrt(||J||_1 ||J||_inf)",
                  "interlacing: ||J||_2 <= max_i alpha_i max_j |g_j|") == 1:
        top = rx.role("top", dominates=lambda r, k: r.lam - k.lam)
        steep = rx.role("steep", dominates=lambda r, k: OAbs(r.g) - OAbs(k.g))
        return rx.weight(top) * OAbs(steep.g)
    col, row = rx.role("column"), rx.role("row")
    a_c, a_r = rx.weight(col), rx.weight(row)
    others = rx.total(lambda k: sp.exp(k.lam - row.lam) * OAbs(k.g), exclude=[row])
    column_sum = 2 * OAbs(col.g) * a_c * (1 - a_c)
    row_sum = a_r * (OAbs(row.g) * (1 - a_r) + a_r / rx.t * others)
    return sp.sqrt(column_sum * row_sum)


# -- J_frobenius, J_row, J_entry ------------------------------------------------------------------------------
J_frobenius = define("J_frobenius", "B", "||d alpha / d l||_F", definition="||d alpha / d l||_F",
                     reference=f"{_L2}; {_C3}", needs=("logits",), cost="jacobian", normaliser=True, nonnegative=True,
                     closed_form=True, autograd=True)


@J_frobenius.float_form
def _j_frob(inst: Instance) -> np.ndarray:
    """Column j (a token of class k) is ``g_k alpha_k (e_j - alpha)``: norm ``|alpha_k g_k| sqrt((1 - alpha_k)^2 +
    sum_{i != j} alpha_i^2)``; the Frobenius norm sums the squares with the counts."""
    if _ratio(inst) is None:
        return np.linalg.norm(_dense_jacobian(inst), axis=(1, 2))
    a, r, g, mult = inst.alpha, F.one_minus_alpha(inst), _g(inst), inst.multiplicity
    col = np.abs(a * g) * np.hypot(r, F.norm_others(a, mult))
    return F.scaled_norm(np.where(inst.present, col, 0.0), mult)


@J_frobenius.ball_form
def _j_frob_ball(ex: BallInstance) -> BallValue:
    """``||J||_F^2 = sum over ordered token pairs``: every pair of columns ``m_k m_j C_kj^2``, less the
    ``m_k`` pairs of a token with itself counted there, plus the diagonal ``m_k D_k^2``."""
    D, C = _token_entries(ex)
    ops, m, p = ex.ops, ex.m, np.flatnonzero(ex.present)
    Cp = C[np.ix_(p, p)]
    pairs = ops.total((m[p][:, None] * m[p][None, :] * Cp * Cp).ravel())
    self_pairs = ops.total(m[p] * np.array([C[k, k] * C[k, k] for k in p], dtype=object))
    return ops.sqrt(pairs - self_pairs + ops.total(m[p] * D[p] * D[p]))


@J_frobenius.torch_form
def _j_frob_torch(state: State) -> Tensor:
    a, g, m = state.alpha * state.present, state.dlog_F_of(state.logits) * state.present, state.mult
    return ((m * (a * g) ** 2 * (state.others(a) ** 2 + state.others(a * a))).sum(-1) + state.TINY).sqrt()


@J_frobenius.relaxed_form
def _j_frob_relaxed(rx: RelaxedInstance) -> sp.Expr:
    """``||J||_F^2 = sum_j alpha_j^2 g_j^2 (1 - 2 alpha_j + ||alpha||^2)`` with ``alpha_j = t F_j / S``, ``S`` the
    total of F: totals of F, F^2, F^2 g^2 and F^3 g^2."""
    t = rx.t
    S = rx.total(lambda k: k.F)
    P = rx.total(lambda k: k.F**2 * k.g**2)
    R = rx.total(lambda k: k.F**3 * k.g**2)
    U = rx.total(lambda k: k.F**2)
    return sp.sqrt(t * P / S**2 * (1 + t * U / S**2) - 2 * t**2 * R / S**3)


J_row = define("J_row", "B", "max_i ||grad_l alpha_i||_2, the largest row norm of the Jacobian",
               definition="max_i ||grad_l alpha_i||_2", reference=_C3, needs=("logits",), cost="jacobian",
               normaliser=True, nonnegative=True, closed_form=True, autograd=True, elementwise=True)


@J_row.float_form
def _j_row(inst: Instance) -> np.ndarray:
    """Row i (a token of class k): ``alpha_k sqrt((1 - alpha_k)^2 g_k^2 + sum_{j != i} alpha_j^2 g_j^2)``."""
    if _ratio(inst) is None:
        return np.linalg.norm(_dense_jacobian(inst), axis=2).max(-1)
    a, r, g, mult = inst.alpha, F.one_minus_alpha(inst), _g(inst), inst.multiplicity
    return F.masked_max(a * np.hypot(r * g, F.norm_others(np.abs(a * g), mult)), inst.present)


@J_row.ball_form
def _j_row_ball(ex: BallInstance) -> BallValue:
    D, C = _token_entries(ex)
    ops, m, p = ex.ops, ex.m, np.flatnonzero(ex.present)
    rows = [ops.sqrt(D[k] * D[k] + ops.total(m[p] * C[k, p] * C[k, p]) - C[k, k] * C[k, k]) for k in p]
    return ops.maximum(np.array(rows, dtype=object))


@J_row.torch_form
def _j_row_torch(state: State) -> Tensor:
    a, g = state.alpha * state.present, state.dlog_F_of(state.logits) * state.present
    row = a * ((state.others(a) * g) ** 2 + state.others((a * g) ** 2) + state.TINY).sqrt()
    return state.masked(row, state.present, "max")


@J_row.relaxed_form
def _j_row_relaxed(rx: RelaxedInstance) -> sp.Expr:
    """Row i: ``alpha_i sqrt((1 - alpha_i)^2 g_i^2 + sum_{j != i} alpha_j^2 g_j^2)``, the sum as ``alpha_i^2 / t``
    times the total of ``(F_j / F_i)^2 g_j^2`` over the other tokens; ``|F_i g_i|`` for an element-wise map."""
    if rx.elementwise:
        return _diagonal_extreme(rx, "row")
    i = rx.role("row")
    a = rx.weight(i)
    Q = rx.total(lambda k: sp.exp(2 * (k.lam - i.lam)) * k.g**2, exclude=[i])
    return a * sp.sqrt((1 - a) ** 2 * i.g**2 + a**2 / rx.t * Q)


J_entry = define("J_entry", "B", "max_{i,j} |d alpha_i / d l_j|", definition="max_{i,j} |d alpha_i / d l_j|",
                 reference=_C3, needs=("logits",), cost="jacobian", normaliser=True, nonnegative=True,
                 closed_form=True, autograd=True, elementwise=True)


@J_entry.float_form
def _j_entry(inst: Instance) -> np.ndarray:
    """Diagonal ``alpha_i (1 - alpha_i) |g_i|``; off-diagonal ``alpha_i alpha_j |g_j|`` over distinct tokens."""
    if _ratio(inst) is None:
        return np.abs(_dense_jacobian(inst)).max(axis=(1, 2))
    a, r, g, mult, present = inst.alpha, F.one_minus_alpha(inst), _g(inst), inst.multiplicity, inst.present
    diag = F.masked_max(a * r * np.abs(g), present)
    if inst.L == 1:
        return diag
    q = a * np.abs(g)
    b = np.arange(inst.B)
    ap, qp = np.where(present, a, -np.inf), np.where(present, q, -np.inf)
    ka, kq = ap.argmax(-1), qp.argmax(-1)
    a2, q2 = ap.copy(), qp.copy()
    a2[b, ka] = np.where(mult[b, ka] >= 2, ap[b, ka], -np.inf)
    q2[b, kq] = np.where(mult[b, kq] >= 2, qp[b, kq], -np.inf)
    distinct = (ka != kq) | (mult[b, ka] >= 2)
    off = np.where(distinct, ap[b, ka] * qp[b, kq], np.maximum(ap[b, ka] * q2.max(-1), a2.max(-1) * qp[b, kq]))
    return np.maximum(diag, off)


@J_entry.ball_form
def _j_entry_ball(ex: BallInstance) -> BallValue:
    D, C = _token_entries(ex)
    ops, p = ex.ops, np.flatnonzero(ex.present)
    values = [ops.abs(D[k]) for k in p]
    values += [ops.abs(C[i, j]) for i in p for j in p if i != j or ex.counts[i] >= 2]
    return ops.maximum(np.array(values, dtype=object))


@J_entry.relaxed_form
def _j_entry_relaxed(rx: RelaxedInstance) -> sp.Expr:
    """The entry (i, j): ``alpha_i (1 - alpha_i) |g_i|`` on the diagonal (one token), ``alpha_i alpha_j |g_j|`` off it;
    for an element-wise map ``|F_i g_i|`` on the diagonal, 0 off it."""
    i, j = rx.role("i"), rx.role("j")
    a = rx.weight(i)
    if rx.elementwise:
        return a * OAbs(i.g) if rx.same(i, j) else sp.Integer(0)
    if rx.same(i, j):
        return a * (1 - a) * OAbs(i.g)
    return a * rx.weight(j) * OAbs(j.g)


@J_entry.torch_form
def _j_entry_torch(state: State) -> Tensor:
    import torch

    a, g, m = state.alpha, state.dlog_F_of(state.logits), state.mult
    diag = state.masked(a * state.others(a * state.present) * g.abs(), state.present, "max")  # 1 - a_i without cancellation
    off = a[:, :, None] * (a * g).abs()[:, None, :]
    eye = torch.eye(state.K, dtype=torch.bool)[None]
    ok = state.present[:, :, None] & state.present[:, None, :] & (~eye | (m >= 2)[:, :, None])
    off = torch.where(ok, off, torch.zeros_like(off)).flatten(1).max(-1).values
    return torch.maximum(diag, off)


# -- the finite difference of Fig. 4 --------------------------------------------------------------------------
def _direction(inst: Instance) -> np.ndarray:
    if "v" not in inst.arrays:
        raise InvalidArgument("the finite-difference quantity needs a direction: arrays={'v': (B, L) unit vectors}")
    return inst.arrays["v"]


def _shifted(inst: Instance) -> Instance:
    """The instance at the shifted logits ``l + eps v`` (weights by the same normaliser)."""
    def build() -> Instance:
        eps = inst.param("eps")
        return Instance.from_logits(F.need_logits(inst) + eps[:, None] * _direction(inst), inst.normaliser,  # type: ignore[arg-type]
                                    counts=inst.counts, **{k: v for k, v in inst.params.items()
                                                           if k not in inst.normaliser.params})  # type: ignore[union-attr, arg-type]  # **params: extra parameters
    return F.cached(inst, "shifted", build)


def _g_fd_magnitude(inst: Instance) -> np.ndarray:
    """``(||alpha|| + ||alpha'||) (1 + s) / eps``, ``s`` the largest exponent spread at either logits: the
    weights are ``exp`` of numbers up to ``s``, so each carries a relative rounding error of about ``s eps``."""
    moved = _shifted(inst)
    spread = np.maximum(F.masked_max(F.exponent_size(inst), inst.present, 0.0),
                        F.masked_max(F.exponent_size(moved), moved.present, 0.0))
    norms = F.scaled_norm(inst.alpha, inst.multiplicity) + F.scaled_norm(moved.alpha, inst.multiplicity)
    return norms * (1 + spread) / inst.param("eps")


g_fd = define("g_fd", "B", "g(T, eps) = ||alpha(l + eps v) - alpha(l)||_2 / eps with the instance's direction v",
              definition="||alpha(l + eps v) - alpha(l)||_2 / eps", reference="section 3 (Fig. 4)",
              needs=("logits", "fd"), cost="jacobian", normaliser=True, magnitude=_g_fd_magnitude, nonnegative=True,
              closed_form=True,
              lacks={"relaxed": 'the unit direction v couples every token (its norm is a total inside each '
                                'shifted weight)'})


@g_fd.float_form
def _g_fd(inst: Instance) -> np.ndarray:
    return F.scaled_norm(_shifted(inst).alpha - inst.alpha, inst.multiplicity) / inst.param("eps")


@g_fd.ball_form
def _g_fd_ball(ex: BallInstance) -> BallValue:
    """``||alpha(l + eps v) - alpha(l)|| / eps`` with ``v`` normalised exactly to unit length."""
    if "v" not in ex.arrays:
        raise InvalidArgument("the finite-difference quantity needs a direction: arrays={'v': (B, L) unit vectors}")
    ops = ex.ops
    v = ex.arrays["v"]
    v = v / ops.sqrt(ex.weighted_total(v * v))
    ex.note("the direction v is normalised exactly to unit length (the reading's 'unit vector v')")
    eps = ex.param("eps")
    diff = weights_from_logits(ex, ex.need_logits() + v * eps) - ex.alpha
    return ops.sqrt(ex.weighted_total(diff * diff)) / eps


@g_fd.torch_form
def _g_fd_torch(state: State) -> Tensor:
    eps = state.param("eps")
    v = state.v / (state.mult * state.v * state.v).sum(-1, keepdim=True).add(state.TINY).sqrt()
    diff = state.weights_of(state.logits + eps[:, None] * v) - state.alpha
    return ((state.mult * diff * diff).sum(-1) + state.TINY).sqrt() / eps


# -- the terms of Lemma 2's bounds ----------------------------------------------------------------------------
dF_max = define("dF_max", "B", "max_j |F'(l_j)| / sum_k F(l_k) = max_j alpha_j |g_j|, g = (log F)'",
                definition="max_j |F'(l_j)| / sum_k F(l_k)", reference=_L2, needs=("logits", "ratio"), cost="jacobian",
                normaliser=True, nonnegative=True, closed_form=True)


@dF_max.float_form
def _df_max(inst: Instance) -> np.ndarray:
    return F.masked_max(np.abs(inst.alpha * _g(inst)), inst.present)


@dF_max.ball_form
def _df_max_ball(ex: BallInstance) -> BallValue:
    _, dF, S = _F_parts(ex)
    return ex.ops.maximum(ex.ops.map(ex.ops.abs, dF[ex.present])) / _total_F(ex, S)


@dF_max.torch_form
def _df_max_torch(state: State) -> Tensor:
    return state.masked((state.alpha * state.dlog_F_of(state.logits)).abs(), state.present, "max")


@dF_max.relaxed_form
def _df_max_relaxed(rx: RelaxedInstance) -> sp.Expr:
    r = rx.role("max", dominates=lambda r, k: OAbs(r.g) - sp.exp(k.lam - r.lam) * OAbs(k.g),  # F_r |g_r| >= F_k |g_k|
                extreme="max")
    return rx.weight(r) * OAbs(r.g)


F_l2 = define("F_l2", "B", "||F||_2 / sum_k F(l_k) = ||alpha||_2", definition="||F||_2 / sum_k F(l_k)", reference=_L2,
              needs=(), cost="weights", nonnegative=True, closed_form=True)


@F_l2.float_form
def _f_l2(inst: Instance) -> np.ndarray:
    return F.scaled_norm(inst.alpha, inst.multiplicity)


@F_l2.ball_form
def _f_l2_ball(ex: BallInstance) -> BallValue:
    return ex.ops.sqrt(ex.weighted_total(ex.alpha * ex.alpha))


@F_l2.torch_form
def _f_l2_torch(state: State) -> Tensor:
    return ((state.mult * state.alpha**2).sum(-1) + state.TINY).sqrt()


@F_l2.relaxed_form
def _f_l2_relaxed(rx: RelaxedInstance) -> sp.Expr:
    return sp.sqrt(rx.t * rx.total(lambda k: k.F**2)) / rx.total(lambda k: k.F)


dF_l2 = define("dF_l2", "B", "||F'||_2 / sum_k F(l_k) = ||alpha * g||_2", definition="||F'||_2 / sum_k F(l_k)",
               reference=_L2, needs=("logits", "ratio"), cost="jacobian", normaliser=True, nonnegative=True,
               closed_form=True)


@dF_l2.float_form
def _df_l2(inst: Instance) -> np.ndarray:
    return F.scaled_norm(np.where(inst.present, inst.alpha * _g(inst), 0.0), inst.multiplicity)


@dF_l2.ball_form
def _df_l2_ball(ex: BallInstance) -> BallValue:
    _, dF, S = _F_parts(ex)
    return ex.ops.sqrt(ex.weighted_total(dF * dF)) / _total_F(ex, S)


@dF_l2.torch_form
def _df_l2_torch(state: State) -> Tensor:
    return ((state.mult * (state.alpha * state.dlog_F_of(state.logits)) ** 2).sum(-1) + state.TINY).sqrt()


@dF_l2.relaxed_form
def _df_l2_relaxed(rx: RelaxedInstance) -> sp.Expr:
    return sp.sqrt(rx.t * rx.total(lambda k: k.F**2 * k.g**2)) / rx.total(lambda k: k.F)


g_absmax = define("g_absmax", "B", "max_j |(log F)'(l_j)|", definition="max_j |(log F)'(l_j)|", reference=_L2,
                  needs=("logits", "ratio"), cost="jacobian", normaliser=True, nonnegative=True, closed_form=True)


@g_absmax.float_form
def _g_absmax(inst: Instance) -> np.ndarray:
    return F.masked_max(np.abs(_g(inst)), inst.present)


@g_absmax.ball_form
def _g_absmax_ball(ex: BallInstance) -> BallValue:
    n = ex.inst.normaliser
    if not isinstance(n, RatioNormaliser):
        raise Unsupported(f"(log F)' is certified for normalisers F / sum F only, not {n!r}")
    g = log_F(ex.ops, n, ex.length, ex.need_logits(), derivative=True)
    return ex.ops.maximum(ex.ops.map(ex.ops.abs, g[ex.present]))


@g_absmax.torch_form
def _g_absmax_torch(state: State) -> Tensor:
    return state.masked(state.dlog_F_of(state.logits).abs(), state.present, "max")


@g_absmax.relaxed_form
def _g_absmax_relaxed(rx: RelaxedInstance) -> sp.Expr:
    return OAbs(rx.role("max", dominates=lambda r, k: r.g**2 - k.g**2, extreme="max").g)
