"""Prose with formulas written in ASCII (``C_1/L <= alpha_i <= C_2/L``, ``||d alpha / d l||_2``) as HTML with inline
MathML: the titles, symbol glosses, hypotheses, notes and proof steps of ``attnbounds report``.

The text is cut into words and symbols; a *formula* is a run of symbols (numbers, operators, brackets, single
letters, Greek letters, ``abar``/``xbar``/``dtilde``, ``exp``/``log``/``sqrt``/``min``/``max``/``sum``/``Var``, and any word
right beside a comparison or an arithmetic operator) with at least one sign of mathematics in it (an operator, a
script, a Greek letter, a bracket). Hyphenated words (``top-N``, ``N-subset``) and everything else stay prose. A
formula becomes presentation MathML: ``_`` and ``^`` scripts (``_{...}`` grouped), ``sqrt(...)`` a root, Greek
names their letters, ``||`` and ``|`` bars, ``<=`` as ≤, ``..`` as an ellipsis; there is no precedence parsing, so a
formula is shown as written. Text is escaped and the elements are built here from a fixed set (no markup from the
input can get through); anything this reads wrongly still shows every character of the input.
"""

from __future__ import annotations

import html
import re
import xml.etree.ElementTree as ET

GREEK = {
    "alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "epsilon": "ε", "eps": "ε", "zeta": "ζ", "eta": "η",
    "theta": "θ", "kappa": "κ", "lambda": "λ", "mu": "μ", "nu": "ν", "xi": "ξ", "pi": "π", "rho": "ρ", "sigma": "σ",
    "tau": "τ", "phi": "φ", "chi": "χ", "psi": "ψ", "omega": "ω", "Gamma": "Γ", "Delta": "Δ", "Theta": "Θ",
    "Lambda": "Λ", "Xi": "Ξ", "Pi": "Π", "Sigma": "Σ", "Phi": "Φ", "Psi": "Ψ", "Omega": "Ω",
}
#: names written with an accent: the letter and the accent
ACCENTED = {"abar": ("a", "\u00af"), "xbar": ("x", "\u00af"), "mbar": ("m", "\u00af"), "dtilde": ("d", "\u02dc")}
#: function names shown upright (``sum`` is the big sigma)
FUNCTIONS = frozenset({"exp", "log", "sqrt", "min", "max", "sum", "Var", "Cov", "diag", "argmax", "argmin", "sup",
                       "inf", "lim", "softmax", "sign"})
OPERATORS = {"<=": "\u2264", ">=": "\u2265", "!=": "\u2260", "->": "\u2192", "==": "=", "~": "\u223c", "-": "\u2212",
             "*": "\u22c5", "..": "\u2026", "||": "\u2016", "in": "\u2208"}
#: operators beside which a word is a name in a formula (``lo <= F(l_j) <= hi``)
INFIX = frozenset({"<=", ">=", "<", ">", "=", "!=", "==", "+", "*", "/", "^", "->"})
#: signs that make a run of symbols a formula
SIGNS = INFIX | {"-", "_", "||", "|", "..", "(", "[", "{", "~"}
OPEN, CLOSE = "([{", ")]}"

