"""Named per-instance quantities of the paper, each defined once, computed in float64 over a batch.

A statement is a sympy relation over these names (plus the instance's parameters); the numeric
evaluator looks each name up here. Shapes: ``(B,)`` scalars, ``(B, L)`` per token (``alpha_i``,
``Delta_i``), ``(B, N)`` per selected token (``xi_i``). Expectation quantities (``E_...``) also
carry a half-width: ``interval(name, inst)`` gives ``(lo, hi)`` that contain the true value with the
stated confidence (exact enumeration gives ``lo == hi``).

Kernels avoid Python loops over instances: norms and inner products are ``einsum`` /
batched matrix products over the leading batch axis.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from itertools import combinations
from typing import Callable

import numpy as np
from scipy.special import comb

from theory.errors import AttnBoundsError
from theory.instance import Instance
from theory.normalisers import RatioNormaliser


@dataclass(frozen=True)
class Quantity:
    """A named quantity: ``fn(inst)`` returns an array, or ``(mean, halfwidth)`` for estimates."""

    name: str
    shape: str  # "B", "BL" (per token) or "BN" (per selected token)
    description: str
    fn: Callable[[Instance], object]
    estimate: bool = False


QUANTITIES: dict[str, Quantity] = {}


def quantity(name: str, shape: str, description: str, estimate: bool = False):
    def register(fn: Callable[[Instance], object]) -> Callable[[Instance], object]:
        QUANTITIES[name] = Quantity(name, shape, description, fn, estimate)
        return fn

    return register


def _raw(name: str, inst: Instance) -> object:
    if name not in QUANTITIES:
        raise AttnBoundsError(f"unknown quantity {name!r}; known: {', '.join(sorted(QUANTITIES))}")
    key = "q:" + name
    if key not in inst._cache:
        inst._cache[key] = QUANTITIES[name].fn(inst)
    return inst._cache[key]


def compute(name: str, inst: Instance) -> np.ndarray:
    """The value (point estimate for ``E_`` quantities) of quantity ``name`` on every instance."""
    out = _raw(name, inst)
    return out[0] if QUANTITIES[name].estimate else out  # type: ignore[index, return-value]


def interval(name: str, inst: Instance) -> tuple[np.ndarray, np.ndarray]:
    """``(lo, hi)`` enclosing the quantity (with the stated confidence for Monte Carlo estimates)."""
    out = _raw(name, inst)
    if QUANTITIES[name].estimate:
        mean, half = out  # type: ignore[misc]
        return mean - half, mean + half
    return out, out  # type: ignore[return-value]


def _need_x(inst: Instance) -> np.ndarray:
    if inst.x is None:
        raise AttnBoundsError("this quantity needs token vectors x of shape (B, L, d); pass x=... to the instance")
    return inst.x


# -- weights ----------------------------------------------------------------------------------
@quantity("alpha_i", "BL", "attention weight of every token")
def _alpha(inst: Instance) -> np.ndarray:
    return inst.alpha


@quantity("alpha_min", "B", "smallest weight min_i alpha_i")
def _alpha_min(inst: Instance) -> np.ndarray:
    return inst.alpha.min(-1)


@quantity("alpha_max", "B", "largest weight max_i alpha_i")
def _alpha_max(inst: Instance) -> np.ndarray:
    return inst.alpha.max(-1)


@quantity("abar_N", "B", "selected mass abar_N = sum_{i in I_N} alpha_i")
def _abar(inst: Instance) -> np.ndarray:
    return np.where(inst.mask, inst.alpha, 0.0).sum(-1)


@quantity("logit_absmax", "B", "max_i |l_i|, the tightest a with l_i in [-a, a]")
def _absmax(inst: Instance) -> np.ndarray:
    if inst.logits is None:
        raise AttnBoundsError("this quantity needs logits; build the instance with from_logits or from_qk")
    return np.abs(inst.logits).max(-1)


# -- Lemma 1 / Corollary 1 -----------------------------------------------------------------
def _log_F_range(inst: Instance) -> tuple[np.ndarray, np.ndarray]:
    """``(log min F, log max F)`` on ``[-a, a]`` per instance, ``a`` the instance parameter."""
    n = inst.normaliser
    if not isinstance(n, RatioNormaliser):
        raise AttnBoundsError("Lemma 1's constants need a normaliser of the form F / sum F")
    if "logFrange" not in inst._cache:
        inst._cache["logFrange"] = n.log_F_range(inst.param("a"))
    return inst._cache["logFrange"]


@quantity("C_1", "B", "Lemma 1 lower constant min F / max F on [-a, a]")
def _c1(inst: Instance) -> np.ndarray:
    lo, hi = _log_F_range(inst)
    return np.exp(lo - hi)


@quantity("C_2", "B", "Lemma 1 upper constant max F / min F on [-a, a] (inf when it exceeds the float range)")
def _c2(inst: Instance) -> np.ndarray:
    lo, hi = _log_F_range(inst)
    with np.errstate(over="ignore"):  # the bound is then vacuous: C_2 / L = inf
        return np.exp(hi - lo)


def _need_qk(inst: Instance) -> tuple[np.ndarray, np.ndarray]:
    if inst.q is None or inst.k is None:
        raise AttnBoundsError("Corollary 1 needs the query and keys; build the instance with from_qk")
    return inst.q, inst.k


@quantity("Delta_own", "BL", "||q||_2 ||k_i||_2 for every key i")
def _delta_own(inst: Instance) -> np.ndarray:
    q, k = _need_qk(inst)
    return np.linalg.norm(q, axis=-1)[:, None] * np.linalg.norm(k, axis=-1)


@quantity("Delta_max", "B", "||q||_2 max_j ||k_j||_2")
def _delta_max(inst: Instance) -> np.ndarray:
    return _delta_own(inst).max(-1)


# -- Theorem 1, fixed top-N set ------------------------------------------------------------
def _norms_sq(inst: Instance) -> np.ndarray:
    if "x2" not in inst._cache:
        x = _need_x(inst)
        inst._cache["x2"] = np.einsum("bld,bld->bl", x, x)
    return inst._cache["x2"]


#: a Gram-form squared distance below this fraction of its terms is recomputed directly
_CANCELLATION = 1e-3


def _distances(aa: np.ndarray, bb: np.ndarray, ab: np.ndarray, direct: Callable[..., np.ndarray]) -> np.ndarray:
    """``||u - v||`` from ``aa = ||u||^2``, ``bb = ||v||^2``, ``ab = <u, v>`` (broadcast together).

    The Gram form costs one matrix product but loses relative accuracy when ``u ~ v``; entries
    whose squared distance is below :data:`_CANCELLATION` times ``aa + bb`` are recomputed
    from the vectors by ``direct(*index)`` (``index`` as from ``np.nonzero``), so every entry
    is accurate to a few ulps of ``||u|| + ||v||`` relative to itself.
    """
    scale = aa + bb
    d2 = scale - 2.0 * ab
    out = np.sqrt(np.maximum(d2, 0.0))
    bad = np.nonzero(d2 <= _CANCELLATION * scale)
    if bad[0].size:
        out[bad] = direct(*bad)
    return out


def _context(inst: Instance) -> np.ndarray:
    """``s = sum_{i in I_N} alpha_i x_i``, shape ``(B, d)``."""
    if "s" not in inst._cache:
        sel, _ = _split(inst)
        a = np.take_along_axis(inst.alpha, sel, 1)
        inst._cache["s"] = np.matmul(a[:, None, :], _selected_x(inst))[:, 0]
    return inst._cache["s"]


def _split(inst: Instance) -> tuple[np.ndarray, np.ndarray]:
    """Indices of selected ``(B, N)`` and non-selected ``(B, L-N)`` tokens, each in index order."""
    if "split" not in inst._cache:
        m = inst.mask
        inst._cache["split"] = (np.nonzero(m)[1].reshape(inst.B, inst.N),
                                np.nonzero(~m)[1].reshape(inst.B, inst.L - inst.N))
    return inst._cache["split"]


def _selected_x(inst: Instance) -> np.ndarray:
    """``x_j`` for the selected tokens, ``(B, N, d)``."""
    if "xsel" not in inst._cache:
        sel, _ = _split(inst)
        inst._cache["xsel"] = _need_x(inst)[np.arange(inst.B)[:, None], sel]
    return inst._cache["xsel"]


def _selected_gram(inst: Instance) -> np.ndarray:
    """``<x_i, x_j>`` for every token i and selected token j, ``(B, L, N)``: one pass over ``x``."""
    if "G" not in inst._cache:
        inst._cache["G"] = np.einsum("bld,bnd->bln", _need_x(inst), _selected_x(inst), optimize=True)
    return inst._cache["G"]


@quantity("max_norm", "B", "max_{j in I_N} ||x_j||_2")
def _max_norm(inst: Instance) -> np.ndarray:
    return np.sqrt(np.where(inst.mask, _norms_sq(inst), 0.0).max(-1))


@quantity("d_1", "B", "d_1 = max_{i not in I_N, j in I_N} ||x_i - x_j||_2 (0 when N = L)")
def _d1(inst: Instance) -> np.ndarray:
    if inst.N == inst.L:
        return np.zeros(inst.B)
    x, xs, n2 = _need_x(inst), _selected_x(inst), _norms_sq(inst)
    sel, _ = _split(inst)
    n2s = np.take_along_axis(n2, sel, 1)[:, None, :]
    d2 = n2[:, :, None] - 2.0 * _selected_gram(inst)
    d2 += n2s
    d2[inst.mask] = -np.inf
    flat = d2.reshape(inst.B, -1).argmax(-1)
    i, j = np.divmod(flat, inst.N)
    b = np.arange(inst.B)
    out = np.linalg.norm(x[b, i] - xs[b, j], axis=-1)  # the arg-max pair, recomputed directly
    # where every pair nearly coincides the Gram form cannot rank them: compare all pairs directly
    bad = np.nonzero(d2[b, i, j] <= _CANCELLATION * (n2.max(-1) + n2s[:, 0].max(-1)))[0]
    if bad.size:
        diff = np.linalg.norm(x[bad][:, :, None, :] - xs[bad][:, None, :, :], axis=-1)
        out[bad] = np.where(inst.mask[bad][:, :, None], -np.inf, diff).max(axis=(1, 2))
    return out


def _dist_to_context(inst: Instance) -> np.ndarray:
    """``||alpha_i x_i - s||_2`` for every token, ``(B, L)``."""
    if "rs" not in inst._cache:
        x, s, a = _need_x(inst), _context(inst), inst.alpha
        sel, _ = _split(inst)
        xs_dot = np.matmul(_selected_gram(inst), np.take_along_axis(a, sel, 1)[..., None])[..., 0]  # <x_i, s>
        ss = np.einsum("bd,bd->b", s, s)[:, None]
        inst._cache["rs"] = _distances(a * a * _norms_sq(inst), ss, a * xs_dot,
                                       lambda bb, i: np.linalg.norm(a[bb, i, None] * x[bb, i] - s[bb], axis=-1))
    return inst._cache["rs"]


@quantity("dtilde_R1", "B", "R1 of eq. (7): sum_{i not in I_N} ||alpha_i x_i - s||_2")
def _dtilde_r1(inst: Instance) -> np.ndarray:
    return np.where(inst.mask, 0.0, _dist_to_context(inst)).sum(-1)


@quantity("dtilde_R2", "B", "R2 of eq. (7): ||sum_{i not in I_N} alpha_i x_i - s||_2")
def _dtilde_r2(inst: Instance) -> np.ndarray:
    w = np.where(inst.mask, -inst.alpha, inst.alpha)
    return np.linalg.norm(np.matmul(w[:, None, :], _need_x(inst))[:, 0], axis=-1)


# -- Theorem 1, random N-subset; Corollary 2 -------------------------------------------------
@quantity("A_norm", "B", "sum_i ||alpha_i x_i||_2 (Corollary 2 (i))")
def _a_norm(inst: Instance) -> np.ndarray:
    return (inst.alpha * np.sqrt(_norms_sq(inst))).sum(-1)


@quantity("m_norm", "B", "||sum_i alpha_i x_i||_2, the norm of the attention output")
def _m_norm(inst: Instance) -> np.ndarray:
    return np.linalg.norm(np.matmul(inst.alpha[:, None, :], _need_x(inst))[:, 0], axis=-1)


def _jensen_terms(inst: Instance, coefficient: str, xbar: str) -> np.ndarray:
    """``||c_i x_i - xbar||_2`` per token for the readings of Theorem 1 (random subset).

    coefficient: ``scaled`` = alpha_i (1 + N/(L-1)); ``printed`` = alpha_i + N/(L-1).
    xbar: ``weighted`` = N/(L-1) sum_j alpha_j x_j; ``mean`` = (1/L) sum_j x_j.
    """
    x, a, L, N = _need_x(inst), inst.alpha, inst.L, inst.N
    if L < 2:
        raise AttnBoundsError(f"Theorem 1 (random subset) needs L >= 2, got L={L}")
    rho = N / (L - 1)
    c = a * (1 + rho) if coefficient == "scaled" else a + rho
    xb = rho * np.einsum("bl,bld->bd", a, x) if xbar == "weighted" else x.mean(1)
    return np.linalg.norm(c[..., None] * x - xb[:, None, :], axis=-1)


for _c in ("scaled", "printed"):
    for _xb in ("weighted", "mean"):
        quantity(f"J_{_c}_{_xb}", "B",
                 f"(L-N)/L sum_i ||c_i x_i - xbar||_2 with coefficient '{_c}' and xbar '{_xb}' (Theorem 1, random)")(
            lambda inst, c=_c, xb=_xb: (inst.L - inst.N) / inst.L * _jensen_terms(inst, c, xb).sum(-1))


@quantity("jensen_gap_bound", "B",
          "(L-N)/L sum_i sqrt(Var(s | i not in S)): a proven bound on the Jensen gap eps (Theorem 1, random)")
def _gap_bound(inst: Instance) -> np.ndarray:
    x, a, L, N = _need_x(inst), inst.alpha, inst.L, inst.N
    if L <= 2 or N >= L - 1:
        return np.zeros(inst.B)  # the subset of the other L-1 tokens is then deterministic
    y = a[..., None] * x  # (B, L, d)
    mu = y.mean(1, keepdims=True)
    dev = np.einsum("bld,bld->bl", y - mu, y - mu)
    D = dev.sum(-1, keepdims=True)
    # (L-1) * population variance of {y_j : j != i}, from the deviations about the overall mean
    ss = D - dev * (L / (L - 1))
    bad = np.nonzero(ss <= _CANCELLATION * D)
    if bad[0].size:  # that difference cancels: sum the squared deviations about the other tokens' mean
        b, i = bad
        yb = y[b]
        mu_i = (yb.sum(1) - yb[np.arange(b.size), i]) / (L - 1)
        sq = np.einsum("kld,kld->kl", yb - mu_i[:, None], yb - mu_i[:, None])
        sq[np.arange(b.size), i] = 0.0
        ss[bad] = sq.sum(-1)
    fpc = N * (L - 1 - N) / (L - 2)  # sampling N of L-1 without replacement
    return (L - N) / L * np.sqrt(np.maximum(fpc * ss / (L - 1), 0.0)).sum(-1)


#: random subsets are enumerated exactly up to this many, else sampled
ENUMERATION_LIMIT = 4096


@functools.lru_cache(maxsize=64)
def _enumerated_masks(L: int, N: int) -> np.ndarray:
    """Every N-subset of ``range(L)`` as a read-only ``(C(L, N), L)`` boolean array (lexicographic)."""
    masks = np.zeros((comb(L, N, exact=True), L), dtype=bool)
    for row, idx in enumerate(combinations(range(L), N)):
        masks[row, list(idx)] = True
    masks.flags.writeable = False
    return masks


def _subset_masks(inst: Instance) -> tuple[np.ndarray, bool]:
    """``(S, L)`` masks of uniform N-subsets: all of them when few, else Monte Carlo draws."""
    L, N = inst.L, inst.N
    if comb(L, N, exact=True) <= ENUMERATION_LIMIT:
        return _enumerated_masks(L, N), True
    draws = int(inst.params.get("mc_draws", np.array([2000.0]))[0])
    seed = int(inst.params.get("seed", np.array([0.0]))[0])
    rng = np.random.default_rng(seed)
    order = np.argsort(rng.random((draws, L)), axis=-1)[:, :N]
    masks = np.zeros((draws, L), dtype=bool)
    np.put_along_axis(masks, order, True, axis=-1)
    return masks, False


def _expected_dtilde(inst: Instance, reading: str) -> tuple[np.ndarray, np.ndarray]:
    """``E_S[dtilde]`` over uniform N-subsets S (weights fixed): exact, or MC with a Hoeffding interval.

    The Monte Carlo half-width is ``U sqrt(log(2/beta) / (2 n))`` with ``U`` a deterministic upper
    bound of dtilde (triangle inequality) and ``beta`` the instance parameter ``mc_level``
    (default 1e-6), so the interval is rigorous at level ``1 - beta``.
    """
    x, a = _need_x(inst), inst.alpha
    masks, exact = _subset_masks(inst)
    y = a[..., None] * x  # (B, L, d)
    s = np.einsum("sl,bld->bsd", masks.astype(np.float64), y)  # (B, S, d)
    if reading == "R1":
        yy = np.einsum("bld,bld->bl", y, y)
        ys = np.matmul(s, y.transpose(0, 2, 1))  # (B, S, L)
        ss = np.einsum("bsd,bsd->bs", s, s)
        dist = _distances(yy[:, None, :], ss[..., None], ys,
                          lambda b, k, i: np.linalg.norm(y[b, i] - s[b, k], axis=-1))
        vals = np.where(masks[None], 0.0, dist).sum(-1)
    else:
        m = y.sum(1)
        vals = np.linalg.norm(m[:, None, :] - 2 * s, axis=-1)
    mean = vals.mean(-1)
    if exact:
        return mean, np.zeros_like(mean)
    norms = np.sqrt(np.einsum("bld,bld->bl", y, y))
    top = -np.sort(-norms, axis=-1)[:, : inst.N].sum(-1)
    upper = norms.sum(-1) + (inst.L - inst.N if reading == "R1" else 2) * top
    beta = float(inst.params.get("mc_level", np.array([1e-6]))[0])
    return mean, upper * math.sqrt(math.log(2 / beta) / (2 * masks.shape[0]))


quantity("E_dtilde_R1", "B", "E over uniform N-subsets of dtilde (R1), exact or MC with interval",
         estimate=True)(lambda inst: _expected_dtilde(inst, "R1"))
quantity("E_dtilde_R2", "B", "E over uniform N-subsets of dtilde (R2), exact or MC with interval",
         estimate=True)(lambda inst: _expected_dtilde(inst, "R2"))


# -- Theorem 2 ----------------------------------------------------------------------------------
@quantity("xi", "BN", "xi_i = sqrt(M^2 P_i^2 - delta^2/2 (P_i^2 - Q_i)), P_i, Q_i the sum and sum of squares "
          "of the other selected weights: the bound on ||s - alpha_i x_i|| from <x_j,x_k> <= M^2 - delta^2/2")
def _xi(inst: Instance) -> np.ndarray:
    M, delta = inst.param("M")[:, None], inst.param("delta")[:, None]
    sel, _ = _split(inst)
    a = np.take_along_axis(inst.alpha, sel, 1)
    P = a.sum(-1, keepdims=True) - a
    Q = (a * a).sum(-1, keepdims=True) - a * a
    return np.sqrt(np.maximum(M**2 * P**2 - delta**2 / 2 * (P**2 - Q), 0.0))


def _separable_counts(alpha: np.ndarray, x: np.ndarray, mask: np.ndarray, r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(relaxed, full)`` counts N_s of the Definition for token vectors ``x`` (any leading axes)."""
    w = np.where(mask, alpha, 0.0)
    s = np.einsum("...l,...ld->...d", w, x)
    dist = np.linalg.norm(alpha[..., None] * x - s[..., None, :], axis=-1)
    inside = dist <= r[..., None]
    relaxed = (inside & mask).sum(-1)
    no_outsider = ~(inside & ~mask).any(-1)
    return relaxed, relaxed * no_outsider


