"""Every statement reading by id: ``get(id)``, ``all_statements()``, ``register(statement)``."""

from __future__ import annotations

from attnbounds.theory.mathematics.errors import InvalidArgument
from attnbounds.theory.mathematics.statement import Statement
from attnbounds.theory.mathematics.statements import corollary2, corrections, gradients, lemma1, multihead, theorem1, theorem2

_REGISTRY: dict[str, Statement] = {}


def register(statement: Statement, *, replace: bool = False) -> Statement:
    """Add a statement (a user's own bound, a corrected form); ids are unique."""
    if not isinstance(statement, Statement):
        raise InvalidArgument(f"register needs a theory.statement.Statement, got {type(statement).__name__}")
    if statement.id in _REGISTRY and not replace:
        raise InvalidArgument(f"a statement with id {statement.id!r} is already registered")
    _REGISTRY[statement.id] = statement
    return statement


for _module in (lemma1, theorem1, corollary2, theorem2, gradients, multihead, corrections):
    for _s in _module.STATEMENTS:
        register(_s)
#: the readings every process registers when it imports this module
_BUILTIN: dict[str, Statement] = dict(_REGISTRY)


def is_builtin(statement: Statement) -> bool:
    """Whether ``statement`` is one of the paper's readings as registered (not a variant or a user's own)."""
    return _BUILTIN.get(statement.id) is statement


def builtin(statement_id: str) -> Statement:
    """The paper's reading ``statement_id`` as registered (how a reading is unpickled)."""
    return _BUILTIN[statement_id]


for _s in _BUILTIN.values():
    _s.travel_by_id(builtin)


def get(statement_id: str) -> Statement:
    """The statement with this id; the error lists close matches."""
    try:
        return _REGISTRY[statement_id]
    except KeyError:
        import difflib

        close = difflib.get_close_matches(statement_id, _REGISTRY, n=5, cutoff=0.4)
        hint = f"; did you mean {', '.join(close)}?" if close else "; run `attnbounds list` for every id"
        raise InvalidArgument(f"unknown statement id {statement_id!r}{hint}") from None


def all_statements() -> list[Statement]:
    return list(_REGISTRY.values())


def ids() -> list[str]:
    return list(_REGISTRY)


def resolve(statement: Statement | str) -> Statement:
    """A statement given as itself or by id (for functions that accept either)."""
    if isinstance(statement, Statement):
        return statement
    if isinstance(statement, str):
        return get(statement)
    raise InvalidArgument(f"expected a Statement or a statement id, got {type(statement).__name__}")