_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<hyphenated>[A-Za-z][A-Za-z0-9]*(?:-[A-Za-z][A-Za-z0-9]*)+)
  | (?P<number>\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)
  | (?P<word>[A-Za-z][A-Za-z0-9]*'*)
  | (?P<op><=|>=|!=|->|==|\.\.|\|\||[-+*/^_=<>~|(),\[\]{}:])
  | (?P<other>.)
""", re.VERBOSE | re.DOTALL)


def _tokens(text: str) -> list[tuple[str, str]]:
    """Words, numbers, operators, spaces; a hyphenated word of symbols (``L-N``) is a difference."""
    out = []
    for m in _TOKEN.finditer(text):
        kind, value = m.lastgroup or "other", m.group(0)
        parts = value.split("-")
        if kind == "hyphenated" and all(_symbolic(p) for p in parts):
            for k, part in enumerate(parts):
                out += [("op", "-")] * bool(k) + [("word", part)]
        else:
            out.append((kind, value))
    return out


def _symbolic(word: str) -> bool:
    """A word that belongs in a formula by itself (single letters, Greek, accented names, functions, C1)."""
    bare = word.rstrip("'")
    return (len(bare) == 1 or bare in GREEK or bare in ACCENTED or bare in FUNCTIONS
            or bool(re.fullmatch(r"[A-Za-z]\d+", bare)))


def _runs(tokens: list[tuple[str, str]]) -> list[tuple[bool, list[tuple[str, str]]]]:
    """The tokens cut into ``(is formula, tokens)`` pieces (module docstring)."""
    kinds = []  # per token: part of a run of symbols?
    depth = 0
    scripts: list[bool] = []  # per open brace: whether it opens a script (``_{...}``), where every word is a name
    for k, (kind, text) in enumerate(tokens):
        if text == "{":
            scripts.append(k > 0 and tokens[k - 1][1] in ("_", "^"))
        elif text == "}" and scripts:
            scripts.pop()
        if any(scripts):  # inside a script everything is part of the formula
            inside = True
            depth += (text in OPEN) - (text in CLOSE)
        elif kind == "word":
            near = [t for t in (_neighbour(tokens, k, -1), _neighbour(tokens, k, 1)) if t is not None]
            scripted = (k > 0 and tokens[k - 1][1] in ("_", "^")) or (k + 1 < len(tokens) and tokens[k + 1][1] == "_")
            inside = _symbolic(text) or scripted or any(t in INFIX for t in near)
        elif kind in ("number", "space"):
            inside = True
        elif kind == "op":
            inside = text != ":" and (text != "," or depth > 0)
            depth += (text in OPEN) - (text in CLOSE)
            depth = max(depth, 0)
        else:
            inside = False
        if not inside:
            depth = 0
        kinds.append(inside)
    pieces: list[tuple[bool, list[tuple[str, str]]]] = []
    k = 0
    while k < len(tokens):
        j = k
        while j < len(tokens) and kinds[j] == kinds[k]:
            j += 1
        if kinds[k]:
            pieces += _formulas(tokens[k:j])
        else:
            pieces.append((False, tokens[k:j]))
        k = j
    return pieces


def _neighbour(tokens: list[tuple[str, str]], k: int, step: int) -> str | None:
    j = k + step
    while 0 <= j < len(tokens) and tokens[j][0] == "space":
        j += step
    return tokens[j][1] if 0 <= j < len(tokens) else None


def _formulas(run: list[tuple[str, str]]) -> list[tuple[bool, list[tuple[str, str]]]]:
    """A run of symbols as formulas and prose: outer spaces and unmatched brackets are prose, and so is a run
    without a sign of mathematics (a lone letter, a number)."""
    start, end = 0, len(run)
    while start < end and run[start][0] == "space":
        start += 1
    while end > start and (run[end - 1][0] == "space" or run[end - 1][1] in (",", ":")):
        end -= 1
    stack: list[int] = []
    for k in range(start, end):
        text = run[k][1]
        if text in OPEN:
            stack.append(k)
        elif text in CLOSE:
            if stack and OPEN.index(run[stack[-1]][1]) == CLOSE.index(text):
                stack.pop()
            else:  # a closer without its opener: prose, and the formulas on each side of it
                return _formulas(run[:k]) + [(False, [run[k]])] + _formulas(run[k + 1:])
    if stack:  # an opener without its closer
        k = stack[0]
        return _formulas(run[:k]) + [(False, [run[k]])] + _formulas(run[k + 1:])
    body = run[start:end]
    greek = any(kind == "word" and (t.rstrip("'") in GREEK or t in ACCENTED) for kind, t in body)
    signs = any(kind == "op" and t in SIGNS for kind, t in body)
    math = bool(body) and (greek or signs)
    out = [(False, run[:start])] if start else []
    out.append((math, body))
    if end < len(run):
        out.append((False, run[end:]))
    return [p for p in out if p[1]]


# -- MathML ---------------------------------------------------------------------------------------------
def _element(tag: str, text: str | None = None, **attrs: str) -> ET.Element:
    el = ET.Element(tag, attrs)
    el.text = text
    return el


def symbol(name: str) -> ET.Element:
    """The MathML of one name: a Greek letter, an accented letter (``abar``: ā), ``sum`` (∑), or the name itself."""
    return _atom("word", name)


def _atom(kind: str, text: str) -> ET.Element:
    if kind == "number":
        return _element("mn", text)
    if kind == "word":
        bare, primes = text.rstrip("'"), len(text) - len(text.rstrip("'"))
        if bare in ACCENTED:
            letter, accent = ACCENTED[bare]
            el = _element("mover", accent="true")
            el.extend([_element("mi", letter), _element("mo", accent)])
        elif bare == "sum":
            el = _element("mo", "\u2211")
        elif bare in GREEK:
            el = _element("mi", GREEK[bare], **({"mathvariant": "normal"} if bare[0].isupper() else {}))
        elif bare == "in":
            el = _element("mo", OPERATORS["in"])
        elif re.fullmatch(r"[A-Za-z]\d+", bare):  # C1: C with subscript 1
            el = _element("msub")
            el.extend([_element("mi", bare[0]), _element("mn", bare[1:])])
        else:
            el = _element("mi", bare)
        if primes:
            row = _element("mrow")
            row.extend([el, _element("mo", "\u2032" * primes)])
            return row
        return el
    return _element("mo", OPERATORS.get(text, text), **({"stretchy": "false"} if text in OPEN + CLOSE + "|" else {}))


def _group(tokens: list[tuple[str, str]], start: int) -> int:
    """The index after the bracket group opening at ``start`` (its matching closer), or ``start + 1``."""
    opener = tokens[start][1]
    if opener not in OPEN:
        return start + 1
    depth = 0
    for k in range(start, len(tokens)):
        text = tokens[k][1]
        depth += (text in OPEN) - (text in CLOSE)
        if depth == 0:
            return k + 1
    return len(tokens)


def _row(tokens: list[tuple[str, str]]) -> ET.Element:
    """Presentation MathML of one formula's tokens (module docstring)."""
    out: list[ET.Element] = []
    k = 0
    while k < len(tokens):
        kind, text = tokens[k]
        if kind == "space":
            k += 1
            continue
        if text in ("_", "^") and out and k + 1 < len(tokens):
            end = _group(tokens, k + 1)
            inner = tokens[k + 2: end - 1] if tokens[k + 1][1] == "{" else tokens[k + 1: end]
            base = out.pop()
            if text == "^" and base.tag == "msub":
                script = _element("msubsup")
                script.extend([*base, _row(inner)])
            else:
                script = _element("msub" if text == "_" else "msup")
                script.extend([base, _row(inner)])
            out.append(script)
            k = end
            continue
        if kind == "word" and text == "not" and k + 2 < len(tokens) and tokens[k + 2][1] == "in":
            out.append(_element("mo", "\u2209"))  # "not in"
            k += 3
            continue
        if kind == "word" and text == "sqrt" and k + 1 < len(tokens) and tokens[k + 1][1] == "(":
            end = _group(tokens, k + 1)
            root = _element("msqrt")
            root.append(_row(tokens[k + 2: end - 1]))
            out.append(root)
            k = end
            continue
        out.append(_atom(kind, text))
        k += 1
    row = _element("mrow")
    row.extend(out)
    return row


def html_of(text: object) -> str:
    """``text`` as HTML: prose escaped, formulas as inline ``<math>`` elements (module docstring); control characters
    written out (:func:`attnbounds.theory.io.terminal.printable`)."""
    from attnbounds.theory.io.terminal import printable

    parts = []
    for math, tokens in _runs(_tokens(printable(text))):
        source = "".join(t for _, t in tokens)
        if not math:
            parts.append(html.escape(source, quote=True))
            continue
        root = _element("math", display="inline")
        root.append(_row(tokens))
        parts.append(ET.tostring(root, encoding="unicode", method="xml"))
    return "".join(parts)
