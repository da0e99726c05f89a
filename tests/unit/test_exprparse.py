"""The expression parser bounds what it accepts: size, depth, exponents, and real finite constants, refused fast."""

import time

import pytest
import sympy as sp

from attnbounds.theory.mathematics.errors import InvalidArgument
from attnbounds.theory.mathematics.exprparse import MAX_CHARS, MAX_DEPTH, MAX_EXPONENT, MAX_NODES, parse_expression

J = sp.Symbol("J", real=True)
NAMES = {"J": J, "N": sp.Symbol("N", real=True), "xi": sp.IndexedBase("xi", real=True), "i": sp.Idx("i")}


def parse(text: str) -> sp.Basic:
    return parse_expression(text, NAMES, where="test", relational=True)


@pytest.mark.parametrize("text, message", [
    # exponents: the examples, then others
    ("10**10**10", "constant exponents must lie in"),
    ("9**9**9", "constant exponents must lie in"),
    ("2**100000", "constant exponents must lie in"),
    ("J**1e10", "constant exponents must lie in"),
    ("J <= (J + 1)**(2**11)", "constant exponents must lie in"),
    ("Rational(1, 10**400)", "exceeds the double range"),
    ("2**1024", "exceeds the double range"),
    ("2**1023*2", "within the double range"),
    ("(10*J)**400", "outside the double range"),  # sympy expands the constant: caught after parsing
    ("J <= Rational(1, 3)**1024", "below the double range"),
    ("J <= Rational(1, 10**300)**1024", "below the double range"),  # once a ValueError (4300-digit limit)
    ("J <= 10.0**-200 * 10.0**-200", "below the double range"),
    ("J <= (3*J)**-1024", "outside the double range"),  # sympy expands 3**-1024: caught after parsing
    ("J <= 1e-999*J", "outside the double range"),  # the decimal 10^-999, an exact rational below the doubles
    ("J <= (3/2)**1000*(5/7)**1000*(11/13)**1000*(17/19)**1000*(23/29)**1000*(31/37)**1000",
     "numerator or denominator"),
    ("exp(1000)", "exceeds the double range"),
    ("J <= exp(700)*exp(700)", "within the double range"),
    ("E**1000", "exceeds the double range"),
    ("1e999", "within the double range"),
    ("1" * 400, "within the double range"),
    # constants that are not real or not finite
    ("J <= Min()", "has no argument"),
    ("J <= Max()", "has no argument"),
    ("J <= sqrt(-1)", "not a finite real number"),
    ("J <= log(0)", "not a finite real number"),
    ("J <= log(-2)", "not a finite real number"),
    ("J <= (-8)**(1/3)", "not a finite real number"),
    ("J <= 0**-1", "not a finite real number"),
    ("J <= J/0", "divides by zero"),
    ("J <= J/(2 - 2)", "divides by zero"),
    ("J <= Rational(1, 0)", "divides by zero"),
    ("J <= J/(J - J)", "complex infinity"),
    ("J <= 3j", "complex literal"),
    # size and depth
    ("J <= " + "exp(" * (MAX_DEPTH + 1) + "J" + ")" * (MAX_DEPTH + 1), f"at most {MAX_DEPTH}"),
    ("J <= " + "-" * 1500 + "1", f"at most {MAX_NODES}"),
    ("J <= " + " + ".join(["J"] * 300), f"at most {MAX_NODES}"),
    ("J <= " + "1+" * MAX_CHARS + "1", f"at most {MAX_CHARS}"),
    ("J <= " + "(" * 250 + "J" + ")" * 250, "too many nested parentheses"),
])
def test_hostile_expressions_are_refused_fast_with_a_message(text, message):
    start = time.perf_counter()
    with pytest.raises(InvalidArgument, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse(text)
    assert time.perf_counter() - start < SLOW_S  # a hang or an exponential blow-up, not a speed check


#: far above the milliseconds these take (the bound catches hangs and blow-ups on any machine, loaded or not)
SLOW_S = 60.0


@pytest.mark.parametrize("text", [
    "J <= 2**1000*J", f"J <= J**{MAX_EXPONENT}", f"J <= (J + 1)**-{MAX_EXPONENT}", "J <= exp(709)",
    "J <= 1e-300*J", "J <= Rational(1, 3)**600", "J <= Max(J, 1)", "J <= sqrt(-J**2 + 4)",
    "J <= Sum(xi[i], (i, 1, N))", "J <= " + "exp(" * 12 + "J" + ")" * 12, "J <= Abs(" + "exp(" * 20 + "J" + ")" * 20 + ")",
])
def test_large_but_bounded_expressions_are_accepted_fast(text):
    start = time.perf_counter()
    expr = parse(text)
    assert isinstance(expr, sp.Basic) and time.perf_counter() - start < SLOW_S


def test_non_real_results_of_symbolic_simplification_are_refused():
    with pytest.raises(InvalidArgument, match="imaginary unit"):
        parse_expression("sqrt(-J**2)", NAMES, where="test")  # sympy makes it I*Abs(J)
    with pytest.raises(InvalidArgument, match="non-real"):
        parse("J <= log(-exp(J))")  # sympy refuses to compare it


@pytest.mark.parametrize("text, value", [("0.1", sp.Rational(1, 10)), ("1e-5", sp.Rational(1, 100000)),
                                         ("2.", sp.Integer(2)), ("0.1 + 0.2", sp.Rational(3, 10)),
                                         ("sqrt(0.5)", sp.sqrt(2) / 2), ("exp(-1.5)", sp.exp(sp.Rational(-3, 2))),
                                         ("1.25e3", sp.Integer(1250))])
def test_a_decimal_literal_is_the_rational_it_spells(text, value):
    """``0.1`` is 1/10, not the double nearest it: a bound ``alpha_min < 0.1`` at ten equal weights is an equality
    (violated), which a double 5.6e-18 above 1/10 would turn into a proof."""
    parsed = parse_expression(text, {}, where="test")
    assert parsed == value and not parsed.atoms(sp.Float)
