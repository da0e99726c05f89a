"""Batched random search over the adversarial families of :mod:`theory.families`.

Each round draws a :class:`~theory.families.Spec` (sizes, logit and embedding families, scales,
normaliser, temperature, sphere parameters) from :func:`theory.families.random_spec`, adjusted to
the statement's cost class (short sequences where an expectation is enumerated, few tokens and
dimensions for sphere expectations), builds a batch of instances with one seed and evaluates it
with the statement's vectorised evaluator.
"""

from __future__ import annotations


import numpy as np
from scipy.special import comb

from theory.errors import AttnBoundsError
from theory.families import Spec, build, random_spec
from theory.instance import Instance
from theory.quantities import ENUMERATION_LIMIT
from theory.search.budget import Plan
from theory.search.tracker import Tracker
from theory.statement import Statement



def draw_spec(rng: np.random.Generator, statement: Statement, plan: Plan) -> Spec:
    """One random spec for the statement, shaped by its cost class (module docstring)."""
    spec = random_spec(rng, statement, B=plan.batch, max_L=plan.max_L)
    if plan.cost_class == "subsets":
        L = int(rng.integers(2, plan.max_L + 1))
        N = int(rng.integers(1, L + 1))
        while comb(L, N, exact=True) > ENUMERATION_LIMIT:
            N = int(rng.integers(1, L + 1))
        spec = spec.with_(L=L, N=N)
    elif plan.cost_class == "sphere":
        L = int(rng.integers(2, plan.max_L + 1))
        spec = spec.with_(L=L, N=int(rng.integers(1, L + 1)), d=int(rng.choice([2, 3, 4])),
                          mc_draws=int(rng.choice([400, 2000])))
    return spec


def build_batch(statement: Statement, spec: Spec) -> Instance | None:
    """``families.build``, or None when the spec is infeasible (e.g. an unattainable separation)."""
    try:
        with np.errstate(all="ignore"):
            return build(statement, spec)
    except AttnBoundsError:
        return None


def run(statement: Statement, plan: Plan, rng: np.random.Generator, tracker: Tracker, progress=None) -> None:
    """``plan.random_batches`` rounds of draw, build, evaluate (recorded under method ``random``)."""
    for _ in range(plan.random_batches):
        inst = build_batch(statement, draw_spec(rng, statement, plan))
        if inst is None:
            tracker.method("random").errors += 1
        else:
            tracker.evaluate(inst, "random")
        if progress is not None:
            progress.update(1)
