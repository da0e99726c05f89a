"""The srepr reader (theory.mathematics.srepr): every expression the project writes reads back as itself, and text
that is not a whitelisted constructor call stays text."""

from __future__ import annotations

from typing import Any

import pytest
import sympy as sp
from hypothesis import given
from hypothesis import strategies as hs

from attnbounds.theory.mathematics import opaque, registry
from attnbounds.theory.mathematics.errors import InvalidArgument
from attnbounds.theory.mathematics.normalisers import sigmoid, softplus
from attnbounds.theory.mathematics.srepr import MAX_CHARS, parse_srepr


@pytest.mark.parametrize("sid", registry.ids())
def test_every_reading_reads_back_as_itself(sid: str) -> None:
    relation = registry.get(sid).relation
    text = sp.srepr(relation)
    back = parse_srepr(text, where=sid, exact=True)
    assert sp.srepr(back) == text and sp.sstr(back) == sp.sstr(relation)


def test_relaxed_problems_read_back_as_themselves() -> None:
    from attnbounds.theory.deciding.prover.relax import relax

    seen = 0
    for sid in ("corollary3[row,corrected]", "corollary3[entry,corrected]"):
        for p in relax(registry.get(sid)).problems:
            for expr in (p.core, p.margin, *p.constraints, *(a for a, _ in p.signs)):
                assert sp.srepr(parse_srepr(sp.srepr(expr), where=sid)) == sp.srepr(expr)
                seen += 1
    assert seen >= 6


x, y = sp.symbols("x y", real=True)
ATOMS = [x, y, sp.Integer(3), sp.Rational(2, 7), sp.Float("1.5e-300"), sp.pi, sp.E]
UNARY = [sp.exp, sp.log, sp.Abs, sp.sign, sigmoid, softplus, opaque.OAbs, opaque.Step, opaque.Sign, lambda e: -e]
BINARY = [sp.Add, sp.Mul, sp.Pow, sp.Min, sp.Max, opaque.OMax, opaque.OMin]


def _real(fn: Any, *args: sp.Basic) -> sp.Basic | None:
    """``fn(*args)`` when sympy builds it as a real expression (None: complex, undefined, or not built)."""
    try:
        out = fn(*args)
    except (TypeError, ValueError, ArithmeticError):
        return None
    bad = out.has(sp.I, sp.zoo, sp.nan, sp.oo, sp.re, sp.im) or any(
        p.base.is_number and p.base.is_negative and not p.exp.is_integer for p in out.atoms(sp.Pow))
    return None if bad else out


def _expressions() -> hs.SearchStrategy[sp.Basic]:
    def extend(children: hs.SearchStrategy[sp.Basic]) -> hs.SearchStrategy[sp.Basic]:
        return hs.one_of(hs.tuples(hs.sampled_from(UNARY), children).map(lambda t: _real(t[0], t[1])),
                         hs.tuples(hs.sampled_from(BINARY), children, children).map(lambda t: _real(*t))
                         ).filter(lambda e: e is not None)

    return hs.recursive(hs.sampled_from(ATOMS), extend, max_leaves=8)


@given(_expressions(), hs.booleans())
def test_any_expression_of_the_vocabulary_reads_back(expr: sp.Basic, strict: bool) -> None:
    for e in (expr, (sp.Lt if strict else sp.Le)(expr, y, evaluate=False)):
        text = sp.srepr(e)
        assert sp.srepr(parse_srepr(text, where="test", exact=True)) == text


@pytest.mark.parametrize("value", [sp.oo, -sp.oo, sp.zoo, sp.nan, sp.true, sp.false, sp.pi, sp.EulerGamma])
def test_constants_read_back(value: sp.Basic) -> None:
    assert parse_srepr(sp.srepr(value), where="test", exact=True) == value or value is sp.nan


N_ = sp.Symbol("N", integer=True, positive=True)
IDX = sp.Idx("i", (1, N_))


@pytest.mark.parametrize("expr", [sp.Idx("i"), sp.Idx("i", 5), IDX, sp.IndexedBase("x"),
                                  sp.IndexedBase("x", shape=(3,)), sp.IndexedBase("x", shape=(N_,))[IDX],
                                  sp.Sum(sp.IndexedBase("x")[IDX], (IDX, 1, N_))], ids=str)
def test_indices_with_a_range_and_indexed_bases_with_a_shape_read_back(expr: sp.Basic) -> None:
    """An index is sympy's ``Idx(label)`` or ``Idx(label, range)``, an indexed base ``IndexedBase(label)`` or
    ``IndexedBase(label, shape)``: both spellings read back as themselves."""
    text = sp.srepr(expr)
    assert sp.srepr(parse_srepr(text, where="test", exact=True)) == text