@quantity("Ns_relaxed", "B", "selected tokens with alpha_i x_i in the closed ball B_r(s), for the instance's x")
def _ns_relaxed(inst: Instance) -> np.ndarray:
    return _separable_counts(inst.alpha, _need_x(inst), inst.mask, inst.param("r"))[0].astype(np.float64)


@quantity("Ns_full", "B", "N_s of the Definition (relaxed count, zero if any non-selected alpha_j x_j is in the ball)")
def _ns_full(inst: Instance) -> np.ndarray:
    return _separable_counts(inst.alpha, _need_x(inst), inst.mask, inst.param("r"))[1].astype(np.float64)


def sphere_embeddings(rng: np.random.Generator, shape: tuple[int, ...], L: int, d: int, M: np.ndarray,
                      delta: np.ndarray, max_tries: int = 200) -> np.ndarray:
    """Uniform points on the sphere of radius M in R^d conditioned on pairwise distance >= delta.

    Rejection sampling (Assumptions 1-2): a draw is kept only if every pair is delta-separated,
    so the result is exactly the conditioned law. Raises when acceptance is too rare.
    """
    out = np.empty((*shape, L, d))
    todo = np.ones(shape, dtype=bool)
    Mb = np.broadcast_to(M, shape)
    db = np.broadcast_to(delta, shape)
    for _ in range(max_tries):
        idx = np.nonzero(todo)
        n = len(idx[0])
        if n == 0:
            return out
        g = rng.standard_normal((n, L, d))
        pts = g / np.linalg.norm(g, axis=-1, keepdims=True) * Mb[idx][:, None, None]
        gram = np.matmul(pts, pts.transpose(0, 2, 1))
        sq = np.einsum("nld,nld->nl", pts, pts)
        d2 = sq[:, :, None] + sq[:, None, :] - 2 * gram
        d2[:, np.arange(L), np.arange(L)] = np.inf
        ok = d2.min(axis=(1, 2)) >= db[idx] ** 2
        sel = tuple(i[ok] for i in idx)
        out[sel] = pts[ok]
        todo[sel] = False
    raise AttnBoundsError(
        f"could not sample {L} points on the sphere of radius M in R^{d} with separation delta; "
        "delta is (nearly) infeasible: lower delta or raise d"
    )


