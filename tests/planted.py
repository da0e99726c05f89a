"""Test instruments of the search's power (``tests/quality``, ``bench/``): planted statements that are false only
for long contexts, true ones that are tight only as L grows (the measure of the search's reach in L), and mutants of
the readings with their right-hand sides scaled (:func:`scaled`: the kill rate of ``bench/mutants.py``).

Each is a true bound whose slack vanishes like ``1/L`` along one-against-the-rest token classes (softmax
at a fixed temperature T = 1, logits bounded by a fixed ``a``), with its constant moved by ``delta``.
The constants are Lemma 1's (``C_1 = e^{-2a}``, ``C_2 = e^{2a}`` for softmax at T = 1), and the families:

- weights, lower (Lemma 1): ``alpha_i >= C_1 / L`` is true; ``(1 + delta) C_1 / L`` fails exactly when
  ``L > (1 + delta)(1 - C_1) / delta`` (one token at the minimum of F, the rest at its maximum);
- weights, upper (Lemma 1): ``alpha_i <= C_2 / L`` is true; ``(1 - delta) C_2 / L`` fails when
  ``L > (1 - delta)(C_2 - 1) / delta`` (one token at the maximum, the rest at the minimum);
- Jacobian: ``||d alpha / d l||_2 <= C_2 / (L T)`` is true (``lambda_max(diag(alpha) - alpha alpha^T) <=
  max alpha <= C_2 / L``); with ``1 - delta`` it fails for L beyond about ``2 C_2 / delta``;
- distances (Theorem 1, fixed top-N set): ``dtilde_R1 <= X (1 + N C_2)`` with ``X = max_i ||x_i||`` is true
  (``||alpha_i x_i - s|| <= (alpha_i + abar_N) X`` and ``abar_N <= N C_2 / (N C_2 + L - N)``); with
  ``1 - delta`` it fails when ``L > 1 + (1 - delta) C_2 / delta`` (N = 1, the rest antipodal to the selected token).

``threshold`` is the smallest failing L of the extreme family (computed, not measured).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import sympy as sp

from attnbounds.theory.mathematics import hypotheses as hyp
from attnbounds.theory.mathematics.errors import InvalidArgument
from attnbounds.theory.mathematics.statement import Citation, Statement, conjuncts
from attnbounds.theory.mathematics.statements._symbols import C_1, C_2, L, N, T, alpha_i, dtilde, jac

X = sp.Symbol("X", nonnegative=True)
_WEIGHTS = (hyp.F_POSITIVE, hyp.F_LENGTH_INDEPENDENT, hyp.LOGITS_BOUNDED, hyp.SOFTMAX)


@dataclass(frozen=True)
class Planted:
    """A statement of the long-context set: ``false`` ones fail from ``threshold`` tokens on."""

    statement: Statement
    false: bool
    threshold: int | None


def _statement(ident: str, relation: sp.Basic, bindings: dict[str, str], a: float, extra: tuple = ()) -> Statement:
    return Statement(ident, f"planted long-context statement {ident}", relation, Citation("planted (search quality)"),
                     _WEIGHTS + extra, bindings=bindings, fixed={"a": a, "T": 1.0})


def weights_lower(delta: float, a: float) -> Planted:
    st = _statement(f"planted.weights-lower[delta={delta:g},a={a:g}]", sp.Le((1 + sp.Float(delta)) * C_1 / L, alpha_i),
                    {"alpha_i": "alpha_i", "C_1": "C_1"}, a)
    c1 = math.exp(-2 * a)
    return Planted(st, delta > 0, math.floor((1 + delta) * (1 - c1) / delta) + 1 if delta > 0 else None)


def weights_upper(delta: float, a: float) -> Planted:
    st = _statement(f"planted.weights-upper[delta={delta:g},a={a:g}]", sp.Le(alpha_i, (1 - sp.Float(delta)) * C_2 / L),
                    {"alpha_i": "alpha_i", "C_2": "C_2"}, a)
    c2 = math.exp(2 * a)
    return Planted(st, delta > 0, math.floor((1 - delta) * (c2 - 1) / delta) + 1 if delta > 0 else None)


def jacobian(delta: float, a: float) -> Planted:
    st = _statement(f"planted.jacobian[delta={delta:g},a={a:g}]", sp.Le(jac, (1 - sp.Float(delta)) * C_2 / (L * T)),
                    {"J_norm": "J_spectral", "C_2": "C_2"}, a)
    return Planted(st, delta > 0, _jacobian_threshold(delta, a) if delta > 0 else None)


def _jacobian_threshold(delta: float, a: float) -> int:
    """The smallest L where one token at the maximum of F against L - 1 at the minimum breaks the bound."""
    import numpy as np

    c2 = math.exp(2 * a)
    lo, hi = 2, 2
    def broken(n: int) -> bool:
        t = c2 / (c2 + n - 1)
        w = np.array([t] + [1 / (c2 + n - 1)])
        m = np.array([1.0, n - 1.0])
        # the top eigenvalue of diag(alpha) - alpha alpha^T over the two classes (their reduced 2 x 2 problem)
        root = np.sqrt(m) * w
        red = np.diag(w) - np.outer(root, root)
        lam = max(np.linalg.eigvalsh(red).max(), w[1] if n - 1 >= 2 else 0.0)
        return lam > (1 - delta) * c2 / n
    while not broken(hi):
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if not broken(mid) else (lo, mid)
    return hi


def distances(delta: float, a: float) -> Planted:
    st = _statement(f"planted.distances[delta={delta:g},a={a:g}]", sp.Le(dtilde, (1 - sp.Float(delta)) * X * (1 + N * C_2)),
                    {"dtilde": "dtilde_R1", "C_2": "C_2", "X": "x_max"}, a, (hyp.SIMPLEX, hyp.TOP_N))
    c2 = math.exp(2 * a)
    return Planted(st, delta > 0, math.floor(1 + (1 - delta) * c2 / delta) + 1 if delta > 0 else None)


def long_context_set(reach: str = "all") -> list[Planted]:
    """The set: ``reach`` ``"short"`` (false from about 20 to 2000 tokens, and true ones), ``"long"`` (false from
    about 10^4 to 2 10^5 tokens) or ``"all"``."""
    short = [weights_lower(0.05, 3.0), weights_upper(0.05, 1.0), weights_upper(0.05, 2.0), jacobian(0.05, 1.0),
             jacobian(0.05, 2.0), distances(0.05, 1.0), distances(0.05, 2.0),
             weights_lower(0.0, 3.0), weights_upper(0.0, 3.0), jacobian(0.0, 2.0), distances(0.0, 2.0)]
    long = [weights_upper(0.01, 2.5), weights_upper(0.01, 3.5), weights_upper(0.05, 4.5), jacobian(0.02, 3.5),
            distances(0.01, 3.5), distances(0.005, 3.0)]
    return {"short": short, "long": long, "all": short + long}[reach]


def scaled(statement: Statement, factor: float) -> Statement:
    """``statement`` with every right-hand side multiplied by ``factor`` (id suffixed ``{rhs*factor}``): ``0.97``
    tightens every conjunct ``lhs <= rhs`` to ``lhs <= 0.97 rhs`` (false as soon as the bound is attained within
    3 %), ``1.03`` loosens it (true whenever the statement is); a strict conjunct stays strict."""
    if not factor > 0:
        raise InvalidArgument(f"factor must be > 0, got {factor!r}")
    f = sp.Float(factor)
    parts = [type(c)(c.lhs, c.rhs * f) for c in conjuncts(statement.relation)]
    relation = parts[0] if len(parts) == 1 else sp.And(*parts)
    return dataclasses.replace(statement, id=f"{statement.id}{{rhs*{factor:g}}}", relation=relation)
