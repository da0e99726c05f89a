"""Parse a sympy expression from text without running arbitrary code.

``sympy.sympify`` evaluates its input as Python. Text that comes from a file (a user's TOML
statement, a serialised normaliser) is first tokenised and every name checked against a
whitelist; attribute access, keywords, lambdas, strings and indexing of anything but a declared
indexed base are refused with a message naming the offending token. Only then is the text handed
to ``sympy.parse_expr`` with empty builtins.
"""

from __future__ import annotations

import io
import keyword
import tokenize
from typing import Any, Mapping

import sympy as sp

from attnbounds.theory.errors import InvalidArgument

#: sympy functions and constants allowed in user expressions.
FUNCTIONS: dict[str, Any] = {
    "exp": sp.exp, "log": sp.log, "sqrt": sp.sqrt, "Abs": sp.Abs, "abs": sp.Abs, "Min": sp.Min, "Max": sp.Max,
    "min": sp.Min, "max": sp.Max, "Sum": sp.Sum, "Rational": sp.Rational, "pi": sp.pi, "E": sp.E,
}
#: names sympy's parser itself emits when it rewrites literals.
_PARSER_NAMES = {"Integer": sp.Integer, "Float": sp.Float, "Rational": sp.Rational, "Symbol": sp.Symbol}
_OPS = {"+", "-", "*", "/", "**", "(", ")", ",", "[", "]"}


def parse_expression(text: str, names: Mapping[str, Any], *, where: str, relational: bool = False) -> sp.Basic:
    """``text`` as a sympy expression whose free names are all keys of ``names`` or :data:`FUNCTIONS`.

    ``where`` names the source (e.g. ``"statement 'mine': key 'rhs'"``) for error messages.
    ``relational`` also allows ``<=``, ``>=`` and ``&`` (a conjunction of inequalities).
    """
    ops = _OPS | ({"<=", ">=", "&"} if relational else set())
    if not isinstance(text, str) or not text.strip():
        raise InvalidArgument(f"{where}: expected a non-empty expression string, got {text!r}")
    allowed = {**FUNCTIONS, **names}
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError) as exc:
        raise InvalidArgument(f"{where}: cannot parse {text!r}: {exc}") from None
    previous = None
    for tok in tokens:
        if tok.type in (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER, tokenize.INDENT, tokenize.DEDENT):
            continue
        if tok.type == tokenize.NAME:
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
    from sympy.parsing.sympy_parser import parse_expr, standard_transformations

    try:
        expr = parse_expr(text, local_dict=dict(allowed), global_dict={"__builtins__": {}, **_PARSER_NAMES},
                          transformations=standard_transformations, evaluate=True)
    except Exception as exc:  # sympy raises many types for malformed input
        raise InvalidArgument(f"{where}: cannot parse {text!r}: {type(exc).__name__}: {exc}") from None
    if not isinstance(expr, sp.Basic):
        raise InvalidArgument(f"{where}: {text!r} is not an expression")
    return expr