def _expected_ns(inst: Instance, which: int) -> tuple[np.ndarray, np.ndarray]:
    """``E[N_s]/N`` over x ~ uniform on the M-sphere given delta-separation, weights fixed (Theorem 2).

    Monte Carlo over ``mc_draws`` draws (instance parameter, default 2000) with a Hoeffding
    half-width ``sqrt(log(2/beta)/(2n))`` (values lie in [0, 1]), ``beta = mc_level``.
    """
    draws = int(inst.params.get("mc_draws", np.array([2000.0]))[0])
    seed = int(inst.params.get("seed", np.array([0.0]))[0])
    d = int(inst.params.get("dim", np.array([float(inst.x.shape[-1]) if inst.x is not None else 16.0]))[0])
    rng = np.random.default_rng(seed)
    x = sphere_embeddings(rng, (inst.B, draws), inst.L, d, inst.param("M")[:, None], inst.param("delta")[:, None])
    counts = _separable_counts(inst.alpha[:, None, :], x, inst.mask[:, None, :], inst.param("r")[:, None])[which]
    frac = counts / inst.N
    beta = float(inst.params.get("mc_level", np.array([1e-6]))[0])
    return frac.mean(-1), np.full(inst.B, math.sqrt(math.log(2 / beta) / (2 * draws)))


