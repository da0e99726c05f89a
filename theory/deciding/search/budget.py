"""Turning a budget in seconds into a fixed amount of work, so results do not depend on machine speed.

``search(statement, budget_s=..., seed=...)`` never looks at the clock to decide what to do: the
budget is converted by :func:`plan` into counts (random batches and their size, gradient starts
and steps, targeted examples, shrink evaluations) through the work rates of the statement's cost class
(:data:`attnbounds.theory.mathematics.quantities.COSTS`, :func:`attnbounds.theory.mathematics.families.cost`), calibrated on
the reference machine (2 CPU cores, one core per search) so that the work takes about
``budget_s`` seconds there. The same ``(statement, budget_s, seed)`` therefore gives the same
result everywhere; a slower machine just takes longer. ``bench/calibrate.py`` re-measures the
rates (the seconds one unit of work takes per cost class).

The cost classes group statements by what one evaluation costs:

- ``weights``: weights (and logits) only, e.g. Lemma 1, Corollary 1, the multi-head remark;
- ``softmax-jacobian``: Jacobian norms of softmax (Corollary 3), closed forms in O(L);
- ``jacobian``: Jacobian norms of any F / sum F (Lemma 2): an SVD per instance when (log F)' varies;
- ``tokens``: token vectors (Theorem 1 with a fixed top-N set);
- ``subsets``: expectations over random N-subsets (Theorem 1 random, Corollary 2), enumerated;
- ``sphere``: expectations over random sphere embeddings (Theorem 2), Monte Carlo.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from attnbounds.theory.mathematics.errors import InvalidArgument
from attnbounds.theory.mathematics.families import cost
from attnbounds.theory.mathematics.quantities import COSTS, Cost
from attnbounds.theory.mathematics.statement import Statement

#: per-reading budget (seconds) that keeps ``attnbounds verify`` over every reading under 10 minutes
DEFAULT_BUDGET_S = 7.0
#: the share of the budget a reading's search gets when its derivation replays completely (the verdict is then the
#: proof's, and the search a cross-check that also finds the tightest instance the record shows), and the relaxation
#: prover once a counterexample is certified (either contradicting the verdict is an internal contradiction, ERROR);
#: ``attnbounds verify --cross-check 1`` gives both the whole budget
CROSS_CHECK_SHARE = 0.3
#: the wall-clock ceiling of a search: planned work not started by ``CEILING * budget_s + CEILING_GRACE_S`` seconds
#: after the search began is skipped and counted as cut (the plan, not the clock, decides the work otherwise). The
#: grace covers the fixed costs that dominate small budgets (first calls of generated kernels, torch's warm-up)
CEILING = 10.0
CEILING_GRACE_S = 20.0


def deadline_s(budget_s: float) -> float:
    """Seconds a search of ``budget_s`` may run before the ceiling cuts its remaining work."""
    return CEILING * float(budget_s) + CEILING_GRACE_S
#: the largest budget accepted: a day per reading (the work grows with the budget, the reach with its square)
MAX_BUDGET_S = 86400.0
#: shares of the budget per method; random search gets the rest (45 % with gradient and without refine)
SHARES = {"gradient": 0.30, "targeted": 0.15, "shrink": 0.10, "refine": 0.15}
#: share of the random phase spent on token-class batches (the rest on dense batches)
CLASS_SHARE = 0.5
#: a dense random batch holds at most this many tokens (B x L)
TOKENS_PER_BATCH = 1 << 18
#: the longest token-class context any search draws
LONGEST = 10**12
#: Monte Carlo draws when re-evaluating the tightest instances of a sphere expectation (half-width ~0.012)
REFINE_DRAWS = 50_000


def check_budget(budget_s: object, name: str = "budget") -> None:
    """Refuse (InvalidArgument) a budget that is not a number of seconds in (0, :data:`MAX_BUDGET_S`]."""
    if isinstance(budget_s, bool) or not isinstance(budget_s, (int, float)) or not 0 < budget_s <= MAX_BUDGET_S:
        raise InvalidArgument(f"{name} must be a number of seconds in (0, {MAX_BUDGET_S:g}] (at most a day per "
                              f"reading), got {budget_s!r}")


def check_share(share: object, name: str = "cross_check") -> None:
    """Refuse (InvalidArgument) a share of the budget that is not a number in (0, 1]."""
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share <= 1:
        raise InvalidArgument(f"{name} must be a share of the budget in (0, 1] (1: the whole budget), got {share!r}")


def reach(rates: Cost, budget_s: float) -> int:
    """The longest token-class context searched for ``budget_s``: the class's reach at the default budget,
    times the square of the budget ratio (twice the budget reaches four times further), at least 10^4
    (when the class has token classes), at most :data:`LONGEST`."""
    if rates.class_per_s == 0:
        return rates.max_class_L
    return int(min(LONGEST, max(10**4, rates.max_class_L * (budget_s / DEFAULT_BUDGET_S) ** 2)))


@dataclass(frozen=True)
class Plan:
    """The work a search does: counts only, derived from ``(cost class, budget_s, gradient support)``."""

    cost_class: str
    batch: int
    max_L: int
    random_batches: int
    class_batches: int
    max_class_L: int
    gradient_starts: int
    gradient_batch: int
    gradient_steps: int
    targeted_examples: int
    shrink_evaluations: int
    refine_evaluations: int

    def to_dict(self) -> dict[str, int | str]:
        return asdict(self)

    @property
    def cost(self) -> Cost:
        """The cost class the plan was made for (its rates)."""
        return COSTS[self.cost_class]


def plan(statement: Statement, budget_s: float, *, gradient: bool) -> Plan:
    """The fixed amount of work for ``budget_s`` seconds (module docstring); at least one random batch."""
    check_budget(budget_s, "budget_s")
    r = cost(statement)
    use_gradient = gradient and r.gradient_per_s > 0
    others = SHARES["targeted"] + SHARES["shrink"] + (SHARES["gradient"] if use_gradient else 0.0) + (
        SHARES["refine"] if r.refine_per_s > 0 else 0.0)
    random_share = 1.0 - others
    class_share = CLASS_SHARE if r.class_per_s > 0 else 0.0
    if not statement.certifiable:  # a Python callable runs through torch a batch at a time: slower
        random_share *= r.callable_rate
    return Plan(
        cost_class=r.name,
        batch=r.batch,
        max_L=r.max_L,
        random_batches=max(1, round(budget_s * random_share * (1 - class_share) * r.random_per_s)),
        class_batches=round(budget_s * random_share * class_share * r.class_per_s),
        max_class_L=reach(r, budget_s),
        gradient_starts=round(budget_s * SHARES["gradient"] * r.gradient_per_s) if use_gradient else 0,
        gradient_batch=r.gradient_batch,
        gradient_steps=r.gradient_steps,
        targeted_examples=round(budget_s * SHARES["targeted"] * r.targeted_per_s),
        shrink_evaluations=round(budget_s * SHARES["shrink"] * r.shrink_per_s),
        refine_evaluations=round(budget_s * SHARES["refine"] * r.refine_per_s),
    )
