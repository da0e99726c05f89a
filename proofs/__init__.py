"""Machine-replayable derivations of the paper's statement readings (issue 4).

Public API (used by the verdict machinery and the CLI):

- :func:`get` ``(statement_id) -> Derivation | None``: the derivation proving a reading;
- :func:`all_derivations`: every derivation, one module per result of the paper;
- :func:`not_proved`: readings without a derivation, each with the reason and the id of its proved
  corrected form (``None``: no corrected form is proved, the reading is UNDECIDED here);
- ``Derivation.replay() -> Replay`` with ``ok``, ``complete`` (no prose step), ``checked``,
  ``size_limited``, ``cited``, ``cited_unchecked``, ``prose``, ``premises`` (each with its hypothesis),
  ``steps``, ``result`` (PROVED, PROVED MODULO PROSE or FAILED) and ``summary()`` / ``rests_on()``
  (what a record says its PROVED rests on);
- :func:`replay` ``(statement_id) -> Replay | None``: the replay restricted to one reading, cached
  (a derivation proving several readings is replayed once per process).

A reading is PROVED only when its derivation replays with ``complete`` true: every premise is read from
a hypothesis the reading states, and the conclusion follows from the chained step results.
"""

from __future__ import annotations

import functools
import importlib

from attnbounds.proofs.framework import CLASSICAL, Derivation, Replay, StepResult, Witness
from attnbounds.theory.mathematics.errors import InvalidArgument

#: one module per result of the paper
MODULES = ("lemma1", "theorem1_fixed", "theorem1_random", "corollary2", "theorem2", "gradients", "multihead")

__all__ = ["CLASSICAL", "Derivation", "Replay", "StepResult", "Witness", "all_derivations", "get", "not_proved",
           "replay"]


@functools.cache
def _modules() -> tuple:
    return tuple(importlib.import_module(f"attnbounds.proofs.{name}") for name in MODULES)


def all_derivations() -> list[Derivation]:
    """Every derivation, in the paper's order."""
    return [d for mod in _modules() for d in mod.DERIVATIONS]


@functools.cache
def _by_target() -> dict[str, Derivation]:
    out: dict[str, Derivation] = {}
    for d in all_derivations():
        for target in d.targets:
            if target in out:
                raise InvalidArgument(f"{target} is proved by two derivations: {out[target].name} and {d.name}")
            out[target] = d
    return out


def not_proved() -> dict[str, tuple[str, str | None]]:
    """Readings without a derivation: id -> (why, the proved corrected id, or None when UNDECIDED)."""
    return {k: v for mod in _modules() for k, v in mod.NOT_PROVED.items()}


def get(statement_id: str) -> Derivation | None:
    """The derivation that proves ``statement_id``, or None; unknown ids raise (naming close matches)."""
    from attnbounds.theory.mathematics import registry

    registry.get(statement_id)
    return _by_target().get(statement_id)


@functools.cache
def _replay(name: str) -> Replay:
    return next(d for d in all_derivations() if d.name == name).replay()


@functools.cache
def replay(statement_id: str) -> Replay | None:
    """The replay of the derivation proving ``statement_id``, restricted to it (None: no derivation)."""
    derivation = get(statement_id)
    return None if derivation is None else _replay(derivation.name).restrict(statement_id)