quantity("E_Ns_relaxed", "B", "E[N_s]/N (relaxed) over random sphere embeddings, weights fixed; MC with interval",
         estimate=True)(lambda inst: _expected_ns(inst, 0))
quantity("E_Ns_full", "B", "E[N_s]/N (full Definition) over random sphere embeddings, weights fixed; MC with interval",
         estimate=True)(lambda inst: _expected_ns(inst, 1))


# -- Lemma 2 / Corollary 3: Jacobian of the normaliser ---------------------------------------
# For alpha = F / sum F the Jacobian is J = A diag(g) with A = diag(alpha) - alpha alpha^T and
# g = (log F)' (Lemma 2), so its norms have O(L) closed forms; ``1 - alpha_i`` is evaluated as the
# sum of the other weights where it would cancel (a dominant token), which keeps them accurate
# relative to themselves. Maps not of that form use their (B, L, L) closed-form Jacobian.
def _jac(inst: Instance) -> np.ndarray:
    if "J" not in inst._cache:
        if inst.normaliser is None or inst.logits is None:
            raise AttnBoundsError("Jacobian quantities need logits and a normaliser (from_logits / from_qk)")
        if isinstance(inst.normaliser, RatioNormaliser):
            a, r, g = _ratio_jacobian_parts(inst)
            J = -a[:, :, None] * (a * g)[:, None, :]
            idx = np.arange(inst.L)
            J[:, idx, idx] = a * r * g
            inst._cache["J"] = J
        else:
            inst._cache["J"] = inst.normaliser.jacobian(inst.logits)
    return inst._cache["J"]


