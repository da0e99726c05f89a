"""Gradient ascent of the normalised gap ``(lhs - rhs) / (|lhs| + |rhs|)`` with torch autograd.

Starts: the tightest instances the random search found (each replicated with small random
perturbations into a batch) and fresh random batches. Variables are unconstrained and the
hypotheses hold by construction: weights come from the normaliser (on the simplex, top-N set
recomputed at every step), logits from ``q . k`` where the statement reads keys, temperatures
as ``exp(log T)``, finite-difference directions normalised. Snapshots along the way are turned
back into float :class:`~attnbounds.theory.mathematics.instance.Instance` batches and evaluated by the statement's own
evaluator; only those numbers are recorded.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np

from attnbounds.theory.mathematics.errors import AttnBoundsError, NotApplicable
from attnbounds.theory.mathematics.families import needs
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.normalisers import Normaliser, RatioNormaliser, make, softmax
from attnbounds.theory.mathematics.quantities import QUANTITIES
from attnbounds.theory.mathematics.quantities import torch_state
from attnbounds.theory.mathematics.quantities._subsets import enumerable
from attnbounds.theory.deciding.search import random_search, torch_eval
from attnbounds.theory.deciding.search.budget import Plan
from attnbounds.theory.deciding.search.tracker import Tracker
from attnbounds.theory.mathematics.statement import Statement

#: Adam learning rate on the (rescaled) variables
LR = 0.05
#: snapshots evaluated per start (evenly spaced, the last at the final step)
SNAPSHOTS = 4
#: a tight instance with more columns than this is not a gradient start (its torch forms cost O(K^2) to O(K^3))
MAX_START_COLUMNS = 64
#: an expectation start whose random subsets have more count vectors (times columns) than this is left out
MAX_START_VECTORS = 1 << 12


def supports(statement: Statement) -> bool:
    """Whether the statement has a torch path (see :mod:`attnbounds.theory.deciding.search.torch_eval`) and torch imports."""
    return unsupported_reason(statement) is None


def unsupported_reason(statement: Statement) -> str | None:
    """Why gradient ascent cannot run on the statement, or None."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return "torch is not installed"
    if not statement.certifiable:
        return "the statement's normaliser is a Python callable without log F (gradient ascent steps log F)"
    return None if torch_eval.supports(statement) else "no torch form for some quantity of the statement"


def _weights_only(statement: Statement) -> bool:
    """Only the weights matter: parametrise them as softmax(z) whatever the normaliser."""
    return not (any(h.normaliser == "form" for h in statement.hypotheses)  # softmax(z) gives any weights, not any F
                or "T" in statement.parameters()  # the relation reads the normaliser's temperature
                or any(QUANTITIES[q].normaliser or QUANTITIES[q].needs & {"logits", "qk"}
                       for q in statement.bindings.values()))


def _perturbed(inst: Instance, copies: int, rng: np.random.Generator) -> Instance:
    """``copies`` instances: ``inst`` itself, then copies with relative noise of log-uniform size."""
    idx = np.zeros(copies, dtype=int)
    batch = inst.take(idx)
    size = 10 ** rng.uniform(-4, 0, (copies, 1))
    size[0] = 0.0

    def jitter(a: np.ndarray | None) -> np.ndarray | None:
        if a is None:
            return None
        scale = np.abs(a).max() + 1e-12
        noise = rng.standard_normal(a.shape) * scale * size.reshape((copies,) + (1,) * (a.ndim - 1))
        return a + noise

    params = {k: v for k, v in batch.params.items() if not (batch.normaliser and k in batch.normaliser.params)}
    x = jitter(batch.x)
    common: dict[str, Any] = {"x": x, "N": batch.N, "arrays": batch.arrays, "counts": batch.counts, **params}
    if batch.q is not None:
        return Instance.from_qk(jitter(batch.q), jitter(batch.k), cast(Normaliser, batch.normaliser), **common)
    if batch.normaliser is None:
        logits = np.log(np.maximum(batch.alpha, 1e-300))
        return Instance.from_logits(jitter(logits), softmax(1.0), **common)
    return Instance.from_logits(jitter(batch.logits), batch.normaliser, **common)


