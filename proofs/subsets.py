"""Checked facts about the uniform random N-subset S of {1..L} and about the Euclidean norm.

Shared by Theorem 1 (random subset) and Corollary 2: inclusion probabilities as binomial
ratios, the variance of a without-replacement sample sum, and the convexity of the norm that
Jensen's inequality needs.
"""

from __future__ import annotations

from itertools import combinations

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
P_PAIR = Identity("sampling N of n without replacement: P(j, k in S) = C(n-2, N-2) / C(n, N) = N(N-1)/(n(n-1))",
                  sp.binomial(n - 2, Ni - 2) / sp.binomial(n, Ni), Ni * (Ni - 1) / (n * (n - 1)))

#: the Euclidean norm is convex: along any line it lives in the plane spanned by the line and the
#: origin, where its Hessian times (x^2 + y^2)^(3/2) > 0 is positive semidefinite
NORM_CONVEX = Psd("(x^2 + y^2)^(3/2) times the Hessian of ||(x, y)|| is PSD, so the norm is convex",
                  sp.simplify(sp.hessian(sp.sqrt(_x**2 + _y**2), (_x, _y)) * (_x**2 + _y**2) ** sp.Rational(3, 2)))


def jensen(text: str) -> Cite:
    """Jensen's inequality for the (convex) Euclidean norm: ||E Z|| <= E ||Z||."""
    return Cite("jensen", text, (NORM_CONVEX,))


def sample_variance_small_case(n_: int = 4, N_: int = 2) -> Identity:
    """Small case of Var(sum_{j in S} y_j) = p(1-p) Y1 + (q - p^2)(Y2 - Y1), by enumerating every N-subset.

    Scalars suffice: for vectors both sides are sums over coordinates of the scalar identity.
    """
    ys = sp.symbols(f"y_1:{n_ + 1}", real=True)
    subsets = list(combinations(range(n_), N_))
    mean = sum(sum(ys[j] for j in c) for c in subsets) / len(subsets)
    var = sum((sum(ys[j] for j in c) - mean) ** 2 for c in subsets) / len(subsets)
    p = sp.Rational(N_, n_)
    q = sp.Rational(N_ * (N_ - 1), n_ * (n_ - 1))
    Y1, Y2 = sum(v**2 for v in ys), sum(ys) ** 2
    return Identity(f"enumerating the {len(subsets)} subsets of size {N_} of {n_} values: the variance of the sample "
                    "sum is p(1-p) Y1 + (q - p^2)(Y2 - Y1)", var, p * (1 - p) * Y1 + (q - p**2) * (Y2 - Y1))