def _g(inst: Instance) -> np.ndarray:
    n = inst.normaliser
    if not isinstance(n, RatioNormaliser):
        raise AttnBoundsError("Lemma 2 needs a normaliser of the form F / sum F")
    if "g" not in inst._cache:
        if inst.logits is None:
            raise AttnBoundsError("Jacobian quantities need logits and a normaliser (from_logits / from_qk)")
        inst._cache["g"] = n.dlog_F_values(inst.logits)
    return inst._cache["g"]


def _norm_others(v: np.ndarray) -> np.ndarray:
    """``||v_{-i}||_2`` (the row without entry i) for every i of the non-negative ``(B, L)`` array ``v``.

    Scaled by the largest remaining entry, so neither the subtraction nor the squares lose it
    when one entry dominates or the entries are tiny.
    """
    b = np.arange(v.shape[0])
    k = v.argmax(-1)
    m = v[b, k]
    rest = v.copy()
    rest[b, k] = 0.0
    m2 = rest.max(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        w = v / m[:, None]
        out = m[:, None] * np.sqrt(np.maximum((w * w).sum(-1, keepdims=True) - w * w, 0.0))
        w2 = rest / m2[:, None]
        out[b, k] = m2 * np.sqrt((w2 * w2).sum(-1))
    return np.nan_to_num(out, nan=0.0)


def _scaled_norm(v: np.ndarray) -> np.ndarray:
    """``||v||_2`` over the last axis, scaled by the largest entry (no underflow of squares)."""
    m = np.abs(v).max(-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        w = np.where(m > 0, v / m, 0.0)
    return m[..., 0] * np.sqrt((w * w).sum(-1))


def _ratio_jacobian_parts(inst: Instance) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(alpha, 1 - alpha, g)`` with ``1 - alpha`` summed from the other weights at the largest one."""
    if "Jparts" not in inst._cache:
        a = inst.alpha
        k = a.argmax(-1)
        r = 1.0 - a
        b = np.arange(inst.B)
        rest = a.copy()
        rest[b, k] = 0.0
        r[b, k] = rest.sum(-1)
        inst._cache["Jparts"] = (a, r, _g(inst))
    return inst._cache["Jparts"]


def _top_eigenvalue(a: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Largest eigenvalue of ``diag(a) - a a^T`` (rows of ``a`` on the simplex, ``r = 1 - a``).

    With ``t`` the largest weight (index k), ``c = t r_k`` and ``psi(lam) = sum_{i != k} a_i^2 / (lam - a_i)``,
    the eigenvalue is the root in ``(a_(2), t]`` of ``g(lam) = lam - c + (lam - t) psi(lam)`` (the secular
    equation times ``lam - t``; increasing there). It lies in ``[max(a_(2), max_i a_i r_i), min(t, 2 max_i
    a_i r_i)]`` (interlacing, Rayleigh quotients of e_i, Gershgorin). Each step models ``psi`` by
    ``u + s / (lam - a_(2))`` matching its value and slope at the current point (exact when one other
    weight is positive) and solves the resulting quadratic, falling back to a Newton step (monotone
    from the left, ``g`` being concave) and then to bisection of the bracket. ``lam = t`` when ``t`` is tied.
    """
    B, L = a.shape
    if L == 1:
        return np.zeros(B)
    b = np.arange(B)
    k = a.argmax(-1)
    top = a[b, k]
    rest = a.copy()
    rest[b, k] = -np.inf
    second = rest.max(-1)
    diag = a * r
    lo = np.maximum(second, diag.max(-1))
    hi = np.minimum(top, 2.0 * diag.max(-1))
    lam = np.where(second >= top, top, hi)
    todo = np.nonzero((second < top) & (hi > lo))[0]
    others = a[todo].copy()
    others[np.arange(todo.size), k[todo]] = 0.0
    c, t, p = diag[todo, k[todo]], top[todo], second[todo]
    lo, hi = lo[todo], hi[todo]
    x = hi.copy()
    for _ in range(100):
        if x.size == 0:
            break
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            q = others / (x[:, None] - others)  # a_i / (lam - a_i): no a_i^2 to underflow
            psi = (others * q).sum(-1)
            dpsi = -(q * q).sum(-1)
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
        todo, others, c, t, p, lo, hi, x = (v[keep] for v in (todo, others, c, t, p, lo, hi, x))
    lam[todo] = x
    return lam


@quantity("J_spectral", "B", "||d alpha / d l||_2, the spectral norm of the Jacobian")
def _j_spec(inst: Instance) -> np.ndarray:
    if isinstance(inst.normaliser, RatioNormaliser):
        a, r, g = _ratio_jacobian_parts(inst)
        flat = np.all(g == g[:, :1], axis=-1)  # (log F)' constant on the row (softmax): J = g A
        out = np.empty(inst.B)
        if flat.any():
            rows, step = np.flatnonzero(flat), max(1, 2**16 // inst.L)  # blocks that stay in cache
            for i in range(0, rows.size, step):
                blk = rows[i:i + step]
                out[blk] = np.abs(g[blk, 0]) * _top_eigenvalue(a[blk], r[blk])
        if (~flat).any():
            out[~flat] = np.linalg.norm(_jac(inst)[~flat], ord=2, axis=(1, 2))
        return out
    return np.linalg.norm(_jac(inst), ord=2, axis=(1, 2))


@quantity("J_frobenius", "B", "||d alpha / d l||_F")
def _j_frob(inst: Instance) -> np.ndarray:
    if isinstance(inst.normaliser, RatioNormaliser):
        # column j of J is g_j alpha_j (e_j - alpha): norm |alpha_j g_j| sqrt((1 - alpha_j)^2 + sum_{i != j} alpha_i^2)
        a, r, g = _ratio_jacobian_parts(inst)
        col = np.abs(a * g) * np.hypot(r, _norm_others(a))
        return _scaled_norm(col)
    return np.linalg.norm(_jac(inst), axis=(1, 2))


@quantity("J_row", "B", "max_i ||grad_l alpha_i||_2, the largest row norm of the Jacobian")
def _j_row(inst: Instance) -> np.ndarray:
    if isinstance(inst.normaliser, RatioNormaliser):
        # row i: alpha_i sqrt((1 - alpha_i)^2 g_i^2 + sum_{j != i} alpha_j^2 g_j^2)
        a, r, g = _ratio_jacobian_parts(inst)
        return (a * np.hypot(r * g, _norm_others(np.abs(a * g)))).max(-1)
    return np.linalg.norm(_jac(inst), axis=2).max(-1)


@quantity("J_entry", "B", "max_{i,j} |d alpha_i / d l_j|")
def _j_entry(inst: Instance) -> np.ndarray:
    if isinstance(inst.normaliser, RatioNormaliser):
        # diagonal alpha_i (1 - alpha_i) |g_i|; off-diagonal alpha_i alpha_j |g_j| (i != j)
        a, r, g = _ratio_jacobian_parts(inst)
        diag = (a * r * np.abs(g)).max(-1)
        if inst.L == 1:
            return diag
        q = a * np.abs(g)
        b = np.arange(inst.B)
        ka, kq = a.argmax(-1), q.argmax(-1)
        a2, q2 = a.copy(), q.copy()
        a2[b, ka] = -np.inf
        q2[b, kq] = -np.inf
        off = np.where(ka != kq, a[b, ka] * q[b, kq],
                       np.maximum(a[b, ka] * q2.max(-1), a2.max(-1) * q[b, kq]))
        return np.maximum(diag, off)
    return np.abs(_jac(inst)).max(axis=(1, 2))


@quantity("g_fd", "B", "g(T, eps) = ||alpha(l + eps v) - alpha(l)||_2 / eps with the instance's direction v")
def _g_fd(inst: Instance) -> np.ndarray:
    if "v" not in inst.arrays:
        raise AttnBoundsError("the finite-difference quantity needs a direction: arrays={'v': (B, L) unit vectors}")
    eps = inst.param("eps")
    shifted = inst.logits + eps[:, None] * inst.arrays["v"]
    return np.linalg.norm(inst.normaliser.weights(shifted) - inst.alpha, axis=-1) / eps


@quantity("dF_max", "B", "max_j |F'(l_j)| / sum_k F(l_k) = max_j alpha_j |g_j|, g = (log F)'")
def _df_max(inst: Instance) -> np.ndarray:
    return np.abs(inst.alpha * _g(inst)).max(-1)


@quantity("F_l2", "B", "||F||_2 / sum_k F(l_k) = ||alpha||_2")
def _f_l2(inst: Instance) -> np.ndarray:
    return _scaled_norm(inst.alpha)


@quantity("dF_l2", "B", "||F'||_2 / sum_k F(l_k) = ||alpha * g||_2")
def _df_l2(inst: Instance) -> np.ndarray:
    return _scaled_norm(inst.alpha * _g(inst))


@quantity("g_absmax", "B", "max_j |(log F)'(l_j)|")
def _g_absmax(inst: Instance) -> np.ndarray:
    return np.abs(_g(inst)).max(-1)


# -- Discussion remark: multi-head coverage -----------------------------------------------------
@quantity("coverage_enum", "B", "P(a token is covered by at least one of H independent heads), by enumerating "
          "all 2^H head outcomes (not by the closed form)")
def _coverage(inst: Instance) -> np.ndarray:
    p, H = inst.param("p"), inst.param("H").astype(int)
    out = np.empty(inst.B)
    for h in np.unique(H):
        outcomes = np.array(np.meshgrid(*[[0, 1]] * h, indexing="ij")).reshape(h, -1).T == 1  # (2^h, h)
        covered = outcomes.any(axis=1)
        rows = np.nonzero(H == h)[0]
        for chunk in np.array_split(rows, max(1, rows.size * outcomes.size // 2**22)):
            pc = p[chunk, None, None]
            prob = np.prod(np.where(outcomes[None], pc, 1 - pc), axis=2)  # (b, 2^h)
            out[chunk] = prob[:, covered].sum(-1)
    return out