class _Problem:
    """The variables of one batch and the maps from them to a torch State and to a float Instance."""

    def __init__(self, statement: Statement, inst: Instance):
        import torch

        self.torch = torch
        self.statement = statement
        self.base = inst
        self.weights_only = _weights_only(statement)
        need = needs(statement)
        n: Any = inst.normaliser  # a RatioNormaliser unless weights_only (checked below)
        if not self.weights_only and not isinstance(n, RatioNormaliser):  # a start the ascent cannot take: skipped
            raise NotApplicable("gradient search needs a normaliser of the form F / sum F")
        self.name = "softmax" if self.weights_only else n.name
        self.extra = {} if self.weights_only else {k: v for k, v in n.params.items() if k != "T"}
        reads_extremes = any(QUANTITIES[q].F_extremes for q in statement.bindings.values())  # F on [-a, a] moves with T
        self.free_T = not self.weights_only and not reads_extremes
        T0 = np.broadcast_to(np.asarray(1.0 if self.weights_only else n.params["T"], dtype=np.float64), (inst.B,))
        self.T_fixed = float(T0[0])
        t = lambda a: torch.tensor(np.asarray(a, dtype=np.float64))  # noqa: E731
        self.vars: dict[str, Any] = {}  # torch tensors
        self.scale: dict[str, Any] = {}

        def var(name: str, value: np.ndarray, unit: np.ndarray | None = None) -> None:
            # Adam moves each variable by ~LR of its unit per step: the unit is per instance
            if unit is None:
                unit = np.abs(value.reshape(inst.B, -1)).max(-1)
            unit = np.where(np.isfinite(unit) & (unit > 0), unit, 1.0).reshape((inst.B,) + (1,) * (value.ndim - 1))
            self.scale[name] = t(unit)
            self.vars[name] = t(value / unit).requires_grad_(True)

        if "qk" in need:
            # logits q.k move by about T per step
            q0, k0 = cast(np.ndarray, inst.q), cast(np.ndarray, inst.k)
            qn, kn = np.linalg.norm(q0, axis=-1), np.linalg.norm(k0, axis=-1).max(-1)
            shrink = np.minimum(1.0, np.sqrt(T0 / np.maximum(qn * kn, 1e-300)))
            var("q", q0, np.maximum(qn, 1e-300) * shrink)
            var("k", k0, np.maximum(kn, 1e-300) * shrink)
        elif self.weights_only:
            var("z", np.log(np.maximum(inst.alpha, 1e-300)), np.ones(inst.B))
        else:
            var("z", cast(np.ndarray, inst.logits), T0)  # logits in units of the temperature
        if self.free_T:
            self.vars["logT"] = t(np.log(T0)).requires_grad_(True)
            self.scale["logT"] = t(np.ones(inst.B))
        if "x" in need and inst.x is not None:
            var("x", inst.x)
        if "fd" in need:
            var("v", inst.arrays["v"], np.ones(inst.B))
        own = set(n.params) if n is not None else set()
        self.params = {k: t(v) for k, v in inst.params.items() if k not in own}  # eps, a, kappa, ...
        for k, v in statement.defaults.items():  # constants the statement fills in (quantities are recomputed)
            if k in statement.parameters() and k not in self.params and not isinstance(v, str):
                self.params[k] = t(np.full(inst.B, float(v)))

    def value(self, name: str) -> Any:
        return self.vars[name] * self.scale[name] if name in self.vars else None

    def T(self):
        torch = self.torch
        if self.free_T:
            return self.vars["logT"].exp()
        return torch.full((self.base.B,), self.T_fixed, dtype=torch.float64)

    def state(self) -> torch_state.State:
        torch = self.torch
        T = self.T()
        q, k = self.value("q"), self.value("k")
        logits = torch.einsum("bd,bld->bl", q, k) if q is not None else self.value("z")
        critical: tuple[float, ...] = ()
        if self.weights_only:
            log_F, dlog_F = (lambda lg: lg), (lambda lg: torch.ones_like(lg))
        else:
            normaliser = cast(RatioNormaliser, make(self.name, T=self.T_fixed, **self.extra))
            log_F, dlog_F = torch_state.ratio_fns(normaliser, T)
            if not self.free_T:  # Lemma 1's constants: the extrema of log F may be interior
                critical = self.critical_points(normaliser)
        counts = self.base.counts
        if counts is None:
            weights = lambda lg: torch.softmax(log_F(lg), dim=-1)  # noqa: E731
        else:  # token classes: F_k / sum_j m_j F_j
            log_m = torch.log(torch.as_tensor(counts, dtype=torch.float64))
            m = torch.as_tensor(counts, dtype=torch.float64).clamp(min=1.0)
            weights = lambda lg: torch.softmax(log_F(lg) + log_m, dim=-1) / m  # noqa: E731
        params = dict(self.params)
        if not self.weights_only:
            params["T"] = T
        return torch_state.State(alpha=weights(logits), logits=logits, N=self.base.N, params=params,
                                x=self.value("x"), q=q, k=k, v=self.value("v"), weights_fn=weights, log_F=log_F,
                                dlog_F=dlog_F, critical_points=critical, counts=counts,
                                selection=None if counts is None else torch.as_tensor(self.base.mask))

    def critical_points(self, normaliser: RatioNormaliser) -> tuple[float, ...]:
        if "critical" not in self.__dict__:
            try:
                self.__dict__["critical"] = tuple(float(c) for c in normaliser._critical_points)
            except AttnBoundsError:
                self.__dict__["critical"] = ()
        return self.__dict__["critical"]

    def instance(self) -> Instance | None:
        """The current variables as a float instance (rows with non-finite values dropped)."""
        get = lambda name: None if name not in self.vars else self.value(name).detach().numpy()  # noqa: E731
        arrays: dict[str, Any] = {k: get(k) for k in ("z", "q", "k", "x", "v")}
        T = np.exp(self.vars["logT"].detach().numpy()) if self.free_T else None
        finite = np.ones(self.base.B, dtype=bool)
        for a in (*arrays.values(), T):
            if a is not None:
                finite &= np.isfinite(a.reshape(self.base.B, -1)).all(-1)
        if T is not None:
            finite &= (T > 0) & (T < 1e300)
        if not finite.any():
            return None
        rows = np.flatnonzero(finite)
        pick = lambda a: None if a is None else a[rows]  # noqa: E731
        Tn = self.T_fixed if T is None else T[rows]
        normaliser = softmax(1.0) if self.weights_only else make(self.name, T=Tn, **self.extra)
        params = {k: v[rows] for k, v in self.base.params.items() if k not in normaliser.params}
        counts = pick(self.base.counts)
        mult = np.ones(arrays["v"][rows].shape) if arrays["v"] is not None and counts is None else counts
        extra = {"v": arrays["v"][rows] / np.sqrt((mult * arrays["v"][rows] ** 2).sum(-1, keepdims=True))} \
            if arrays["v"] is not None else {k: v[rows] for k, v in self.base.arrays.items()}
        if arrays["q"] is not None:
            return Instance.from_qk(arrays["q"][rows], arrays["k"][rows], normaliser, x=pick(arrays["x"]),
                                    N=self.base.N, arrays=extra, counts=counts, **params)
        x = pick(arrays["x"]) if arrays["x"] is not None else pick(self.base.x)
        return Instance.from_logits(arrays["z"][rows], normaliser, x=x, N=self.base.N, arrays=extra, counts=counts,
                                    **params)


