"""Discussion remark: H independent heads, each covering a token with probability p, cover 1 - (1 - p)^H."""

from __future__ import annotations

from itertools import product

import numpy as np
import sympy as sp

from attnbounds.proofs.framework import Cite, Conclude, Derivation, Identity, Witness
from attnbounds.theory.instance import Instance
from attnbounds.theory.statements._symbols import H, coverage, p


def _outcome_sum(h: int) -> Identity:
    """The 2^h head outcomes have total probability 1 (binomial theorem, checked for h heads)."""
    total = sum(sp.Mul(*[p if o else 1 - p for o in outcome]) for outcome in product((0, 1), repeat=h))
    return Identity(f"H = {h}: the {2**h} outcome probabilities sum to 1", total, 1)


COVERAGE = Derivation(
    "multihead.independence",
    ("multihead",),
    "coverage = 1 - P(no head covers) = 1 - prod_h (1 - p) by independence",
    (
        Cite("binomial-theorem", "the 2^H outcomes of the H heads have total probability (p + 1 - p)^H = 1, so the "
             "outcomes with at least one covering head have probability 1 - P(all miss)",
             tuple(_outcome_sum(h) for h in (1, 2, 3, 4))),
        Cite("independence", "P(all H heads miss) = prod_h (1 - p) = (1 - p)^H", uses=("independent-heads",)),
        Conclude(sp.And(sp.Le(coverage, 1 - (1 - p) ** H), sp.Le(1 - (1 - p) ** H, coverage)),
                 {"coverage": "coverage_enum"}, text="coverage = 1 - (1 - p)^H"),
    ),
    Witness("p = 0.8, H = 3 (the paper's 99.2%) and p = 0.3, H = 5: equality",
            lambda: [Instance.from_weights(np.full((2, 2), 0.5), p=np.array([0.8, 0.3]), H=np.array([3.0, 5.0]))]),
)

DERIVATIONS = (COVERAGE,)
NOT_PROVED: dict[str, tuple[str, str | None]] = {}
