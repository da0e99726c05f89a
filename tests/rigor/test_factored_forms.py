"""The guard before a face's factored forms (issue 35): sympy expands and factors a numerator only when a cheap walk
(``bnb._terms``) bounds its expanded terms by ``MAX_TERMS``.

- the walk is an upper bound of the expanded terms (capped just above ``MAX_TERMS``): a numerator it lets through never
  expands beyond what the guard allows;
- it is exact where no two terms of the expansion merge (sums, products and integer powers over disjoint symbols,
  integer coefficients included), so that the guard refuses no numerator that fits;
- the guard refuses a numerator or a denominator beyond either bound (its expanded terms, ``MAX_TERMS``, or its dense
  representation, ``MAX_DENSE``), each alone: the face then keeps the form it was built in;
- at the bound itself (a numerator of exactly ``MAX_TERMS`` terms by the walk) the numerator is factored, one more
  term and it is not;
- so a core whose sign shows only when factored, ``(x - y)^2 (x + y + z + 2)^6`` written expanded, gets its factored
  form and is proved on the root box.
"""

from __future__ import annotations

import itertools
import math

import pytest
import sympy as sp
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from attnbounds.theory.deciding.prover import bnb
from attnbounds.theory.deciding.prover.problem import Coordinate, Problem

CAP = bnb.MAX_TERMS + 1
#: the most expanded terms a drawn expression may have (sympy expands it to count them)
MOST = 2_000


def _expanded(expr: sp.Expr) -> int:
    return len(sp.Add.make_args(sp.expand(expr)))


@st.composite
def disjoint(draw: st.DrawFn, depth: int = 2) -> tuple[sp.Expr, int]:
    """``(expr, terms)``: a sum, product or integer power whose parts read disjoint fresh symbols (no two terms of its
    expansion merge), and its expanded terms by the multinomial counts."""
    fresh = itertools.count()

    def leaf() -> sp.Expr:
        return draw(st.sampled_from([1, -1, 2, -3, sp.Rational(1, 2)])) * sp.Symbol(f"s{next(fresh)}", real=True)

    def node(d: int) -> tuple[sp.Expr, int]:
        kind = draw(st.sampled_from(["leaf", "power"] + (["sum", "product"] if d > 0 else [])))
        if kind == "leaf":
            return leaf(), 1
        if kind == "power":  # a power of a sum of distinct symbols: the multinomial count
            k, n = draw(st.integers(2, 4)), draw(st.integers(2, 5))
            return sp.Add(*[leaf() for _ in range(k)]) ** n, math.comb(k + n - 1, n)
        parts = [node(d - 1) for _ in range(draw(st.integers(2, 3)))]
        if kind == "sum":
            return sp.Add(*[e for e, _ in parts]), sum(c for _, c in parts)
        return sp.Mul(*[e for e, _ in parts]), math.prod(c for _, c in parts)

    return node(depth)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(disjoint())
def test_the_terms_walk_is_exact_where_no_two_terms_merge(case: tuple[sp.Expr, int]) -> None:
    expr, terms = case
    assume(terms <= MOST)
    assert _expanded(expr) == terms, expr  # the multinomial counts are sympy's own
    assert bnb._terms(expr) == min(CAP, terms), (expr, terms)


@st.composite
def shared(draw: st.DrawFn, depth: int = 2) -> sp.Expr:
    """A polynomial over three symbols, sums, products and powers of any parts (terms merge and cancel)."""
    syms = sp.symbols("a b c", real=True)
    if depth == 0 or draw(st.booleans()):
        return draw(st.sampled_from([1, -1, 2, -3])) * draw(st.sampled_from(syms)) + draw(st.integers(-2, 2))
    parts = [draw(shared(depth - 1)) for _ in range(draw(st.integers(2, 3)))]
    kind = draw(st.sampled_from(["sum", "product", "power"]))
    if kind == "power":
        return parts[0] ** draw(st.integers(2, 4))
    return sp.Add(*parts) if kind == "sum" else sp.Mul(*parts)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shared())
def test_the_terms_walk_bounds_the_expanded_terms_from_above(expr: sp.Expr) -> None:
    assert bnb._terms(expr) >= min(CAP, _expanded(expr)), expr


_X, _Y, _Z, _W = sp.symbols("x y z w", real=True)
#: a sum whose eighth power expands to 495 terms (beyond MAX_TERMS), its dense representation within MAX_DENSE
_WIDE = (1 + _X + _Y + _Z + _W) ** 8
#: a monomial of one term whose dense representation is beyond MAX_DENSE (81^2 entries times those of the rest)
_DEEP = (_Z * _W) ** 80