class _Adam:
    """Adam (Kingma & Ba 2015) on a list of leaf tensors; non-finite gradient entries count as 0."""

    def __init__(self, params: list, lr: float = LR, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8):
        import torch

        self.params, self.lr, self.betas, self.eps, self.t = params, lr, betas, eps, 0
        self.m = [torch.zeros_like(p) for p in params]
        self.v = [torch.zeros_like(p) for p in params]

    def step(self, grads: tuple) -> None:
        import torch

        self.t += 1
        b1, b2 = self.betas
        with torch.no_grad():
            for p, g, m, v in zip(self.params, grads, self.m, self.v):
                if g is None:
                    continue
                g = torch.nan_to_num(g, nan=0.0, posinf=0.0, neginf=0.0)
                m.mul_(b1).add_(g, alpha=1 - b1)
                v.mul_(b2).addcmul_(g, g, value=1 - b2)
                p.sub_(self.lr * (m / (1 - b1**self.t)) / ((v / (1 - b2**self.t)).sqrt() + self.eps))


def optimise(statement: Statement, inst: Instance, steps: int, tracker: Tracker) -> None:
    """Adam on the normalised gap from the batch ``inst``; ``SNAPSHOTS`` float evaluations along the way.

    A start that cannot be set up or a step that fails is counted by the tracker's guard (skipped when
    not applicable, an error otherwise) and ends this start only."""
    prob = None
    with tracker.guard("gradient"):
        prob = _Problem(statement, inst)
    if prob is None:
        return
    torch = prob.torch
    adam = _Adam(list(prob.vars.values()))
    marks = {max(1, round(steps * (i + 1) / SNAPSHOTS)) for i in range(SNAPSHOTS)}
    for step in range(1, steps + 1):
        g = None
        with tracker.guard("gradient"):
            g = torch_eval.gap(statement, prob.state())
        if g is None:
            return
        loss = -torch.nan_to_num(g, nan=0.0, posinf=0.0, neginf=0.0).sum()
        if loss.requires_grad:
            grads = torch.autograd.grad(loss, list(prob.vars.values()), allow_unused=True)
            adam.step(grads)
        if step in marks:
            snap = None
            with tracker.guard("gradient"):
                snap = prob.instance()
            if snap is not None:
                tracker.evaluate(snap, "gradient")


