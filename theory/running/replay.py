"""Replaying a PROVED record: every piece of evidence re-derived from the record's own statement, none trusted.

``attnbounds prove --replay RECORDS`` calls :func:`replay_proved` on each PROVED record. The statement is rebuilt
from the record (:func:`attnbounds.theory.io.rebuild.statement_of`: the registered reading, or a user's statement
from its srepr and hypotheses, printing exactly as the record does). Then every piece of evidence the record holds
is re-checked, and at least one must be there:

- a ``relaxation`` certificate: this version's relaxation of that statement is rebuilt and the certificate must
  cover it exactly, every tree re-checked box by box (:func:`attnbounds.theory.deciding.prover.replay`);
- a derivation (``proof`` that says it replays completely): only a reading of the paper has one; it is replayed
  again from ``proofs/`` and must be that reading's derivation, by name, replaying ``ok`` and ``complete``;
- a ``closed_claim``: the statement must be a closed claim, decided again exactly, with the recorded values.

A PROVED record with a counterexample, with no evidence, or with any evidence that does not re-check does not
replay. What a replay establishes: the record's verdict follows from its own statement by this version's
reasoning. What it does not: who made the record, or that the statement is the one someone meant to check.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from attnbounds.theory.io.records import Record
from attnbounds.theory.mathematics.errors import InvalidArgument
from attnbounds.theory.mathematics.statement import Statement


@dataclass(frozen=True)
class Replayed:
    """The outcome of replaying one record: ``ok``, what was re-checked (or why not), seconds taken."""

    record_id: str
    ok: bool
    what: str
    seconds: float


def replay_proved(record: Record, statement: Statement | None = None) -> Replayed:
    """Re-check every piece of evidence of the PROVED ``record`` (module docstring). ``statement``: the statement
    of a ``--statements`` file, used instead of rebuilding it (it must print as the record does). A record of the
    wrong shape raises :class:`~attnbounds.theory.mathematics.errors.InvalidArgument` naming the record and field."""
    from attnbounds.theory.io.rebuild import statement_of

    start = time.perf_counter()
    if record.verdict != "PROVED":
        raise InvalidArgument(f"record {record.id!r} is {record.verdict}, not PROVED: nothing to replay as a proof")
    st = statement_of(record, statement)
    checked: list[str] = []
    failed: list[str] = []
    data = record.data
    if data["counterexample"] is not None:
        failed.append("the record holds a counterexample as well as the verdict PROVED")
    closed = data.get("closed_claim")
    if closed is not None:
        ok, why = _closed_claim(st, closed)
        (checked if ok else failed).append(why)
    proof = data["proof"]
    if proof is not None and (proof.get("ok") or proof.get("complete") or proof.get("result", "").startswith("PROVED")):
        ok, why = _derivation(record, st, proof)
        (checked if ok else failed).append(why)
    cert = data.get("relaxation")
    if isinstance(cert, dict) and cert.get("status") == "proved":
        from attnbounds.theory.deciding import prover

        ok, why = prover.replay(st, cert)
        (checked if ok else failed).append(f"relaxation certificate: {why}")
    if not checked and not failed:
        failed.append("the record holds no evidence to re-check (no relaxation certificate, derivation or closed "
                      "claim): a PROVED verdict needs one")
    ok = not failed
    return Replayed(record.id, ok, "; ".join(failed if failed else checked), time.perf_counter() - start)


def _closed_claim(st: Statement, recorded: Any) -> tuple[bool, str]:
    from attnbounds.theory.deciding import closed_claims
    from attnbounds.theory.io.serialize import canonical

    if not closed_claims.is_closed(st):
        return False, "closed claim: the statement has quantities or free parameters, so it is no closed claim"
    verdict, _, decided = closed_claims.decide(st)
    if verdict != "PROVED":
        return False, f"closed claim: decided again exactly, it is {verdict}"
    if canonical(decided) != canonical(recorded):
        return False, "closed claim: the recorded conjuncts or values differ from those decided again"
    return True, f"closed claim decided again exactly ({len(decided['conjuncts'])} conjunct(s) hold)"


def _derivation(record: Record, st: Statement, proof: dict[str, Any]) -> tuple[bool, str]:
    from attnbounds import proofs
    from attnbounds.theory.mathematics import registry

    if record.data["statement"]["source"] != "paper" or st.id not in registry.ids():
        return False, "derivation: a user's statement has no derivation in proofs/ (only the paper's readings do)"
    derivation = proofs.get(st.id)
    if derivation is None:
        return False, f"derivation: proofs/ has no derivation of {st.id}"
    if derivation.name != proof.get("name"):
        return False, f"derivation: the record names {str(proof.get('name'))[:80]!r}, but {st.id}'s is {derivation.name!r}"
    from attnbounds.theory.io.serialize import canonical
    from attnbounds.theory.running.verify import default_prover, _replay as replay_derivation

    again, proved_by, _, _ = replay_derivation(default_prover, st.id)
    if proved_by is None or again is None:
        return False, f"derivation {derivation.name}: does not replay completely now"
    differs = sorted(k for k in set(again) | set(proof) if canonical(again.get(k)) != canonical(proof.get(k)))
    if differs:
        return False, (f"derivation {derivation.name}: replayed again, its {', '.join(differs)} differ from the "
                       f"record's")
    return True, f"derivation {derivation.name} replayed again ({again['checked']} steps checked)"


__all__ = ["Replayed", "replay_proved"]
