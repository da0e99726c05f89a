"""Discussion remark: H independent heads, each separating a fraction p, cover 1 - (1 - p)^H."""

import sympy as sp

from attnbounds.theory.mathematics import hypotheses as hyp
from attnbounds.theory.mathematics.statement import Citation, Statement
from attnbounds.theory.mathematics.statements._symbols import H, coverage, p

STATEMENTS = (
    Statement(
        "multihead",
        "Coverage of H independent heads: P(covered) = 1 - (1 - p)^H (p = 0.8, H = 3: about 99%)",
        sp.And(sp.Le(coverage, 1 - (1 - p) ** H), sp.Le(1 - (1 - p) ** H, coverage)),
        Citation("Discussion (multi-head remark)"),
        (hyp.INDEPENDENT_HEADS,),
        bindings={"coverage": "coverage_enum"},
        notes="coverage is computed by enumerating the 2^H head outcomes, independently of the closed form.",
    ),
)
