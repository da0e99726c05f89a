"""Read sympy's ``srepr`` text back into an expression without running code: what every record reader uses.

``sympy.srepr`` writes an expression as nested constructor calls (``Add(Symbol('x', real=True), Integer(1))``).
Handing that text to ``eval``, ``sympify`` or ``parse_expr`` runs it as Python, so a records file could run code
when it is read (an attribute walk from any reachable object reaches ``os.system``). :func:`parse_srepr` instead
parses the text with :mod:`ast` and builds the expression itself, node by node, from a whitelist:

- a call of a name in :data:`CONSTRUCTORS` with positional arguments and the keyword arguments that constructor
  takes in ``srepr`` (a symbol's boolean assumptions, a float's ``precision``, a dummy's ``dummy_index``);
- the constants of :data:`CONSTANTS` (``pi``, ``oo``, ``true``, ...) by name;
- literal numbers, strings and booleans, and a minus sign before a number.

Anything else (an attribute, a subscript, a lambda, an unknown name, a keyword a constructor does not take, a
symbol whose name is not a plain identifier) is refused with :class:`~attnbounds.theory.mathematics.errors.InvalidArgument`
naming it. Every constructor is called as ``eval`` would call it, so that the expression read is the one written
(sympy's ``eval(srepr(e)) == e``, printing included); size is bounded (:data:`MAX_CHARS` characters,
:data:`MAX_NODES` syntax nodes, Python's parser bounds the nesting, and a power of two numbers is evaluated only
for an exponent of at most :data:`MAX_EXPONENT`).
"""

from __future__ import annotations

import ast
import keyword
from typing import Any, Callable, Mapping

import sympy as sp
from sympy.core.assumptions import _assume_defined
from sympy.functions.elementary.piecewise import ExprCondPair

from attnbounds.theory.mathematics import opaque
from attnbounds.theory.mathematics.errors import InvalidArgument

#: the longest srepr text read, in characters (a relaxed problem's core is a few kB; a face a few tens)
MAX_CHARS = 1_000_000
#: the most syntax-tree nodes a text may have
MAX_NODES = 200_000
#: the largest exponent of a power whose base and exponent are both numbers (sympy would compute it)
MAX_EXPONENT = 4096

_SYMBOLS: dict[str, Any] = {"Symbol": sp.Symbol, "Dummy": sp.Dummy}
_NUMBERS: dict[str, Any] = {"Integer": sp.Integer, "Rational": sp.Rational, "Float": sp.Float}
#: sympy's operations and functions
_OPERATIONS: dict[str, Any] = {
    "Add": sp.Add, "Mul": sp.Mul, "Pow": sp.Pow, "exp": sp.exp, "log": sp.log, "Abs": sp.Abs, "sign": sp.sign,
    "Heaviside": sp.Heaviside, "LessThan": sp.LessThan, "StrictLessThan": sp.StrictLessThan,
    "GreaterThan": sp.GreaterThan, "StrictGreaterThan": sp.StrictGreaterThan, "And": sp.And, "Min": sp.Min,
    "Max": sp.Max, "Piecewise": sp.Piecewise,
}
#: constructors that take no ``evaluate`` keyword
_STRUCTURAL: dict[str, Any] = {"Tuple": sp.Tuple, "Sum": sp.Sum, "Indexed": sp.Indexed, "IndexedBase": sp.IndexedBase,
                               "Idx": sp.Idx, "ExprCondPair": ExprCondPair}


def _functions() -> dict[str, Any]:
    """The project's own functions (opaque absolute value, max, step; the stable sigmoid and softplus)."""
    from attnbounds.theory.mathematics.normalisers import sigmoid, softplus

    return {"OAbs": opaque.OAbs, "OMax": opaque.OMax, "OMin": opaque.OMin, "Step": opaque.Step, "Sign": opaque.Sign,
            "sigmoid": sigmoid, "softplus": softplus}


#: every constructor a text may call
CONSTRUCTORS: frozenset[str] = frozenset({*_SYMBOLS, *_NUMBERS, *_OPERATIONS, *_STRUCTURAL, "OAbs", "OMax", "OMin",
                                          "Step", "Sign", "sigmoid", "softplus"})
