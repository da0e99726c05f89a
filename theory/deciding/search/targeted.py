"""Hypothesis-driven search over small, readable instances, guided by ``target()``.

Instances have at most 6 tokens and 3 dimensions, small integer logits and embeddings times a
scale drawn from a few powers of ten, temperatures from a short list: what hypothesis shrinks
towards is then a counterexample a reader can check by hand. ``hypothesis.find`` runs with the
search's seed, no example database and ``plan.targeted_examples`` examples; ``target()`` is fed
the negated relative margin, so generation drifts towards violations, and a violation found is
shrunk by hypothesis before it is returned.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np

from attnbounds.theory.mathematics.errors import AttnBoundsError, NotApplicable
from attnbounds.theory.mathematics.families import admissible_normalisers, feasible_delta, logit_bound, needs
from attnbounds.theory.mathematics.hypotheses import smallest_length
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.normalisers import constructor_parameters, make
from attnbounds.theory.mathematics.quantities import sphere_embeddings
from attnbounds.theory.deciding.search.budget import Plan
from attnbounds.theory.deciding.search.tracker import Tracker
from attnbounds.theory.mathematics.statement import Statement

MAX_L = 6
MAX_D = 3
SCALES = (1.0, 0.1, 10.0, 0.01, 100.0, 1e-3, 1e3)
TEMPERATURES = (1.0, 0.5, 2.0, 0.1, 0.25, 10.0, 0.01, 100.0)
#: a found violation must have a relative margin below this (clearly not rounding)
CLEAR = 1e-6


def instances(statement: Statement) -> Any:
    """A hypothesis strategy of small readable B = 1 instances with what ``statement`` reads."""
    from hypothesis import strategies as hs

    need = needs(statement)
    min_L = max(smallest_length(statement.hypotheses), 2 if need & {"x", "sphere"} else 1)
    names = admissible_normalisers(statement)
    lo_L, hi_L = _lengths(statement, min_L)
    fixed, ranges = statement.fixed, statement.ranges
    temperatures: tuple[float, ...] = TEMPERATURES
    scales: tuple[float, ...] = SCALES
    a = logit_bound(statement)
    if a is not None:  # the logits -4..4 times a/4: the ends +-a of the bound itself among them
        scales = (a / 4, *SCALES)
    if "T" in fixed:
        temperatures = (float(fixed["T"]),)
    elif "T" in ranges:
        lo_T, hi_T = ranges["T"]
        temperatures = tuple(t for t in TEMPERATURES if lo_T <= t <= hi_T) or (float(lo_T), float(hi_T))

    @hs.composite
    def draw(draw: Any) -> Instance:
        from hypothesis import reject

        try:
            return _draw(draw)
        except NotApplicable:
            reject()

    def _draw(draw: Any) -> Instance:
        L = draw(hs.integers(lo_L, hi_L))
        N = draw(hs.integers(1, L))
        d = draw(hs.integers(2 if "sphere" in need else 1, MAX_D))
        small = lambda shape: np.array(draw(hs.lists(hs.integers(-4, 4), min_size=int(np.prod(shape)),  # noqa: E731
                                                     max_size=int(np.prod(shape)))), dtype=float).reshape(shape)
        name = draw(hs.sampled_from(names))
        T = draw(hs.sampled_from(temperatures))
        normaliser = make(name, T=T)
        kw: dict[str, Any] = {"N": N}
        params: dict[str, Any] = {}
        arrays: dict[str, Any] = {}
        if "x" in need:
            kw["x"] = small((1, L, d)) * draw(hs.sampled_from(SCALES))
        if "sphere" in need:
            M = draw(hs.sampled_from((1.0, 2.0, 0.5)))
            delta = draw(hs.sampled_from((0.0, 0.5, 0.25, 1.0))) * feasible_delta(L, d, M)
            rng = np.random.default_rng(draw(hs.integers(0, 2**16)))
            kw["x"] = sphere_embeddings(rng, (1,), L, d, np.array([M]), np.array([delta]))
            params.update(M=M, delta=delta, r=draw(hs.sampled_from((1.0, 0.5, 2.0, 0.1, 0.25, 4.0, 0.01))) * M,
                          dim=d, mc_draws=2000, seed=draw(hs.integers(0, 2**16)))
        if "fd" in need:
            v = small((1, L))
            v[0, 0] = v[0, 0] or 1.0
            arrays["v"] = v / np.linalg.norm(v)
            params["eps"] = draw(hs.sampled_from((1e-3, 1.0, 0.1, 10.0, 1e-6)))
        if "heads" in need:
            params.update(p=draw(hs.sampled_from((0.8, 0.5, 0.1, 0.9, 0.99, 0.0, 1.0))), H=draw(hs.integers(1, 8)))
        params.update({k: v for k, v in fixed.items() if k in params})  # the statement's fixed values, as given
        scale = draw(hs.sampled_from(scales))
        if "qk" in need:
            return Instance.from_qk(small((1, d)), small((1, L, d)) * scale, normaliser, arrays=arrays, **kw, **params)
        return Instance.from_logits(small((1, L)) * scale, normaliser, arrays=arrays, **kw, **params)

    return draw()


def _lengths(statement: Statement, min_L: int) -> tuple[int, int]:
    """The lengths targeted instances take: ``[min_L, MAX_L]`` within the statement's range of L (empty when the range
    starts beyond ``MAX_L``: ``lo > hi``)."""
    lo, hi = min_L, MAX_L
    if "L" in statement.ranges:
        lo, hi = max(lo, int(np.ceil(statement.ranges["L"][0]))), min(hi, int(np.floor(statement.ranges["L"][1])))
    return lo, hi


#: hypothesis examples per piece of the targeted phase
EXAMPLES_PER_PIECE = 64


class _Cut(Exception):
    """Stops a hypothesis run at the wall-clock ceiling (:meth:`Tracker.expired` counted it)."""


def pieces(plan: Plan) -> list[int]:
    """The targeted phase cut into independent hypothesis runs: examples per piece."""
    n = max(1, -(-plan.targeted_examples // EXAMPLES_PER_PIECE)) if plan.targeted_examples else 0
    return [plan.targeted_examples // n + (1 if k < plan.targeted_examples % n else 0) for k in range(n)]


#: the shortest lengths of the range whose corners :func:`corners` evaluates
CORNER_LENGTHS = 3


def corners(statement: Statement, tracker: Tracker) -> None:
    """The corners of the logit box ``[-a, a]`` of a statement that fixes ``a``, evaluated before any draw (method
    ``targeted``): one logit at ``a`` and the others at ``-a``, and the reverse, at the :data:`CORNER_LENGTHS`
    shortest lengths of its range, at its fixed temperature or each end of its range of T, for every admissible
    normaliser. A bound on a map monotone in each logit is tight at a corner (sparsemax's largest weight at
    ``|l| <= 1/4`` is 3/4 exactly there, at L = 2), which random draws meet only by chance."""
    fixed, a = statement.fixed, logit_bound(statement)
    if a is None or needs(statement) & {"x", "sphere", "fd", "heads", "qk"}:
        return
    lo, hi = _lengths(statement, max(smallest_length(statement.hypotheses), 1))
    if "T" in fixed:
        temperatures: tuple[float, ...] = (float(fixed["T"]),)
    elif "T" in statement.ranges:
        temperatures = tuple(float(v) for v in statement.ranges["T"])
    else:
        temperatures = (1.0,)
    for name in admissible_normalisers(statement):
        own = {k: fixed[k] for k in fixed if k in constructor_parameters(name) and k != "T"}
        for L in range(lo, min(hi, lo + CORNER_LENGTHS - 1) + 1):
            logits = np.full((2, L), -a)
            logits[0, 0] = a
            logits[1] = -logits[0]
            for T in temperatures:
                try:
                    inst = Instance.from_logits(logits, make(name, T=T, **own), N=1)
                except (NotApplicable, AttnBoundsError):
                    continue
                tracker.evaluate(inst, "targeted")


def run(statement: Statement, plan: Plan, seed: int, tracker: Tracker, progress: Any = None,
        examples: int | None = None) -> Instance | None:
    """``examples`` (default ``plan.targeted_examples``) hypothesis examples (method ``targeted``) from one
    seed; the shrunk violation or None."""
    n = plan.targeted_examples if examples is None else examples
    if n == 0:
        return None
    lo, hi = _lengths(statement, 1)
    if lo > hi:
        tracker.method("targeted").stopped = f"the statement's range of L starts beyond the small instances (L <= {MAX_L})"
        return None
    from hypothesis import HealthCheck, Phase, find, settings, target
    from hypothesis.errors import NoSuchExample, Unsatisfiable

    def violated(inst: Instance) -> bool:
        if progress is not None:
            progress.update(1)
        if tracker.expired("targeted"):  # past the wall-clock ceiling: the rest of the run is cut
            raise _Cut
        out = tracker.evaluate(inst, "targeted")
        if out is None or not out[0].applicable[0]:
            return False
        rel = float(out[1][0])
        target(-rel if np.isfinite(rel) else 0.0, label="relative violation")
        return bool(out[0].violated[0]) and rel < -CLEAR

    config = settings(max_examples=n, database=None, deadline=None, derandomize=False,
                      phases=[Phase.generate, Phase.target, Phase.shrink], suppress_health_check=list(HealthCheck),
                      report_multiple_bugs=False)
    found = None
    with tracker.guard("targeted"):
        try:
            found = find(instances(statement), violated, settings=config, random=random.Random(seed))
            tracker.method("targeted").stopped = "found a violation (and shrank it) before using every example"
        except (NoSuchExample, _Cut):
            pass
        except Unsatisfiable:
            tracker.method("targeted").stopped = "hypothesis could not draw instances satisfying the hypotheses"
    return found
