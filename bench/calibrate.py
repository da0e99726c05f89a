"""Re-measure ``theory.search.budget.RATES``: units of search work per second, per cost class.

Run: ``python bench/calibrate.py``. For representative readings of each cost class, times one
unit of each method (a random batch, a gradient start, a targeted example, a shrink evaluation,
a Monte Carlo refinement) on this machine (one core) and prints the measured rates beside the
table in use. The search itself never reads the clock: paste the new numbers into ``RATES``
only on the reference machine, since every result depends on them.
"""

from __future__ import annotations

import _util  # noqa: F401  (one BLAS thread before numpy loads)

import time
from dataclasses import replace

import numpy as np

from _util import Row, table
from attnbounds.theory import registry
from attnbounds.theory.search import budget, gradient, random_search, refine, targeted
from attnbounds.theory.search.budget import RATES
from attnbounds.theory.search.tracker import Tracker

REPRESENTATIVES = {
    "weights": ["lemma1", "corollary1[delta=max-key]", "multihead"],
    "softmax-jacobian": ["corollary3[spectral]", "corollary3[entry,corrected]", "corollary3[fd]"],
    "jacobian": ["lemma2[sharp]", "lemma2[two-term]"],
    "tokens": ["theorem1.fixed[R1,g1]", "theorem1.fixed[R2,g2]"],
    "subsets": ["theorem1.random[R1,scaled,weighted]", "corollary2.i[R1]"],
    "sphere": ["theorem2.lower[relaxed]", "theorem2.upper[full]"],
}


def _per_unit(run, units: int) -> float:
    t = time.perf_counter()
    run()
    return (time.perf_counter() - t) / max(units, 1)


def measure(sid: str) -> dict[str, float]:
    """Seconds per unit of each method for one reading (caches warmed first)."""
    st = registry.get(sid)
    pl = budget.plan(st, 1.0, gradient=gradient.supports(st))
    tr = Tracker(st)
    rng = np.random.default_rng(0)
    random_search.run(st, replace(pl, random_batches=3), rng, tr)  # warm: kernels, sympy caches
    out = {"random": _per_unit(lambda: random_search.run(st, replace(pl, random_batches=10, class_batches=0), rng, tr), 10)}
    if pl.class_batches or RATES[pl.cost_class].class_per_s:
        out["classes"] = _per_unit(lambda: random_search.run(st, replace(pl, random_batches=0, class_batches=10), rng, tr),
                                   10)
    if pl.gradient_starts:
        out["gradient"] = _per_unit(lambda: gradient.run(st, replace(pl, gradient_starts=2), rng, tr), 2)
    out["targeted"] = _per_unit(lambda: targeted.run(st, replace(pl, targeted_examples=40), 1, tr), 40)
    one = tr.pool[0].inst if tr.pool else None
    if one is not None:
        out["shrink"] = _per_unit(lambda: [st.evaluate(one.take([0])) for _ in range(20)], 20)
    if RATES[pl.cost_class].refine_per_s:
        out["refine"] = _per_unit(lambda: refine.run(st, replace(pl, refine_evaluations=2), tr), 2)
    return out


def rows() -> list[Row]:
    out = []
    for cls, ids in REPRESENTATIVES.items():
        per = [measure(sid) for sid in ids]
        current = RATES[cls]
        for method, attr in (("random", "random_per_s"), ("classes", "class_per_s"), ("gradient", "gradient_per_s"),
                             ("targeted", "targeted_per_s"), ("shrink", "shrink_per_s"), ("refine", "refine_per_s")):
            secs = [p[method] for p in per if method in p]
            if not secs:
                continue
            rate = 1.0 / float(np.mean(secs))
            out.append(Row(f"calibrate {cls}", f"{method} units/s", rate, "", f"table: {getattr(current, attr):g}",
                           None, ", ".join(f"{s * 1e3:.1f} ms" for s in secs)))
    return out


if __name__ == "__main__":
    print(table(rows()))
