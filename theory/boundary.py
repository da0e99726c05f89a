"""Where an instance sits relative to the boundary of the hypotheses: one token (L = 1), every token selected
(N = L), an exact tie between a selected and a non-selected weight, a zero token vector, query or key.

A counterexample on such a boundary is legitimate (the hypotheses allow it) but says less than one in the
interior: the verdict machinery then also looks for an interior counterexample and reports both.
"""

from __future__ import annotations

import numpy as np

from attnbounds.theory.instance import Instance

#: the boundaries, by name, in the order they are reported
BOUNDARIES = ("L = 1", "N = L", "exact tie at the top-N boundary", "zero vector")


def boundaries(inst: Instance) -> list[list[str]]:
    """Per instance of the batch, the boundaries it sits on (an empty list: an interior instance)."""
    out: list[list[str]] = [[] for _ in range(inst.B)]
    present = inst.present
    for b in range(inst.B):
        if inst.L == 1:
            out[b].append("L = 1")
        if inst.N is not None and inst.N == inst.L:
            out[b].append("N = L")
        if inst.N is not None and inst.N < inst.L:
            m = inst.mask[b] & present[b]
            rest = ~inst.mask[b] & present[b]
            if m.any() and rest.any() and inst.alpha[b][m].min() == inst.alpha[b][rest].max():
                out[b].append("exact tie at the top-N boundary")
        zero = False
        if inst.x is not None:
            zero |= bool(np.any(np.all(inst.x[b][present[b]] == 0, axis=-1)))
        if inst.q is not None:
            zero |= bool(np.all(inst.q[b] == 0))
        if inst.k is not None:
            zero |= bool(np.any(np.all(inst.k[b][present[b]] == 0, axis=-1)))
        if zero:
            out[b].append("zero vector")
    return out


def interior(inst: Instance) -> np.ndarray:
    """``(B,)``: instances on no boundary."""
    return np.array([not bs for bs in boundaries(inst)], dtype=bool)