#: constants a text may name
CONSTANTS: dict[str, sp.Basic] = {"pi": sp.pi, "E": sp.E, "oo": sp.oo, "zoo": sp.zoo, "nan": sp.nan,
                                  "true": sp.true, "false": sp.false, "EulerGamma": sp.EulerGamma}
#: keyword arguments each kind of constructor may take, besides a symbol's assumptions
_KEYWORDS = {"Float": {"precision"}, "Dummy": {"dummy_index"}}


def parse_srepr(text: Any, *, where: str, exact: bool = False, functions: Mapping[str, Any] | None = None) -> sp.Basic:
    """The sympy expression ``text`` (an ``srepr``) spells, built from the whitelist of the module docstring.

    ``where`` names the source for messages (``"record 'lemma1': relaxation.problems[0].core"``). ``exact``: the
    expression must write back as exactly ``text`` (a statement whose printed forms are compared): it is built as
    ``eval`` would build it, or else unevaluated (a closed claim keeps both sides as written), whichever writes back
    as ``text``; neither is refused."""
    if not isinstance(text, str):
        raise InvalidArgument(f"{where}: expected sympy srepr text, got {type(text).__name__}")
    if len(text) > MAX_CHARS:
        raise InvalidArgument(f"{where}: the expression has {len(text)} characters; at most {MAX_CHARS} are read")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise InvalidArgument(f"{where}: not sympy srepr text: {type(exc).__name__}: {exc}"[:300]) from None
    count = sum(1 for _ in ast.walk(tree))
    if count > MAX_NODES:
        raise InvalidArgument(f"{where}: the expression has {count} syntax nodes; at most {MAX_NODES} are read")
    names = {**_functions(), **(functions or {})}
    for evaluate in (True, False):
        try:
            value = _Builder(where, names, evaluate).build(tree.body)
        except InvalidArgument:
            raise
        except (TypeError, ValueError, AttributeError, ArithmeticError, IndexError, KeyError, RecursionError,
                MemoryError, sp.SympifyError) as exc:
            raise InvalidArgument(f"{where}: sympy cannot build the expression: {type(exc).__name__}: {exc}"[:300]) from None
        if not isinstance(value, sp.Basic):
            raise InvalidArgument(f"{where}: {text[:80]!r} is not a sympy expression")
        if not exact or sp.srepr(value) == text.strip():
            return value
    raise InvalidArgument(f"{where}: the expression does not write back as it is written (built as eval would, or "
                          f"unevaluated): it is not the srepr of a sympy expression")


