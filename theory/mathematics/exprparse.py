"""Parse a sympy expression from text without running arbitrary code, and within bounded time and size.

``sympy.sympify`` evaluates its input as Python. Text that comes from a file (a user's TOML
statement, a serialised normaliser) is first tokenised and every name checked against a
whitelist; attribute access, keywords, lambdas, strings and indexing of anything but a declared
indexed base are refused with a message naming the offending token. Only then is the text handed
to ``sympy.parse_expr`` with empty builtins.

Size and cost are bounded before sympy sees the text: at most :data:`MAX_CHARS` characters,
:data:`MAX_NODES` syntax-tree nodes nested at most :data:`MAX_DEPTH` deep, and every constant
exponent at most :data:`MAX_EXPONENT` in absolute value. Constant sub-expressions are folded in
doubles first, so that ``10**10**10`` is refused instead of computed, and constants that are not
real, not finite or beyond the double range (``Min()``, ``log(-1)``, ``1/0``, ``exp(1000)``,
``2**2000``) are refused with a message naming them; the parsed expression is checked once more for
such constants (sympy's own simplification can produce them, e.g. ``(10*x)**400``).
"""

from __future__ import annotations

import ast
import io
import keyword
import math
import tokenize
import unicodedata
from typing import Any, Callable, Mapping, cast

import sympy as sp

from attnbounds.theory.mathematics.errors import InvalidArgument

#: sympy functions and constants allowed in user expressions.
FUNCTIONS: dict[str, Any] = {
    "exp": sp.exp, "log": sp.log, "sqrt": sp.sqrt, "Abs": sp.Abs, "abs": sp.Abs, "Min": sp.Min, "Max": sp.Max,
    "min": sp.Min, "max": sp.Max, "Sum": sp.Sum, "Rational": sp.Rational, "pi": sp.pi, "E": sp.E,
}


def _decimal(literal: Any, *args: Any) -> sp.Expr:
    """A decimal literal as the exact rational it spells: ``0.1`` is ``1/10``, not the double nearest it (a bound
    ``alpha_min < 0.1`` at ten equal weights is an equality, violated, whatever a double says)."""
    return sp.Rational(literal) if isinstance(literal, str) else sp.Float(literal, *args)


#: names sympy's parser itself emits when it rewrites literals.
_PARSER_NAMES = {"Integer": sp.Integer, "Float": _decimal, "Rational": sp.Rational, "Symbol": sp.Symbol}
#: the constructors sympy's parser emits for an unevaluated expression (``exact``)
_UNEVALUATED = {"Add": sp.Add, "Mul": sp.Mul, "Pow": sp.Pow, "Ge": sp.Ge, "Le": sp.Le, "GreaterThan": sp.Ge,
                "LessThan": sp.Le, "Gt": sp.Gt, "Lt": sp.Lt, "StrictGreaterThan": sp.Gt, "StrictLessThan": sp.Lt,
                "And": sp.And, "BitwiseAnd": sp.And}
_OPS = {"+", "-", "*", "/", "**", "(", ")", ",", "[", "]"}
#: the longest expression accepted, in characters
MAX_CHARS = 2000
#: the most syntax-tree nodes an expression may have
MAX_NODES = 500
#: the deepest nesting of an expression's syntax tree
MAX_DEPTH = 24
#: the largest absolute value of a constant exponent
MAX_EXPONENT = 1024
#: constants (and folded constant sub-expressions) must lie within the double range
DOUBLE_MAX = 1.7976931348623157e308
#: an exact rational constant's size (bits of numerator over denominator) must lie within +-MAX_BITS
MAX_BITS = 1075
_CONSTANTS = {"pi": math.pi, "E": math.e}
#: functions of one argument folded in doubles when the argument is constant
_UNARY: dict[str, Callable[[float], float]] = {"exp": math.exp, "log": math.log, "sqrt": math.sqrt, "Abs": abs, "abs": abs}
#: non-real or non-finite sympy constants, by what a message calls them
_SPECIAL = ((sp.I, "the imaginary unit I"), (sp.zoo, "complex infinity (a division by zero)"), (sp.oo, "infinity"),
            (-sp.oo, "minus infinity"), (sp.nan, "NaN"))


