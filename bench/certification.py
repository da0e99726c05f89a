"""Interval-arithmetic certification time per instance at L = 128 (goal <= 1 ms), via ``theory.certify``.

Run: ``python bench/certification.py``. One instance (B = 1) per reading, softmax weights from
Gaussian logits, Gaussian token vectors in d = 64 where the reading reads them; the best of three
``certify`` calls is reported with the certificate's status and method.
"""

from __future__ import annotations

import _util  # noqa: F401  (one BLAS thread before numpy loads)

import numpy as np

from _util import Row, table, timed
from attnbounds.theory.mathematics import registry
from attnbounds.theory.mathematics.families import needs
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.normalisers import softmax

READINGS = ["lemma1", "corollary1[delta=max-key]", "theorem1.fixed[R1,g1]", "theorem1.fixed[R2,g1,corrected]",
            "corollary3[spectral]", "corollary3[entry,corrected]", "lemma2[sharp]"]


def instance_for(sid: str, L: int = 128, d: int = 64, N: int = 5) -> Instance:
    st = registry.get(sid)
    rng = np.random.default_rng(0)
    need = needs(st)
    x = rng.standard_normal((1, L, d)) if "x" in need else None
    if "qk" in need:
        return Instance.from_qk(rng.standard_normal((1, d)) / 8, rng.standard_normal((1, L, d)) / 8, softmax(1.0),
                                x=x, N=N)
    return Instance.from_logits(rng.standard_normal((1, L)), softmax(1.0), x=x, N=N)


def rows(L: int = 128) -> list[Row]:
    try:
        from attnbounds.theory.deciding.certify import certify
    except ImportError as exc:  # written by another part of the project
        return [Row("certify L=128", "attnbounds.theory.deciding.certify", float("nan"), "", "<= 1 ms", None, f"not importable: {exc}")]
    out = []
    for sid in READINGS:
        st = registry.get(sid)
        inst = instance_for(sid, L)
        cert = certify(st, inst, 0)  # warm (generated code, caches)
        t = timed(lambda _: certify(st, inst, 0), repeats=3)
        out.append(Row("certify L=128", sid, t * 1e3, "ms", "<= 1 ms", t <= 1e-3, f"{cert.status} ({cert.method})"))
    return out


if __name__ == "__main__":
    print(table(rows()))
