"""A user's bounds as a Python file (executed: use only files you trust).

    attnbounds verify --statements examples/user_bounds.py

Define ``STATEMENTS`` (a list of attnbounds.Statement) and/or ``NORMALISERS`` (name ->
constructor or RatioNormaliser). Symbols are bound to quantities by name (``bindings``).
"""

import sympy as sp

import attnbounds
from attnbounds import Citation, Statement

hyp = attnbounds.hypotheses
RatioNormaliser, l_sym = attnbounds.normalisers.RatioNormaliser, attnbounds.normalisers.l_sym

T, L = sp.symbols("T L", positive=True)
J_row = sp.Symbol("J_row", nonnegative=True)
alpha_max = sp.Symbol("alpha_max", nonnegative=True)

STATEMENTS = [
    Statement(
        "user.py.row-norm",
        "Each row of the softmax Jacobian has norm at most sqrt(2) max_i alpha_i / T",
        sp.Le(J_row, sp.sqrt(2) * alpha_max / T),
        Citation("worked example (Python form)", arxiv="", version=""),
        (hyp.SOFTMAX,),
        bindings={"J_row": "J_row", "alpha_max": "alpha_max"},
        notes="||grad alpha_i|| = alpha_i sqrt((1 - alpha_i)^2 + sum_{j != i} alpha_j^2) / T <= sqrt(2) alpha_i / T.",
    ),
]

NORMALISERS = {
    "softer": RatioNormaliser("softer", l_sym / sp.Symbol("T") - sp.log(1 + l_sym**2), {"T": 1.0}),
}