def parse_expression(text: str, names: Mapping[str, Any], *, where: str, relational: bool = False,
                     exact: bool = False) -> sp.Basic:
    """``text`` as a sympy expression whose free names are all keys of ``names`` or :data:`FUNCTIONS`.

    ``where`` names the source (e.g. ``"statement 'mine': key 'rhs'"``) for error messages.
    ``relational`` also allows ``<=``, ``>=``, ``<``, ``>`` (strict: decided as strict) and ``&`` (a conjunction of
    inequalities). Size, depth,
    exponents and constants are bounded (module docstring). ``exact`` reads every decimal literal as the
    exact rational it spells (``0.8`` is ``4/5``) and leaves the expression unevaluated (a closed claim keeps
    both of its sides, to be decided exactly).
    """
    ops = _OPS | ({"<=", ">=", "<", ">", "&"} if relational else set())
    if not isinstance(text, str) or not text.strip():
        raise InvalidArgument(f"{where}: expected a non-empty expression string, got {text!r}")
    if len(text) > MAX_CHARS:
        raise InvalidArgument(f"{where}: the expression has {len(text)} characters; at most {MAX_CHARS} are allowed")
    allowed = {**FUNCTIONS, **names}
    _check_tokens(text, allowed, names, ops, where)
    _check_tree(text, allowed, where)
    from sympy.parsing.sympy_parser import parse_expr, standard_transformations

    transformations = standard_transformations
    try:
        parser_names = {**_PARSER_NAMES, **(_UNEVALUATED if exact else {})}
        expr = parse_expr(text, local_dict=dict(allowed), global_dict={"__builtins__": {}, **parser_names},
                          transformations=transformations, evaluate=not exact)
    except Exception as exc:  # sympy raises many types for malformed input
        raise InvalidArgument(f"{where}: cannot parse {text!r}: {type(exc).__name__}: {exc}") from None
    if not isinstance(expr, sp.Basic):
        raise InvalidArgument(f"{where}: {text!r} is not an expression")
    if exact:
        expr = _exact_numbers(expr)
    check_constants(expr, f"{where}: {text!r}")
    return expr


def check_identifier(name: str, where: str) -> None:
    """Refuse a name that Python's parser would read as another: an identifier not in Unicode NFKC form (full-width
    letters, ligatures, superscripts and other compatibility forms) is normalised when parsed, so ``ｔ`` would
    stand for ``t`` (and a declared ``Ｔ`` for the temperature)."""
    normal = unicodedata.normalize("NFKC", name)
    if normal != name:
        raise InvalidArgument(f"{where}: the name {name!r} is not in Unicode NFKC form: Python reads it as "
                              f"{normal!r}, another name; write plain characters (e.g. {normal!r}) instead")


def _check_tokens(text: str, allowed: Mapping[str, Any], names: Mapping[str, Any], ops: set[str], where: str) -> None:
    """Every token a known name, a real number literal or an allowed operator."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError) as exc:
        raise InvalidArgument(f"{where}: cannot parse {text!r}: {exc}") from None
    previous = None
    for tok in tokens:
        if tok.type in (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER, tokenize.INDENT, tokenize.DEDENT):
            continue
        if tok.type == tokenize.NAME:
            check_identifier(tok.string, f"{where}: in {text!r}")
            if keyword.iskeyword(tok.string) or tok.string not in allowed:
                known = ", ".join(sorted(names)) or "none"
                raise InvalidArgument(f"{where}: unknown name {tok.string!r} in {text!r}; allowed symbols: {known}; "
                                      f"functions: {', '.join(sorted(FUNCTIONS))}")
        elif tok.type == tokenize.NUMBER:
            if tok.string.lower().endswith("j"):
                raise InvalidArgument(f"{where}: complex literal {tok.string!r} in {text!r} is not allowed")
        elif tok.type == tokenize.OP:
            if tok.string not in ops:
                raise InvalidArgument(f"{where}: operator {tok.string!r} in {text!r} is not allowed "
                                      f"(allowed: {' '.join(sorted(ops))})")
            if tok.string == "[" and not (previous is not None and previous.type == tokenize.NAME
                                         and isinstance(allowed.get(previous.string), sp.IndexedBase)):
                raise InvalidArgument(f"{where}: '[' in {text!r} may only index a per-selected-token quantity")
        else:
            raise InvalidArgument(f"{where}: token {tok.string!r} in {text!r} is not allowed")
        previous = tok


def _check_tree(text: str, allowed: Mapping[str, Any], where: str) -> None:
    """Bound the syntax tree's size and depth, and fold its constant parts in doubles (module docstring)."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError) as exc:
        reason = exc.msg if isinstance(exc, SyntaxError) else f"{type(exc).__name__}: {exc}"
        raise InvalidArgument(f"{where}: cannot parse {text!r}: {reason}") from None
    nodes = sum(1 for _ in ast.walk(tree))
    if nodes > MAX_NODES:
        raise InvalidArgument(f"{where}: the expression has {nodes} syntax-tree nodes; at most {MAX_NODES} are allowed")
    depth = _depth(tree.body)
    if depth > MAX_DEPTH:
        raise InvalidArgument(f"{where}: the expression is nested {depth} levels deep; at most {MAX_DEPTH} are allowed")
    _fold(tree.body, allowed, f"{where}: in {text!r}")


