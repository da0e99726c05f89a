"""Batched random search over the adversarial families of :mod:`attnbounds.theory.families`.

Each round draws a :class:`~attnbounds.theory.families.Spec` (sizes, logit and embedding families, scales,
normaliser, temperature, sphere parameters) from :func:`attnbounds.theory.families.random_spec`, adjusted to
the statement's cost class (short sequences where an expectation is enumerated, few tokens and
dimensions for sphere expectations), builds a batch of instances with one seed and evaluates it
with the statement's vectorised evaluator.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from attnbounds.theory.families import Spec, build, random_spec
from attnbounds.theory.instance import Instance
from attnbounds.theory.quantities._subsets import enumerable
from attnbounds.theory.search.budget import Plan
from attnbounds.theory.search.tracker import Tracker
from attnbounds.theory.statement import Statement



def draw_spec(rng: np.random.Generator, statement: Statement, plan: Plan) -> Spec:
    """One random spec for the statement, shaped by its cost class (module docstring)."""
    spec = random_spec(rng, statement, B=plan.batch, max_L=plan.max_L)
    if plan.cost_class == "subsets":
        L = int(rng.integers(2, plan.max_L + 1))
        N = int(rng.integers(1, L + 1))
        while not enumerable((1,) * L, N):
            N = int(rng.integers(1, L + 1))
        spec = spec.with_(L=L, N=N)
    elif plan.cost_class == "sphere":
        L = int(rng.integers(2, plan.max_L + 1))
        spec = spec.with_(L=L, N=int(rng.integers(1, L + 1)), d=int(rng.choice([2, 3, 4])),
                          mc_draws=int(rng.choice([400, 2000])))
    return spec


def build_batch(statement: Statement, spec: Spec, tracker: Tracker, method: str) -> Instance | None:
    """``families.build`` under the tracker's guard: None when the spec is infeasible (an unattainable
    separation, weights undefined on the drawn logits: skipped) or building fails (an error, counted)."""
    with tracker.guard(method):
        return build(statement, spec)
    return None


def run(statement: Statement, plan: Plan, rng: np.random.Generator, tracker: Tracker, progress: Any = None) -> None:
    """``plan.random_batches`` rounds of draw, build, evaluate (recorded under method ``random``)."""
    for _ in range(plan.random_batches):
        inst = build_batch(statement, draw_spec(rng, statement, plan), tracker, "random")
        if inst is not None:
            tracker.evaluate(inst, "random")
        if progress is not None:
            progress.update(1)
