"""Evaluator speed: each statement's vectorised evaluator against (a) naive sympy ``subs().evalf()`` on the
same instance and (b) a read-only numpy pass over the instance's arrays (the memory-bandwidth floor).

Run: ``python bench/evaluators.py``. (a) is per instance: ``Statement.evaluate_sympy`` (quantities
for one instance, then the sympy relation substituted and evaluated) against the batched
evaluator's time divided by the batch size (goal >= 1000x); the note gives the same ratio for
the formula alone (quantities already computed on both sides), which is what the generated
evaluator replaces: where an expectation's enumeration or Monte Carlo dominates, both paths
spend the same numpy time on it. (b) is per batch: ``evaluate`` on a
fresh batch (nothing cached) against ``sum()`` over every array of that batch (goal <= 10x for
Theorem 1 with a fixed set at L = 128, d = 64, N = 5, where a straightforward numpy version is
also timed; other readings are reported at their benchmark sizes without a goal, since
expectations over subsets or sphere embeddings do far more work than one pass by design).
"""

from __future__ import annotations

import _util  # noqa: F401  (one BLAS thread before numpy loads)

import time

import numpy as np

from _util import Row, interleaved, table, timed
from attnbounds.theory.mathematics import registry
from attnbounds.theory.mathematics.families import Spec, build, cost
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.normalisers import softmax
from attnbounds.theory.mathematics.statement import Statement

SIZES = {  # (B, L, N, d) per cost class
    "weights": (2048, 16, 4, 4),
    "softmax-jacobian": (2048, 16, 4, 4),
    "jacobian": (2048, 16, 4, 4),
    "tokens": (512, 16, 4, 8),
    "subsets": (512, 8, 3, 4),
    "sphere": (16, 4, 2, 3),
}


def fresh(inst: Instance) -> Instance:
    """A copy with its own arrays and an empty cache (nothing computed yet)."""
    return inst.take(np.arange(inst.B))


def floor(inst: Instance) -> float:
    """One read-only pass over every array of the batch."""
    total = 0.0
    for a in (inst.alpha, inst.logits, inst.x, inst.q, inst.k, *inst.params.values(), *inst.arrays.values()):
        if a is not None:
            total += float(a.sum())
    return total


def batch_for(st: Statement, seed: int = 0) -> Instance:
    B, L, N, d = SIZES[cost(st).name]
    spec = Spec(B=B, L=L, N=N, d=d, logits="gaussian", embeddings="gaussian", normaliser="softmax", T=1.0,
                delta_rel=0.5, mc_draws=2000, seed=seed)
    return build(st, spec)


def evaluator_rows(ids: list[str] | None = None, sympy_instances: int = 2) -> list[Row]:
    rows = []
    for st in registry.all_statements():
        if ids and st.id not in ids:
            continue
        inst = batch_for(st)
        t = interleaved({"eval": (st.evaluate, lambda: fresh(inst)), "floor": (floor, lambda: fresh(inst))}, repeats=3)
        per_instance = t["eval"] / inst.B
        start = time.perf_counter()
        for b in range(sympy_instances):
            st.evaluate_sympy(inst.take([b]), 0, digits=15)
        sympy_per_instance = (time.perf_counter() - start) / sympy_instances
        # the formula alone: quantities already computed (cached) on both sides
        ready = st.prepare(fresh(inst))
        st.evaluate(ready)
        formula = timed(st.evaluate, lambda: ready, repeats=3) / inst.B
        one = st.prepare(inst.take([0]))
        st.evaluate_sympy(one, 0, digits=15)
        formula_sympy = timed(lambda i: st.evaluate_sympy(i, 0, digits=15), lambda: one, repeats=2)
        speedup = sympy_per_instance / per_instance
        rows.append(Row("evaluator/sympy", st.id, speedup, "x", ">= 1000x", speedup >= 1000,
                        f"{per_instance * 1e6:.2f} us vs {sympy_per_instance * 1e3:.1f} ms per instance; "
                        f"formula alone {formula_sympy / formula:.3g}x"))
        rows.append(Row("evaluator/floor", f"{st.id} B={inst.B} L={inst.L}", t["eval"] / t["floor"], "x", "", None,
                        f"{t['eval'] * 1e3:.2f} ms vs {t['floor'] * 1e3:.3f} ms per batch"))
    return rows


def straightforward(alpha: np.ndarray, x: np.ndarray, N: int) -> np.ndarray:
    """Theorem 1 (fixed set, R1, g1) written the obvious vectorised way: margins rhs - lhs."""
    L = alpha.shape[1]
    order = np.argsort(-alpha, axis=-1, kind="stable")
    sel, out = order[:, :N], order[:, N:]
    xs, xo = np.take_along_axis(x, sel[..., None], 1), np.take_along_axis(x, out[..., None], 1)
    a_sel, a_out = np.take_along_axis(alpha, sel, 1), np.take_along_axis(alpha, out, 1)
    s = np.einsum("bn,bnd->bd", a_sel, xs)
    abar = a_sel.sum(-1)
    d1 = np.linalg.norm(xo[:, :, None, :] - xs[:, None, :, :], axis=-1).max(axis=(1, 2))
    max_norm = np.linalg.norm(xs, axis=-1).max(-1)
    dtilde = np.linalg.norm(a_out[..., None] * xo - s[:, None, :], axis=-1).sum(-1)
    return (1 - abar) * d1 + max_norm * (abar * (L - N) - (1 - abar)) - dtilde


def theorem1_rows(B: int = 512, L: int = 128, d: int = 64, N: int = 5) -> list[Row]:
    st = registry.get("theorem1.fixed[R1,g1]")
    rng = np.random.default_rng(0)
    inst = Instance.from_logits(rng.standard_normal((B, L)), softmax(1.0), x=rng.standard_normal((B, L, d)), N=N)
    ev = st.evaluate(fresh(inst))
    np.testing.assert_allclose(straightforward(inst.alpha, inst.x, N), ev.margin, rtol=1e-9, atol=1e-9)
    t = interleaved({
        "eval": (st.evaluate, lambda: fresh(inst)),
        "build+eval": (lambda a: st.evaluate(Instance.from_logits(a[0], softmax(1.0), x=a[1], N=N)),
                       lambda: (inst.logits.copy(), inst.x.copy())),
        "straightforward": (lambda i: straightforward(i.alpha, i.x, N), lambda: fresh(inst)),
        "floor": (floor, lambda: fresh(inst)),
    }, repeats=5)
    size = f"L={L} d={d} N={N} B={B}"
    return [
        Row("theorem1 kernel", f"evaluate / floor ({size})", t["eval"] / t["floor"], "x", "<= 10x",
            t["eval"] / t["floor"] <= 10, f"{t['eval'] * 1e3:.1f} ms vs {t['floor'] * 1e3:.2f} ms"),
        Row("theorem1 kernel", f"build+evaluate / floor ({size})", t["build+eval"] / t["floor"], "x", "", None,
            "includes Instance construction (validation, softmax)"),
        Row("theorem1 kernel", f"straightforward numpy / floor ({size})", t["straightforward"] / t["floor"], "x",
            "", None, f"{t['straightforward'] * 1e3:.1f} ms"),
        Row("theorem1 kernel", "straightforward / evaluate", t["straightforward"] / t["eval"], "x", "", None),
    ]


if __name__ == "__main__":
    print(table(theorem1_rows() + evaluator_rows()))
