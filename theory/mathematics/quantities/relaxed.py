"""The relaxed backend's vocabulary: what a quantity's ``relaxed`` form reads (:class:`RelaxedInstance`, with its
tokens :class:`RelaxedToken`) and what a hypothesis's ``relax`` rule writes (:class:`Space`), as Protocols beside the
torch backend's :class:`~attnbounds.theory.mathematics.quantities.torch_state.State` and the ball backend's
:class:`~attnbounds.theory.mathematics.balls.BallInstance`.

The relaxation prover implements them (:mod:`attnbounds.theory.deciding.prover.relax`,
:mod:`attnbounds.theory.deciding.prover.space`): ``t = 1/L``, a few distinguished tokens and totals over all tokens.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Protocol, Sequence

if TYPE_CHECKING:
    import sympy as sp

    from attnbounds.theory.mathematics.normalisers import Normaliser


class RelaxedToken(Protocol):
    """A token of the relaxed instance: its logit ``l`` (None where the weights fix no logit), ``lam = log F(l)``,
    ``g = (log F)'(l)``, ``F``, and its ``weight`` where the tokens are their weights (else None)."""

    name: str
    l: sp.Expr | None
    lam: sp.Expr
    g: sp.Expr
    weight: sp.Expr | None

    @property
    def F(self) -> sp.Expr: ...


#: ``dominates(r, k) >= 0`` against every other token ``k``: what makes ``r`` the token of a maximum
Dominates = Callable[[RelaxedToken, RelaxedToken], "sp.Expr"]


class RelaxedInstance(Protocol):
    """The relaxed instance a ``relaxed`` form reads: ``t = 1/L``, parameters, distinguished tokens (roles), points of
    the token box and totals ``(1/L) sum_j fn(token_j)``."""

    @property
    def t(self) -> sp.Expr: ...

    def param(self, name: str) -> sp.Expr: ...

    def role(self, name: str, *, dominates: Dominates | None = None, extreme: str | None = None) -> RelaxedToken:
        """A distinguished token (``extreme``: the quantity is the largest, "max", or smallest, "min", of its value at
        every token)."""

    def point(self, name: str, *, dominates: Dominates) -> RelaxedToken:
        """A point of the token box that is not a token, constrained against every token."""

    def log_F_extremes(self, tokens_move: int = 0) -> tuple[sp.Expr, sp.Expr]:
        """``(min, max)`` of log F over the logit box ``[-a, a]``."""

    @property
    def logit_bound(self) -> str:
        """What bounds the logits: "a" (the parameter), "keys" (``a`` is ``Delta_max``), or ""."""

    def same(self, a: RelaxedToken, b: RelaxedToken) -> bool: ...

    def total(self, fn: Callable[[RelaxedToken], sp.Expr], exclude: Sequence[RelaxedToken] = (), *,
              selected: bool | None = None) -> sp.Expr:
        """``(1/L) sum_j fn(token_j)`` over every token but ``exclude`` (or the selected ones, or the others)."""

    def weight(self, tok: RelaxedToken) -> sp.Expr:
        """The weight ``alpha`` of a token (``F`` itself for an element-wise map)."""

    @property
    def elementwise(self) -> bool:
        """Whether the map is element-wise, ``alpha_i = F(l_i)`` (no sum: the Jacobian is diagonal)."""

    def at_most(self, *bounds: str) -> int:
        """The form returns an upper bound of the quantity, not its value: one of ``bounds`` (each named by the
        inequality it rests on), the one whose index this returns. The relaxation tries each in turn, and reads them
        only where the margin cannot grow with the quantity (it declines elsewhere)."""

    def at_least(self, *bounds: str) -> int:
        """As :meth:`at_most` for a lower bound of the quantity: read only where the margin cannot shrink as the
        quantity grows."""


class Space(Protocol):
    """What a hypothesis says about the relaxed space: the rules its ``relax`` calls."""

    def normaliser(self, log_F: sp.Expr, params: dict[str, float], text: str, name: str = "relaxed",
                   elementwise: Callable[[float], Normaliser] | None = None) -> None:
        """The weights come from ``F = exp(log_F)`` with these parameter values (``T`` free): ``F / sum F``, or, with
        ``elementwise`` (the map at a temperature), ``F`` itself."""

    def softmax(self) -> None: ...

    def normaliser_property(self, holds: Callable[[Normaliser], bool], text: str, every_F: bool = False) -> None:
        """A property of F, checked on the space's log F once it is known (``every_F``: one every finite positive F
        value satisfies, so that with no log F fixed the space ranges over every such F)."""

    def bound_logits(self, by: str = "a") -> None:
        """Every logit lies in ``[-a, a]``; ``by`` "keys": ``a`` is ``Delta_max`` (the logits are query-key products)."""

    def top_n(self) -> None: ...

    def require_length(self, n: int) -> None: ...

    def parameter_formula(self, formula: sp.Basic) -> None:
        """A conjunction of bounds on one parameter: its box."""