def _enumerable(batch: Instance) -> bool:
    """Whether every row's N-subsets are few enough to enumerate, counted by class (a token-class row of 10^7
    tokens in four classes has a handful of count vectors)."""
    rows = {(1,) * batch.L} if batch.counts is None else {tuple(int(c) for c in row) for row in batch.counts}
    return all(enumerable(m, cast(int, batch.N)) for m in rows)


def run(statement: Statement, plan: Plan, seed: tuple[int, ...], tracker: Tracker, pool: list[Instance],
        indices: range | None = None, progress: Any = None) -> None:
    """The starts ``indices`` of ``plan.gradient_starts`` (all by default): even starts perturb the tightest
    instances found (``pool``), odd ones draw fresh batches; start i draws from ``SeedSequence([*seed, i])``."""
    if plan.gradient_starts == 0 or not supports(statement):
        if plan.gradient_starts and not supports(statement):
            tracker.method("gradient").stopped = unsupported_reason(statement) or "not supported"
        return
    fresh_plan = Plan(**{**cast(dict[str, Any], plan.to_dict()), "batch": plan.gradient_batch,
                         "max_L": min(plan.max_L, plan.cost.gradient_max_L)})
    subsets = plan.cost.draws == "enumerable"  # expectations over random N-subsets: starts that stay enumerable
    starts = [p for p in pool if p.K <= MAX_START_COLUMNS and (not subsets or enumerable(
        tuple(int(c) for c in (p.counts[0] if p.counts is not None else np.ones(p.K, dtype=int))), cast(int, p.N), 1,
        MAX_START_VECTORS))]
    for i in range(plan.gradient_starts) if indices is None else indices:
        if tracker.expired("gradient"):
            continue
        rng = np.random.default_rng(np.random.SeedSequence([*seed, i]))
        batch = None
        if i % 2 == 0 and starts:
            start = starts[(i // 2) % len(starts)]
            copies = max(1, min(plan.gradient_batch, (1 << 16) // start.K**2))  # torch forms are O(B K^2) and more
            with tracker.guard("gradient"):
                batch = _perturbed(start, copies, rng)
        else:
            batch = random_search.build_batch(statement, random_search.draw_spec(rng, statement, fresh_plan), tracker,
                                              "gradient")
        if batch is not None and (not subsets or _enumerable(batch)):
            optimise(statement, batch, plan.gradient_steps, tracker)
        if progress is not None:
            progress.update(1)