@pytest.mark.parametrize("top, bottom, beyond", [
    (1, 1, None), (_WIDE ** sp.Rational(1, 4), 1, None), (1, _WIDE ** sp.Rational(1, 4), None),
    (_WIDE, 1, "terms"), (1, _WIDE, "terms"), (_DEEP, 1, "dense"), (1, _DEEP, "dense"),
])
def test_a_face_is_factored_only_within_the_guards_bounds(top: sp.Expr, bottom: sp.Expr, beyond: str | None) -> None:
    """``(x^2 - y^2) top / ((x - y) bottom)`` factors to ``(x + y) top / bottom``: that form is added exactly when
    neither the numerator nor the denominator is beyond a bound of the guard (whichever of the two it is, and
    whichever bound), and the form as built is always the first."""
    expr = (_X**2 - _Y**2) * top / ((_X - _Y) * bottom)
    num, den = sp.fraction(sp.together(expr))
    walks = [(bnb._terms(e) > bnb.MAX_TERMS, bnb._dense(e) > bnb.MAX_DENSE) for e in (num, den)]
    assert [w for w in walks if any(w)] == ([] if beyond is None else [(beyond == "terms", beyond == "dense")])
    forms = bnb._forms(expr)
    assert forms[0] == expr
    assert (len(forms) > 1) == (beyond is None), forms


_V = sp.Symbol("v", real=True)


@pytest.mark.parametrize("top, terms", [
    # (x^2 - y^2) top has twice top's terms: 2 * 5 * 5 * 8 = MAX_TERMS, and 2 * 3 * 67 just beyond it
    ((1 + _Z) ** 4 * (1 + _W) ** 4 * (1 + _V) ** 7, bnb.MAX_TERMS),
    ((1 + _Z) ** 2 * (1 + _W) ** 66, bnb.MAX_TERMS + 2),
])
def test_a_numerator_of_exactly_max_terms_is_factored_and_one_beyond_is_not(top: sp.Expr, terms: int) -> None:
    """The guard's bound is inclusive: ``MAX_TERMS`` terms are factored (the face gets ``(x + y) top``), more are
    not; the denominator and the dense size stay well within theirs."""
    expr = (_X**2 - _Y**2) * top / (_X - _Y)
    num, den = sp.fraction(sp.together(expr))
    assert bnb._terms(num) == min(terms, CAP) and bnb._terms(den) <= bnb.MAX_TERMS
    assert bnb._dense(num) <= bnb.MAX_DENSE and bnb._dense(den) <= bnb.MAX_DENSE
    forms = bnb._forms(expr)
    assert forms[0] == expr
    assert (len(forms) > 1) == (terms <= bnb.MAX_TERMS), forms
    if terms <= bnb.MAX_TERMS:
        assert any(sp.expand(f - (_X + _Y) * top) == 0 for f in forms[1:]), forms


def test_a_core_whose_sign_shows_only_factored_is_proved_through_its_factored_form() -> None:
    """``(x - y)^2 A^6`` with ``A = x + y + z + 2`` written as ``A^6 x^2 - 2 A^6 x y + A^6 y^2``: its numerator expands
    to 130 terms (the walk bounds them by 252, within ``MAX_TERMS``); the natural enclosure of the expanded form
    straddles 0 along ``x = y`` on every box, the factored one is ``>= 0`` on the root box."""
    x, y, z = sp.symbols("x y z", real=True)
    A = x + y + z + 2
    core = A**6 * x**2 - 2 * A**6 * x * y + A**6 * y**2
    assert _expanded(sp.fraction(sp.together(core))[0]) <= bnb.MAX_TERMS
    forms = bnb._forms(core)
    assert any(sp.expand(f - (x - y) ** 2 * A**6) == 0 and f.is_Mul for f in forms[1:]), forms
    coordinates = [Coordinate(s, -1.0, 1.0, "parameter", str(s)) for s in (x, y, z)]
    problem = Problem("factored", 0, "test", coordinates, core, [], False, core, [], {}, 0, 0, {}, "test", [])
    outcome = bnb.branch_and_bound(problem, 10**7)
    assert outcome.status == "proved", outcome.reason
    ok, why, _ = bnb.replay(problem, bnb.decode(outcome.tree.encode(), 10**8))
    assert ok, why
