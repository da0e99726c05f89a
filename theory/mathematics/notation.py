"""A relation as the paper writes it: chains, absolute values and equalities instead of sympy's conjunctions.

sympy stores Lemma 1 as ``(alpha_i <= C_2/L) & (C_1/L <= alpha_i)``; the paper writes ``C_1/L <= alpha_i <= C_2/L``.
:func:`written` turns a relation into the chains a reader expects: conjuncts that share an end are joined into one
chain (``a <= b`` and ``b <= c``), two that bound a difference from both sides become an absolute value (``x - y <= c``
and ``y - x <= c``: ``|x - y| <= c``), and two opposite ones become an equality. :func:`text` prints them in plain text
(``^`` for powers, ``|x|``, ``sum_{i in I_N}`` for a sum over the selected tokens), :func:`mathml` as presentation
MathML. The relation itself is unchanged: this is only how it is shown (records keep sympy's ``formula``).

A record's relation is untrusted (a user's statements file writes it): :func:`relation_from_srepr` rebuilds it from
its ``srepr`` with a reader that accepts only sympy class names from :data:`SREPR_NAMES` and literals (never
``eval``), with the size bounded and no huge power computed.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from typing import Any

import sympy as sp
from sympy.printing.str import StrPrinter

#: sympy names the srepr reader accepts (classes and constants; nothing else is looked up)
SREPR_NAMES = frozenset({
    "Symbol", "Dummy", "Integer", "Float", "Rational", "Add", "Mul", "Pow", "Abs", "Min", "Max", "exp", "log",
    "sqrt", "sin", "cos", "tanh", "floor", "ceiling", "sign", "Sum", "Product", "Piecewise", "ExprCondPair",
    "Indexed", "IndexedBase", "Idx", "Tuple", "Function", "And", "Or", "Not", "LessThan", "StrictLessThan",
    "GreaterThan", "StrictGreaterThan", "Equality", "Unequality", "true", "false", "oo", "pi", "E", "nan", "zoo",
    "Half", "One", "Zero", "NegativeOne", "Infinity", "NegativeInfinity", "Str",
})
#: the largest srepr rebuilt (characters, syntax-tree nodes)
SREPR_CHARS = 20000
SREPR_NODES = 4000


#: the largest exact power of a number computed when a relation is read (bits); larger ones stay unevaluated
POWER_BITS = 4096


def _objects() -> dict[str, Any]:
    from sympy.core.symbol import Str
    from sympy.functions.elementary.piecewise import ExprCondPair

    found = {n: getattr(sp, n) if hasattr(sp, n) else getattr(sp.S, n, None) for n in SREPR_NAMES}
    found.update(ExprCondPair=ExprCondPair, Str=Str)
    missing = sorted(n for n, v in found.items() if v is None)
    assert not missing, f"sympy has no {missing}"
    return found


def _affordable(base: Any, exponent: Any) -> bool:
    """Whether sympy may evaluate ``base ** exponent`` (a power of an exact number with at most :data:`POWER_BITS`
    bits, a root of one with at most 30 digits; anything symbolic or inexact)."""
    if not (isinstance(base, sp.Rational) and isinstance(exponent, sp.Rational)):
        return True
    size = max(abs(base.p), base.q).bit_length()
    if isinstance(exponent, sp.Integer):
        return size * abs(int(exponent)) <= POWER_BITS
    return size <= 100


def _evaluated(expr: Any) -> Any:
    """``expr`` rebuilt bottom-up with sympy's evaluation on (so that it prints as the statement it was written
    from), except powers that are not :func:`_affordable` and relations (a closed claim stays a claim)."""
    if not isinstance(expr, sp.Basic) or not expr.args or isinstance(expr, (sp.Symbol, sp.Indexed, sp.Idx)):
        return expr
    args = [_evaluated(a) for a in expr.args]
    if isinstance(expr, (sp.Rel, sp.logic.boolalg.BooleanFunction)) or (
            isinstance(expr, sp.Pow) and not _affordable(*args)):
        with sp.evaluate(False):
            return expr.func(*args)
    return expr.func(*args)


@functools.lru_cache(maxsize=256)
def _rebuilt(text: str) -> Any:
    return _relation_from_srepr(text)


def relation_from_srepr(text: str) -> Any:
    """The sympy relation of a record's ``srepr`` (:func:`_relation_from_srepr`; the last few are kept: a report
    shows each relation several times)."""
    if not isinstance(text, str):
        raise ValueError("no srepr")
    return _rebuilt(text)


def _relation_from_srepr(text: str) -> Any:
    """The sympy relation of a record's ``srepr``, read without ``eval``: only names in :data:`SREPR_NAMES`,
    literals and keyword flags; built with sympy's evaluation off, then evaluated bottom-up except for big powers
    (:func:`_evaluated`). ValueError otherwise."""
    if not isinstance(text, str) or len(text) > SREPR_CHARS:
        raise ValueError("no srepr, or too long to render")
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise ValueError(f"not a sympy srepr: {type(exc).__name__}") from None
    if sum(1 for _ in ast.walk(tree)) > SREPR_NODES:
        raise ValueError("too large to render")

    objects = _objects()

    def name(node: ast.Name) -> Any:
        if node.id not in SREPR_NAMES:
            raise ValueError(f"name {node.id!r} is not rendered")
        return objects[node.id]

    def build(node: ast.AST) -> Any:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str, bool)):
            if isinstance(node.value, str) and len(node.value) > 200:
                raise ValueError("a name too long to render")
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant) \
                and isinstance(node.operand.value, (int, float)) and not isinstance(node.operand.value, bool):
            return -node.operand.value
        if isinstance(node, ast.Tuple):
            return tuple(build(e) for e in node.elts)
        if isinstance(node, ast.Name):
            value = name(node)
            if isinstance(value, type) or value is sp.Function:  # a class named without a call: refused
                raise ValueError(f"name {node.id!r} is not rendered")
            return value
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name):
                func = name(node.func)
            elif isinstance(node.func, ast.Call) and isinstance(node.func.func, ast.Name) and node.func.func.id == "Function":
                func = build(node.func)  # an undefined function f = Function('f'), then f(x)
            else:
                raise ValueError("only calls of sympy names are rendered")
            args = [build(a) for a in node.args]
            kwargs = {}
            for kw in node.keywords:
                value = build(kw.value)
                if kw.arg is None or not isinstance(value, (bool, int, str)):
                    raise ValueError("only flag keywords are rendered")
                kwargs[kw.arg] = value
            return func(*args, **kwargs)
        raise ValueError(f"{type(node).__name__} is not rendered")

    try:
        with sp.evaluate(False):
            expr = build(tree.body)
        expr = _evaluated(expr)
    except ValueError:
        raise
    except (RecursionError, MemoryError):
        raise ValueError("too deeply nested to render") from None
    except Exception as exc:  # sympy refusing the arguments
        raise ValueError(f"sympy cannot rebuild it: {type(exc).__name__}") from None
    if not isinstance(expr, sp.Basic):
        raise ValueError("not a sympy expression")
    return expr


#: the relation signs, in text and in MathML
SIGNS = {"<=": "\u2264", "<": "<", ">=": "\u2265", ">": ">", "=": "=", "!=": "\u2260"}


@dataclass(frozen=True)
class Chain:
    """``parts[0] ops[0] parts[1] ops[1] ...`` (``ops`` from :data:`SIGNS`)."""

    parts: tuple[Any, ...]
    ops: tuple[str, ...]


def _sides(rel: Any) -> tuple[Any, str, Any] | None:
    """``(small, sign, large)`` of a comparison (``a >= b`` read as ``b <= a``); None for anything else."""
    for kind, sign, flip in ((sp.LessThan, "<=", False), (sp.StrictLessThan, "<", False),
                             (sp.GreaterThan, "<=", True), (sp.StrictGreaterThan, "<", True),
                             (sp.Equality, "=", False), (sp.Unequality, "!=", False)):
        if isinstance(rel, kind):
            a, b = rel.args
            return (b, sign, a) if flip else (a, sign, b)
    return None


def _negated(a: Any, b: Any) -> bool:
    try:
        return bool(sp.expand(a + b) == 0)
    except Exception:  # an unevaluated or odd expression: not recognised, shown as it is
        return False


def written(relation: Any) -> list[Chain | Any]:
    """The conjuncts of ``relation`` as chains (see module docstring); an item that is not a comparison is kept as
    it is (a boolean, a relation of a kind not recognised)."""
    parts = list(relation.args) if isinstance(relation, sp.And) else [relation]
    sides = [_sides(p) for p in parts]
    if any(s is None for s in sides):
        return parts
    pending: list[tuple[Any, str, Any]] = [s for s in sides if s is not None]
    reversed_sides = [s for s, p in zip(sides, parts) if isinstance(p, (sp.GreaterThan, sp.StrictGreaterThan))]
    out: list[Chain | Any] = []
    # two opposite non-strict comparisons: an equality; a difference bounded from both sides: an absolute value
    k = 0
    while k < len(pending):
        a, op, b = pending[k]
        match = None
        for j in range(k + 1, len(pending)):
            c, op2, d = pending[j]
            if op == op2 == "<=" and a == d and b == c:
                match = (j, Chain((a, b), ("=",)))
            elif op == op2 and b == d and _negated(a, c):
                first = c if getattr(a, "could_extract_minus_sign", lambda: False)() else a
                match = (j, Chain((sp.Abs(first, evaluate=False), b), (op,)))
            if match:
                break
        if match:
            out.append(match[1])
            del pending[match[0]]
            del pending[k]
        else:
            k += 1
    # comparisons sharing an end: one chain
    chains = [Chain((a, b), (op,)) for a, op, b in pending]
    flipped = {id(c) for c, (a, op, b) in zip(chains, pending) if (a, op, b) in reversed_sides}
    joined = True
    while joined:
        joined = False
        for x in chains:
            for y in chains:
                if x is not y and x.ops[-1] in ("<=", "<") and y.ops[0] in ("<=", "<") and x.parts[-1] == y.parts[0]:
                    chains.remove(x)
                    chains.remove(y)
                    chains.append(Chain(x.parts + y.parts[1:], x.ops + y.ops))
                    joined = True
                    break
            if joined:
                break
    # a comparison written with >= that joined no chain is shown as it was written
    return out + [Chain(c.parts[::-1], (_REVERSED[c.ops[0]],)) if id(c) in flipped else c for c in chains]


_REVERSED = {"<=": ">=", "<": ">"}


class _Printer(StrPrinter):
    """sympy's text printer with the paper's conventions: ``^``, ``|x|``, ``min``/``max``, ``xi_i``,
    ``sum_{i in I_N}``."""

    printmethod = "_attnbounds_text"  # not sympy's own: Indexed's ``_sympystr`` would win over _print_Indexed

    def _print_Pow(self, expr: Any, rational: bool = False) -> str:
        text = super()._print_Pow(expr, rational)
        return text.replace("**", "^")

    def _print_Abs(self, expr: Any) -> str:
        return f"|{self._print(expr.args[0])}|"

    def _print_Min(self, expr: Any) -> str:
        return f"min({', '.join(self._print(a) for a in expr.args)})"

    def _print_Max(self, expr: Any) -> str:
        return f"max({', '.join(self._print(a) for a in expr.args)})"

    def _print_IndexedBase(self, expr: Any) -> str:
        return self._print(expr.label)

    def _print_Idx(self, expr: Any) -> str:
        return self._print(expr.label)

    def _print_Piecewise(self, expr: Any) -> str:
        *cases, (last, cond) = expr.args
        text = self._print(last) if cond == sp.true else f"{self._print(last)} if {self._print(cond)}"
        for value, condition in reversed(cases):
            text = f"{self._print(value)} if {self._print(condition)} else {text}"
        return f"({text})"

    def _print_Indexed(self, expr: Any) -> str:
        return f"{self._print(expr.base)}_{', '.join(self._print(i) for i in expr.indices)}"

    def _print_Sum(self, expr: Any) -> str:
        body = self._print(expr.function)
        over = []
        for var, lo, hi in expr.limits:
            selected = lo == 1 and str(hi) == "N"  # statements sum over the selected tokens as (i, 1, N)
            over.append(f"{var} in I_N" if selected else f"{var}={self._print(lo)}..{self._print(hi)}")
        bare = expr.function.is_Atom or isinstance(expr.function, (sp.Indexed, sp.Piecewise))
        return f"sum_{{{', '.join(over)}}} {body if bare else f'({body})'}"


def _text(expr: Any) -> str:
    return _Printer().doprint(expr)


def text(relation: Any) -> str:
    """The relation in plain text as the paper writes it (``C_1/L <= alpha_i <= C_2/L``)."""
    items = []
    for item in written(relation):
        if isinstance(item, Chain):
            pieces = [_text(item.parts[0])]
            for op, part in zip(item.ops, item.parts[1:]):
                pieces += [op, _text(part)]
            items.append(" ".join(pieces))
        else:
            items.append(_text(item))
    return " and ".join(items)


def text_of_record(statement: dict[str, Any]) -> str:
    """A record's relation (its ``statement`` object) in plain text as the paper writes it, rebuilt from its
    ``srepr``; its ``formula`` (sympy's text) when the relation cannot be rebuilt."""
    try:
        return text(relation_from_srepr(statement.get("srepr", "")))
    except (ValueError, RecursionError):
        return str(statement.get("formula", ""))
    except Exception:  # the printer does not know a construct of a user's relation: sympy's own text
        return str(statement.get("formula", ""))


@functools.cache
def _mathml_printer() -> Any:
    """sympy's presentation MathML printer, with cases (``Piecewise``) as a brace and a table of value, condition."""
    from sympy.printing.mathml import MathMLPresentationPrinter

    class Printer(MathMLPresentationPrinter):
        def _print_Piecewise(self, expr: Any) -> Any:
            rows = self.dom.createElement("mtable")
            for value, condition in expr.args:
                row = self.dom.createElement("mtr")
                for item in (self._print(value), self._text("otherwise" if condition == sp.true else "if"),
                             None if condition == sp.true else self._print(condition)):
                    cell = self.dom.createElement("mtd")
                    if item is not None:
                        cell.appendChild(item)
                    row.appendChild(cell)
                rows.appendChild(row)
            out = self.dom.createElement("mrow")
            brace = self.dom.createElement("mo")
            brace.appendChild(self.dom.createTextNode("{"))
            out.appendChild(brace)
            out.appendChild(rows)
            return out

        def _text(self, words: str) -> Any:
            text = self.dom.createElement("mtext")
            text.appendChild(self.dom.createTextNode(f"\u00a0{words}\u00a0"))
            return text

    return Printer()


def mathml(relation: Any) -> str:
    """Presentation MathML (the content of a ``<math>`` element) of the relation as the paper writes it; what
    sympy's MathML printer does not know raises (the caller falls back to text)."""
    def one(expr: Any) -> str:
        if isinstance(expr, sp.Basic):  # an index Idx(i) is printed as "idx i": its label i instead
            expr = expr.xreplace({k: k.label for k in expr.atoms(sp.Idx)})
        text = _mathml_printer().doprint(expr)
        return text.replace("<mo><</mo>", "<mo>&lt;</mo>").replace("<mo>></mo>", "<mo>&gt;</mo>")  # unescaped

    items = []
    for item in written(relation):
        if isinstance(item, Chain):
            pieces = [one(item.parts[0])]
            for op, part in zip(item.ops, item.parts[1:]):
                pieces += [f"<mo>{SIGNS[op]}</mo>", one(part)]
            items.append("<mrow>" + "".join(pieces) + "</mrow>")
        else:
            items.append(one(item))
    return "<mrow>" + '<mtext>&#xa0;and&#xa0;</mtext>'.join(items) + "</mrow>"


def short(value: Any, digits: int = 4) -> str:
    """A number as people read it: whole numbers in full (with thin spaces from 10^4 on, ``37 037``; in powers of
    ten from 10^12 on), others to ``digits`` significant digits (``1.532e-05``); the text of non-finite ones (a record
    writes ``inf``, ``nan``) as ``∞``, ``−∞``, ``nan``; anything else as its text."""
    if isinstance(value, bool) or value is None:
        return "n/a" if value is None else str(value).lower()
    if isinstance(value, int):
        if abs(value) >= 10**12:
            return f"{value:.{digits - 1}e}"
        return f"{value:,}".replace(",", "\u2009") if abs(value) >= 10**4 else str(value)
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return str(value)
    if number != number:
        return "nan"
    if number in (float("inf"), float("-inf")):
        return "\u221e" if number > 0 else "\u2212\u221e"
    if number == int(number) and abs(number) < 10**12:
        return short(int(number), digits)
    return f"{number:.{digits}g}"
