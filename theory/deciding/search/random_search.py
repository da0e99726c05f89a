"""Batched random search over the adversarial families of :mod:`attnbounds.theory.mathematics.families`.

Each round draws a :class:`~attnbounds.theory.mathematics.families.Spec` (sizes, logit and embedding families, scales,
normaliser, temperature, sphere parameters) from :func:`attnbounds.theory.mathematics.families.random_spec`, adjusted to
the statement's cost class, builds a batch of instances with one seed and evaluates it with the
statement's vectorised evaluator. Half of the rounds are dense (L log-uniform up to the class's dense
limit), half are token classes (one against the rest, two levels, uniform and near-uniform, extremes of
F, random shares; L log-uniform up to the plan's reach, 10^6 at the default budget).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from attnbounds.theory.mathematics.families import Spec, build, random_spec, within_ranges
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.quantities._subsets import enumerable
from attnbounds.theory.deciding.search.budget import TOKENS_PER_BATCH, Plan
from attnbounds.theory.deciding.search.tracker import Tracker
from attnbounds.theory.mathematics.statement import Statement



def draw_spec(rng: np.random.Generator, statement: Statement, plan: Plan, *, classes: bool = False,
              stratum: tuple[int, int] | None = None) -> Spec:
    """One random spec for the statement, shaped by its cost class: dense L log-uniform up to ``plan.max_L``
    (the batch shrinks so that it holds at most :data:`~attnbounds.theory.deciding.search.budget.TOKENS_PER_BATCH`
    tokens), or (``classes``) up to six token classes with L log-uniform up to ``plan.max_class_L``."""
    spec = random_spec(rng, statement, B=plan.batch, max_L=plan.max_class_L if classes else plan.max_L,
                       classes=classes, stratum=stratum)
    if not classes:  # Jacobian norms cost O(L^2) to O(L^3) per instance, the rest O(L)
        per = spec.L**2 if plan.cost.quadratic else spec.L
        spec = spec.with_(B=max(1, min(plan.batch, TOKENS_PER_BATCH // per)))
    if plan.cost.draws == "enumerable":
        if classes:  # a few classes and few selected tokens: the count vectors stay enumerable
            K = min(spec.K, 3)
            spec = spec.with_(K=K, L=max(spec.L, K), N=min(spec.N, int(rng.integers(1, 31)), max(spec.L, K)))
        else:
            L = int(rng.integers(2, plan.max_L + 1))
            N = int(rng.integers(1, L + 1))
            while not enumerable((1,) * L, N):
                N = int(rng.integers(1, L + 1))
            spec = spec.with_(L=L, N=N, B=plan.batch)
    elif plan.cost.draws == "sampled":
        L = int(rng.integers(2, plan.max_L + 1))
        spec = spec.with_(L=L, N=int(rng.integers(1, L + 1)), d=int(rng.choice([2, 3, 4])),
                          mc_draws=int(rng.choice([400, 2000])), K=0, B=plan.batch)
    if classes and not statement.certifiable:  # a Python callable sees the classes written out: fewer rows of long ones
        from attnbounds.theory.mathematics.callables import MAX_EXPANDED

        spec = spec.with_(B=max(1, min(spec.B, MAX_EXPANDED // max(spec.L, 1))))
    if statement.ranges:  # the statement's ranges (L, T, ...) hold whatever the cost class did to the sizes
        spec = within_ranges(rng, statement, spec)
        if not spec.K and spec.L > 4 * max(plan.max_L, 1):  # a range of lengths beyond the dense limit: token classes
            spec = spec.with_(K=min(spec.L, int(rng.integers(1, 7))), classes="random", B=min(spec.B, plan.batch))
        elif not spec.K:
            per = spec.L**2 if plan.cost.quadratic else spec.L
            spec = spec.with_(B=max(1, min(spec.B, TOKENS_PER_BATCH // per)))
    return spec


def build_batch(statement: Statement, spec: Spec, tracker: Tracker, method: str) -> Instance | None:
    """``families.build`` under the tracker's guard: None when the spec is infeasible (an unattainable
    separation, weights undefined on the drawn logits: skipped) or building fails (an error, counted)."""
    with tracker.guard(method):
        return build(statement, spec)
    return None


def rounds(plan: Plan) -> list[tuple[str, int]]:
    """Every round of the random phase as ``(method, stratum index)``: ``plan.random_batches`` dense rounds
    (``random``) and ``plan.class_batches`` token-class rounds (``classes``), interleaved."""
    total = plan.random_batches + plan.class_batches
    done = {"random": 0, "classes": 0}
    out = []
    for k in range(total):
        classes = plan.class_batches > 0 and (k * plan.class_batches) // total != ((k + 1) * plan.class_batches) // total
        method = "classes" if classes else "random"
        out.append((method, done[method]))
        done[method] += 1
    return out


def run(statement: Statement, plan: Plan, seed: tuple[int, ...], tracker: Tracker, indices: range | None = None,
        progress: Any = None) -> None:
    """The rounds ``indices`` of the random phase (all by default): draw (round k from its own generator,
    ``SeedSequence([*seed, k])``, so any split of the rounds gives the same draws), build, evaluate."""
    plan_rounds = rounds(plan)
    for k in range(len(plan_rounds)) if indices is None else indices:
        method, j = plan_rounds[k]
        if tracker.expired(method):  # past the wall-clock ceiling: counted as cut, not run
            continue
        t = time.perf_counter()
        classes = method == "classes"
        n = plan.class_batches if classes else plan.random_batches
        rng = np.random.default_rng(np.random.SeedSequence([*seed, k]))
        spec = draw_spec(rng, statement, plan, classes=classes, stratum=(j, n))  # every scale of L in turn
        inst = build_batch(statement, spec, tracker, method)
        if inst is not None:
            tracker.evaluate(inst, method)
        tracker.add_seconds(method, time.perf_counter() - t)
        if progress is not None:
            progress.update(1)