PAYLOADS = [
    "__import__('os').system('true')", "Symbol('x').__class__", "Symbol('x').__class__.__mro__[-1].__subclasses__()",
    "Integer(1)[0]", "(lambda: 1)()", "[Symbol('x') for _ in range(3)]", "Symbol('x', **{'real': True})",
    "Symbol(*['x'])", "Symbol('x; import os')", "Symbol('__class__')", "Symbol('x', evil=True)",
    "Symbol('x', real='yes')", "Float('1.0', precision=53, foo=1)", "Add(1, 2)", "Pow(Integer(10), Integer(10**9))",
    "Pow(Integer(10), Integer(1000000000))", "Function('f')(Symbol('x'))", "exec('1')", "Dummy('q', dummy_index=True)",
    "Integer(" + "9" * 5000 + ")", "Symbol('x') + Integer(1)", "not_a_function(Integer(1))", "os", "None", "b'x'",
    "Tuple(*[Integer(1)])", "IndexedBase(Integer(1))", "", "Symbol(", "x" * (MAX_CHARS + 1),
]


@pytest.mark.parametrize("text", PAYLOADS, ids=lambda t: t[:40])
def test_text_outside_the_whitelist_is_refused_naming_where(text: str) -> None:
    with pytest.raises(InvalidArgument, match="^record 'r': field"):
        parse_srepr(text, where="record 'r': field")


@pytest.mark.parametrize("base", [2, 10**30, -(10**30)])
def test_a_power_of_two_numbers_is_bounded_by_its_exponent_not_its_base(base: int) -> None:
    """``Pow`` of two numbers is computed when read, so its exponent is bounded (``MAX_EXPONENT``, either sign); its
    base may be any literal: ``(10^30)^2`` reads back as the number, ``2^(MAX_EXPONENT + 1)`` is refused fast."""
    from attnbounds.theory.mathematics.srepr import MAX_EXPONENT

    for exponent in (2, MAX_EXPONENT, -MAX_EXPONENT):
        text = f"Pow(Integer({base}), Integer({exponent}))"
        assert parse_srepr(text, where="f") == sp.Integer(base) ** exponent
    for exponent in (MAX_EXPONENT + 1, -MAX_EXPONENT - 1):
        with pytest.raises(InvalidArgument, match=f"the exponent {exponent} "):
            parse_srepr(f"Pow(Integer({base}), Integer({exponent}))", where="f")


def test_a_number_where_text_belongs_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="expected sympy srepr text"):
        parse_srepr(12, where="f")


def test_a_text_of_up_to_one_million_characters_is_read_and_a_longer_one_refused_naming_the_limit() -> None:
    """The size bound of a record's expressions is one million characters (``MAX_CHARS``): a text of exactly that
    length is read, one character more is refused before it is parsed, with a message that names the bound."""
    body = "Integer(1)"
    assert parse_srepr(" " * (1_000_000 - len(body)) + body, where="f") == 1
    with pytest.raises(InvalidArgument, match="^f: the expression has 1000001 characters; at most 1000000 are read$"):
        parse_srepr(" " * (1_000_001 - len(body)) + body, where="f")


def test_an_expression_that_does_not_write_back_is_refused_when_exact() -> None:
    text = "Rational(2, 4)"  # sympy writes 1/2 as Rational(1, 2): no expression's srepr is this text
    assert parse_srepr(text, where="f") == sp.Rational(1, 2)
    with pytest.raises(InvalidArgument, match="does not write back"):
        parse_srepr(text, where="f", exact=True)


def test_an_unevaluated_closed_claim_keeps_both_sides() -> None:
    claim = sp.Ge(sp.Integer(1) - (sp.Integer(1) - sp.Rational(4, 5)) ** 2, sp.Rational(99, 100), evaluate=False)
    text = sp.srepr(sp.Ge(sp.Add(1, sp.Mul(-1, sp.Pow(sp.Add(1, sp.Rational(-4, 5), evaluate=False), 2, evaluate=False),
                                            evaluate=False), evaluate=False), sp.Rational(99, 100), evaluate=False))
    back = parse_srepr(text, where="f", exact=True)
    assert isinstance(back, sp.GreaterThan) and sp.srepr(back) == text and claim is not sp.false


def test_a_symbol_name_of_up_to_64_characters_is_read_and_a_longer_one_refused() -> None:
    """A symbol's name is a plain identifier of at most 64 characters: exactly 64 reads back as itself, 65 is
    refused naming the symbol."""
    name = "x" * 64
    assert parse_srepr(f"Symbol('{name}')", where="f") == sp.Symbol(name)
    with pytest.raises(InvalidArgument, match="the symbol name 'x{65}'"):
        parse_srepr(f"Symbol('{'x' * 65}')", where="f")