#: chains of these operators count as one level of nesting (``a & b & c`` is a flat conjunction, ``a + b + c`` a
#: flat sum, whatever their length)
_FLAT = (ast.BitAnd, ast.Add, ast.Sub, ast.Mult)


def _depth(root: ast.AST) -> int:
    """The nesting depth of the expression nodes under ``root``, a chain of one associative operator (:data:`_FLAT`)
    counting once (iterative: a long chain cannot overflow the stack)."""
    deepest, todo = 0, [(root, 1)]
    while todo:
        node, level = todo.pop()
        deepest = max(deepest, level)
        for c in ast.iter_child_nodes(node):
            if isinstance(c, ast.expr):
                chained = isinstance(node, ast.BinOp) and isinstance(c, ast.BinOp) and isinstance(node.op, _FLAT) \
                    and type(c.op) is type(node.op)
                todo.append((c, level if chained else level + 1))
    return deepest


def _fold(node: ast.AST, allowed: Mapping[str, Any], where: str) -> float | None:
    """The value of a constant sub-expression in doubles (None when it involves a symbol); refuses
    constant exponents beyond :data:`MAX_EXPONENT` and constants that are not real and finite."""
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
            raise InvalidArgument(f"{where}: constant {node.value!r} is not a real number")
        return _finite(node.value, ast.unparse(node), where)
    if isinstance(node, ast.Name):
        return _CONSTANTS.get(node.id) if allowed.get(node.id) in (sp.pi, sp.E) else None
    if isinstance(node, ast.UnaryOp):
        v = _fold(node.operand, allowed, where)
        return None if v is None else (-v if isinstance(node.op, ast.USub) else v)
    if isinstance(node, ast.BinOp):
        a, b = _fold(node.left, allowed, where), _fold(node.right, allowed, where)
        if isinstance(node.op, ast.Pow) and b is not None and abs(b) > MAX_EXPONENT:
            raise InvalidArgument(f"{where}: the exponent of {ast.unparse(node)} is {b:g}; constant exponents must lie "
                                  f"in [-{MAX_EXPONENT}, {MAX_EXPONENT}]")
        if isinstance(node.op, ast.Div) and b == 0:
            raise InvalidArgument(f"{where}: {ast.unparse(node)} divides by zero")
        if a is None or b is None or not isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow)):
            return None
        text = ast.unparse(node)
        try:
            value = {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b, ast.Div: lambda: a / b,
                     ast.Pow: lambda: math.pow(a, b)}[type(node.op)]()
        except OverflowError:
            raise InvalidArgument(f"{where}: {text} exceeds the double range (about 1.8e308)") from None
        except (ZeroDivisionError, ValueError):  # 0 ** -1, (-8) ** (1/3)
            raise InvalidArgument(f"{where}: {text} is not a finite real number") from None
        if value == 0 and a != 0 and not isinstance(node.op, (ast.Add, ast.Sub)):  # sympy would compute it exactly
            raise InvalidArgument(f"{where}: {text} is below the double range (about 4.9e-324)")
        return _finite(value, text, where)
    if isinstance(node, ast.Call):
        values = [_fold(a, allowed, where) for a in node.args]
        name = node.func.id if isinstance(node.func, ast.Name) else ""
        text = ast.unparse(node)
        if name in ("Min", "Max", "min", "max") and not node.args:
            raise InvalidArgument(f"{where}: {text} has no argument (its value would be infinite); give at least one")
        if name == "Rational" and len(values) == 2 and values[1] == 0:
            raise InvalidArgument(f"{where}: {text} divides by zero")
        if name == "Rational" and len(values) == 2 and None not in values:
            value = cast(float, values[0]) / cast(float, values[1])  # neither is None (checked above)
            if value == 0 and values[0] != 0:
                raise InvalidArgument(f"{where}: {text} is below the double range (about 4.9e-324)")
            return _finite(value, text, where)
        if name not in _UNARY or len(values) != 1 or values[0] is None:
            return None
        try:
            value = _finite(_UNARY[name](values[0]), text, where)
        except OverflowError:
            raise InvalidArgument(f"{where}: {text} exceeds the double range (about 1.8e308)") from None
        except ValueError:  # log(0), sqrt(-1)
            raise InvalidArgument(f"{where}: {text} is not a finite real number") from None
        # exp below the double range: sympy keeps it exact (no rational blows up), and certification reads it in
        # balls; it is not folded further (a product with it is not a double's underflow)
        return None if value == 0 and name == "exp" else value
    for child in ast.iter_child_nodes(node):
        _fold(child, allowed, where)
    return None


