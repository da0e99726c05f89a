"""Checked facts about the uniform random N-subset S of {1..L} and about the Euclidean norm.

Shared by Theorem 1 (random subset) and Corollary 2: inclusion probabilities as binomial ratios,
for symbolic L, N and n (general sizes), and the convexity of the norm that Jensen's inequality needs.
"""

from __future__ import annotations

import sympy as sp

from attnbounds.proofs.framework import Cite, Identity, Psd

Li, Ni, n = sp.symbols("L N n", integer=True, positive=True)
_x, _y = sp.symbols("x y", real=True)

P_EXCLUDED = Identity("P(i not in S) = C(L-1, N) / C(L, N) = (L - N)/L",
                      sp.binomial(Li - 1, Ni) / sp.binomial(Li, Ni), (Li - Ni) / Li)
P_INCLUDED = Identity("P(j in S) = C(L-1, N-1) / C(L, N) = N/L",
                      sp.binomial(Li - 1, Ni - 1) / sp.binomial(Li, Ni), Ni / Li)
P_GIVEN_EXCLUDED = Identity("P(j in S | i not in S) = C(L-2, N-1) / C(L-1, N) = N/(L-1), j != i",
                            sp.binomial(Li - 2, Ni - 1) / sp.binomial(Li - 1, Ni), Ni / (Li - 1))
P_SAMPLED = Identity("sampling N of n without replacement: P(j in S) = C(n-1, N-1) / C(n, N) = N/n",
                     sp.binomial(n - 1, Ni - 1) / sp.binomial(n, Ni), Ni / n)
P_PAIR = Identity("sampling N of n without replacement: P(j, k in S) = C(n-2, N-2) / C(n, N) = N(N-1)/(n(n-1))",
                  sp.binomial(n - 2, Ni - 2) / sp.binomial(n, Ni), Ni * (Ni - 1) / (n * (n - 1)))

#: the Euclidean norm is convex: along any line it lives in the plane spanned by the line and the
#: origin, where its Hessian times (x^2 + y^2)^(3/2) > 0 is positive semidefinite
NORM_CONVEX = Psd("(x^2 + y^2)^(3/2) times the Hessian of ||(x, y)|| is PSD, so the norm is convex",
                  sp.simplify(sp.hessian(sp.sqrt(_x**2 + _y**2), (_x, _y)) * (_x**2 + _y**2) ** sp.Rational(3, 2)))


def jensen(text: str, result: sp.Basic | None = None, given: tuple[sp.Basic, ...] = ()) -> Cite:
    """Jensen's inequality for the (convex) Euclidean norm: ||E Z|| <= E ||Z||."""
    return Cite("jensen", text, (NORM_CONVEX,), given=given, result=result)