class _Builder:
    """The walk of :func:`parse_srepr` (one per text: ``where`` and the project's functions)."""

    def __init__(self, where: str, functions: Mapping[str, Any], evaluate: bool):
        self.where = where
        self.functions = functions
        #: False: operations and functions built unevaluated (``evaluate=False``)
        self.flags = {} if evaluate else {"evaluate": False}

    def refuse(self, node: ast.AST, what: str) -> InvalidArgument:
        return InvalidArgument(f"{self.where}: {what} at column {getattr(node, 'col_offset', '?')}: only sympy "
                               f"constructors ({', '.join(sorted(CONSTRUCTORS))}), the constants "
                               f"{', '.join(sorted(CONSTANTS))} and literal numbers and strings are read")

    def build(self, node: ast.AST) -> Any:
        if isinstance(node, ast.Constant):
            if isinstance(node.value, (bool, int, float, str)):
                return node.value
            raise self.refuse(node, f"the literal {node.value!r}")
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):  # -1 in Integer(-1); -oo
            if isinstance(node.operand, ast.Constant) and isinstance(node.operand.value, (int, float)) \
                    and not isinstance(node.operand.value, bool):
                return -node.operand.value
            if isinstance(node.operand, ast.Name) and node.operand.id in ("oo", "zoo"):
                return -CONSTANTS[node.operand.id]
        if isinstance(node, ast.Name):
            if node.id in CONSTANTS:
                return CONSTANTS[node.id]
            raise self.refuse(node, f"the name {node.id!r}")
        if isinstance(node, ast.Call):
            return self.call(node)
        raise self.refuse(node, f"a {type(node).__name__} expression")

    def call(self, node: ast.Call) -> Any:
        if not isinstance(node.func, ast.Name):
            raise self.refuse(node, "a call of something other than a constructor's name")
        name = node.func.id
        args = [self.build(a) for a in node.args]
        kwargs: dict[str, Any] = {}
        for kw in node.keywords:
            if kw.arg is None:
                raise self.refuse(kw, "a ** argument")
            kwargs[kw.arg] = self.build(kw.value)
        if name in _SYMBOLS:
            return self.symbol(node, name, args, kwargs)
        if name in _NUMBERS:
            self.keywords(node, name, kwargs, _KEYWORDS.get(name, set()))
            if not all(isinstance(a, (int, float, str)) and not isinstance(a, bool) for a in args):
                raise self.refuse(node, f"{name} of something other than literal numbers")
            return _NUMBERS[name](*args, **kwargs)
        if name in ("IndexedBase", "Idx"):
            return self.symbol(node, name, args, kwargs)
        self.keywords(node, name, kwargs, set())
        if not all(isinstance(a, sp.Basic) for a in args):
            raise self.refuse(node, f"{name} of a literal (sympy writes numbers as Integer, Float or Rational)")
        if name == "Pow" and len(args) == 2 and all(isinstance(a, sp.Number) for a in args) \
                and abs(args[1]) > MAX_EXPONENT:
            raise self.refuse(node, f"a power of two numbers with the exponent {str(args[1])[:40]} (at most "
                                    f"{MAX_EXPONENT} is computed)")
        if name in _OPERATIONS:
            return _OPERATIONS[name](*args, **self.flags)
        if name in _STRUCTURAL:
            return _STRUCTURAL[name](*args)
        if name in self.functions:
            fn: Callable[..., Any] = self.functions[name]
            return fn(*args, **self.flags)
        raise self.refuse(node, f"a call of {name!r}")

    def keywords(self, node: ast.AST, name: str, kwargs: Mapping[str, Any], allowed: set[str]) -> None:
        bad = sorted(set(kwargs) - allowed)
        if bad:
            raise self.refuse(node, f"{name} with the keyword(s) {', '.join(bad)}")
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in kwargs.values()):
            raise self.refuse(node, f"{name} with a keyword that is not a whole number")

    def symbol(self, node: ast.AST, name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """A symbol (or indexed base, or index): a plain identifier for a name (every printer and ``lambdify``
        may spell it as Python), boolean assumptions only."""
        if name in ("IndexedBase", "Idx"):
            if len(args) not in (1, 2) or not isinstance(args[0], sp.Symbol) or \
                    not all(isinstance(a, sp.Basic) for a in args):
                raise self.refuse(node, f"{name} of something other than a symbol")
            self.assumptions(node, name, kwargs)
            return _STRUCTURAL[name](*args, **kwargs)
        extra = {k: v for k, v in kwargs.items() if k in _KEYWORDS.get(name, set())}
        self.keywords(node, name, extra, _KEYWORDS.get(name, set()))
        assumptions = {k: v for k, v in kwargs.items() if k not in extra}
        self.assumptions(node, name, assumptions)
        if len(args) != 1 or not isinstance(args[0], str):
            raise self.refuse(node, f"{name} without a single name")
        label = args[0]
        if not label.isidentifier() or keyword.iskeyword(label) or label.startswith("__") or len(label) > 64:
            raise self.refuse(node, f"the symbol name {label[:80]!r} (a symbol's name must be a plain identifier)")
        return _SYMBOLS[name](label, **extra, **assumptions)

    def assumptions(self, node: ast.AST, name: str, assumptions: Mapping[str, Any]) -> None:
        for k, v in assumptions.items():
            if k not in _assume_defined or not isinstance(v, bool):
                raise self.refuse(node, f"{name} with {k}={v!r} (only sympy's boolean assumptions)")


__all__ = ["CONSTANTS", "CONSTRUCTORS", "MAX_CHARS", "MAX_EXPONENT", "MAX_NODES", "parse_srepr"]