def _finite(value: float | int, text: str, where: str) -> float:
    try:
        v = float(value)
    except OverflowError:
        v = math.inf
    if not math.isfinite(v):
        raise InvalidArgument(f"{where}: {text} is not a finite number within the double range (about 1.8e308)")
    return v


def _exact_numbers(expr: sp.Basic) -> sp.Basic:
    """Every decimal literal as the exact rational it spells (``0.8`` is ``4/5``), the rest left unevaluated."""
    if isinstance(expr, sp.Float):
        return sp.Rational(str(expr))
    if not expr.args or isinstance(expr, (sp.Rational, sp.NumberSymbol)):
        return expr
    args = [_exact_numbers(a) for a in expr.args]
    if isinstance(expr, sp.Mul) and len(args) == 2 and args[0] == -1 and args[1].is_Rational:
        return -args[1]  # the parser's -1*x for a negated literal
    try:
        return expr.func(*args, evaluate=False)
    except TypeError:  # a function without the evaluate option
        return expr.func(*args)


def free_names(text: str) -> set[str]:
    """The names ``text`` uses besides :data:`FUNCTIONS` (empty for a closed claim such as ``1 - 0.2**2 >= 0.99``);
    ``{"?"}`` when the text does not tokenise (the parser then says what is wrong)."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return {"?"}
    return {t.string for t in tokens if t.type == tokenize.NAME and t.string not in FUNCTIONS}


def check_constants(expr: sp.Basic, where: str) -> None:
    """Refuse an expression holding a non-real or non-finite constant, or a number outside the double range
    (exact rationals are judged by their bit lengths: printing one of thousands of digits fails)."""
    for number in expr.atoms(sp.Rational):
        p, q = abs(int(number.p)), int(number.q)
        if p and not -MAX_BITS <= p.bit_length() - q.bit_length() <= MAX_BITS:
            raise InvalidArgument(f"{where}: a constant of about 2**{p.bit_length() - q.bit_length()} is outside the "
                                  f"double range (about 2**-1074 to 2**1024)")
        if max(p.bit_length(), q.bit_length()) > 4 * MAX_BITS:
            raise InvalidArgument(f"{where}: an exact constant has a {max(p.bit_length(), q.bit_length())}-bit "
                                  f"numerator or denominator; at most {4 * MAX_BITS} bits are allowed")
    for special, name in _SPECIAL:
        if expr.has(special):
            raise InvalidArgument(f"{where}: the expression contains {name} ({sp.sstr(expr)[:200]}); "
                                  f"only real, finite values are allowed")
    for number in expr.atoms(sp.Float):
        if abs(float(number)) > DOUBLE_MAX:
            raise InvalidArgument(f"{where}: the constant {sp.sstr(number)[:40]} exceeds the double range "
                                  f"(about 1.8e308)")
