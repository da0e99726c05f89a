"""Discussion remark: H independent heads, each covering a token with probability p, cover 1 - (1 - p)^H.

The coverage is the total probability of the head outcomes with at least one covering head; the
outcomes' probabilities sum to prod_h (p + (1 - p)) = 1, so it is 1 - P(no head covers), and by
independence P(no head covers) = prod_h (1 - p) = (1 - p)^H. Both products are checked for symbolic H.
"""

from __future__ import annotations

import numpy as np
import sympy as sp

from attnbounds.proofs.framework import Cite, Conclude, Derivation, Identity, Witness, reals
from attnbounds.theory.mathematics import hypotheses as hyp
from attnbounds.theory.mathematics.instance import Instance

H, p, coverage, P0, Qh, total, h = reals("H p coverage P_0 Q total h")

COVERAGE = Derivation(
    "multihead.independence",
    ("multihead",),
    "coverage = 1 - P(no head covers) = 1 - prod_h (1 - p) by independence",
    (
        Cite("distributivity", "the 2^H outcomes of the H heads (each covering with probability p or not with 1 - p) "
             "have total probability prod_{h=1}^H (p + (1 - p)) = 1",
             (Identity("prod_{h=1}^H (p + (1 - p)) = 1 for every H", sp.Product(p + (1 - p), (h, 1, H)).doit(), 1),),
             uses=(hyp.INDEPENDENT_HEADS.id,), result=sp.Eq(total, 1)),
        Cite("complement", "coverage = P(at least one head covers) = 1 - P_0, P_0 = P(no head covers)",
             given=(sp.Eq(total, 1),), result=sp.Eq(coverage, 1 - P0)),
        Cite("independence", "P_0 = P(all H heads miss) = prod_{h=1}^H (1 - p) = (1 - p)^H =: Q",
             (Identity("prod_{h=1}^H (1 - p) = (1 - p)^H for every H", sp.Product(1 - p, (h, 1, H)).doit(), (1 - p) ** H),),
             uses=(hyp.INDEPENDENT_HEADS.id,), result=sp.Eq(P0, Qh)),
        Conclude(sp.And(sp.Le(coverage, 1 - Qh), sp.Le(1 - Qh, coverage)), {"coverage": "coverage_enum"},
                 definitions={(1 - p) ** H: Qh}, text="coverage = 1 - (1 - p)^H = 1 - Q"),
    ),
    Witness("p = 0.8, H = 3 (the paper's 99.2%) and p = 0.3, H = 5: equality",
            lambda: [Instance.from_weights(np.full((2, 2), 0.5), p=np.array([0.8, 0.3]), H=np.array([3.0, 5.0]))]),
)

DERIVATIONS = (COVERAGE,)
NOT_PROVED: dict[str, tuple[str, str | None]] = {}
