"""Where an instance sits relative to the boundary of the hypotheses: one token (L = 1), every token selected
(N = L), an exact tie between a selected and a non-selected weight, a zero token vector, query or key.

A counterexample on such a boundary is legitimate (the hypotheses allow it) but says less than one in the
interior: the verdict machinery then also looks for an interior counterexample and reports both.
"""

from __future__ import annotations

import numpy as np

from attnbounds.theory.mathematics.instance import Instance

#: the boundaries, by name, in the order they are reported
BOUNDARIES = ("L = 1", "N = L", "exact tie at the top-N boundary", "zero vector")


def flags(inst: Instance, selection: bool = True) -> dict[str, np.ndarray]:
    """Per boundary (:data:`BOUNDARIES`), a ``(B,)`` array: which instances of the batch sit on it. ``selection``:
    whether the statement reads the top-N selection (:attr:`Statement.reads_selection`); without it an instance's
    ``N`` is no hypothesis' and its ends (``N = L``, a tie at the top-N boundary) no boundary."""
    B, L, present = inst.B, inst.L, inst.present
    tie = np.zeros(B, dtype=bool)
    if selection and inst.N is not None and inst.N < L:
        selected, rest = inst.mask & present, ~inst.mask & present
        with np.errstate(invalid="ignore"):
            lowest = np.where(selected, inst.alpha, np.inf).min(axis=1)
            highest = np.where(rest, inst.alpha, -np.inf).max(axis=1)
        tie = selected.any(axis=1) & rest.any(axis=1) & (lowest == highest)
    zero = np.zeros(B, dtype=bool)
    if inst.x is not None:
        zero |= np.any(np.all(inst.x == 0, axis=-1) & present, axis=1)
    if inst.q is not None:
        zero |= np.all(inst.q.reshape(B, -1) == 0, axis=1)
    if inst.k is not None:
        zero |= np.any(np.all(inst.k == 0, axis=-1) & present, axis=1)
    full = selection and inst.N is not None and inst.N == L
    return dict(zip(BOUNDARIES, (np.full(B, L == 1), np.full(B, full), tie, zero)))


def boundaries(inst: Instance, selection: bool = True) -> list[list[str]]:
    """Per instance of the batch, the boundaries it sits on (an empty list: an interior instance)."""
    on = flags(inst, selection)
    return [[name for name in BOUNDARIES if on[name][b]] for b in range(inst.B)]


def interior(inst: Instance, selection: bool = True) -> np.ndarray:
    """``(B,)``: instances on no boundary."""
    return ~np.logical_or.reduce(list(flags(inst, selection).values()))
