"""Instances per second per core for the softmax-only readings at L = 128 (goal >= 1e6/s).

Run: ``python bench/throughput.py``. For each reading that reads nothing but softmax weights
(Lemma 1 with softmax, Corollary 1 with q, k in d = 8, Corollary 3 in every form) a batch at
L = 128 is evaluated on fresh copies (nothing cached): ``evaluate`` alone, and construction
(``Instance.from_logits`` / ``from_qk``, i.e. validation and the softmax) plus ``evaluate``.
One BLAS thread, so the rates are per core.
"""

from __future__ import annotations

import _util  # noqa: F401  (one BLAS thread before numpy loads)

import numpy as np

from _util import Row, interleaved, table
from attnbounds.theory.mathematics import registry
from attnbounds.theory.mathematics.families import needs
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.normalisers import softmax

READINGS = ["lemma1", "corollary1[delta=max-key]", "corollary3[spectral]", "corollary3[frobenius]", "corollary3[row]",
            "corollary3[entry]", "corollary3[fd]", "corollary3[spectral,corrected]", "corollary3[fd,corrected]"]


def _inputs(sid: str, B: int, L: int, rng: np.random.Generator) -> dict:
    st = registry.get(sid)
    need = needs(st)
    out: dict = {"params": {}, "arrays": {}}
    if "qk" in need:
        out["q"], out["k"] = rng.standard_normal((B, 8)), rng.standard_normal((B, L, 8)) / 4
    else:
        out["logits"] = rng.standard_normal((B, L))
    if "fd" in need:
        v = rng.standard_normal((B, L))
        out["arrays"]["v"] = v / np.linalg.norm(v, axis=-1, keepdims=True)
        out["params"]["eps"] = 1e-3
    return out


def _build(inputs: dict) -> Instance:
    n = softmax(1.0)
    if "q" in inputs:
        return Instance.from_qk(inputs["q"], inputs["k"], n, arrays=inputs["arrays"], **inputs["params"])
    return Instance.from_logits(inputs["logits"], n, arrays=inputs["arrays"], **inputs["params"])


def rows(B: int = 8192, L: int = 128) -> list[Row]:
    rng = np.random.default_rng(0)
    out = []
    for sid in READINGS:
        st = registry.get(sid)
        inputs = _inputs(sid, B, L, rng)
        inst = _build(inputs)
        st.evaluate(inst)  # warm caches (generated kernels, Lemma 1's F range)
        t = interleaved({
            "eval": (st.evaluate, lambda: inst.take(np.arange(B))),
            "build+eval": (lambda i: st.evaluate(_build(i)), lambda: inputs),
        }, repeats=3)
        rate, rate_all = B / t["eval"], B / t["build+eval"]
        out.append(Row("softmax L=128", f"{sid} evaluate", rate, "inst/s", ">= 1e6/s", rate >= 1e6))
        out.append(Row("softmax L=128", f"{sid} build+evaluate", rate_all, "inst/s", "", None))
    return out


if __name__ == "__main__":
    print(table(rows()))
