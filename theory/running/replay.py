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

import math
import time
from dataclasses import dataclass
from typing import Any

from attnbounds.theory.io.records import Record
from attnbounds.theory.mathematics.errors import InvalidArgument
from attnbounds.theory.mathematics.statement import Statement


@dataclass(frozen=True)
class Replayed:
    """The outcome of replaying one record: ``ok``, what was re-checked (or why not), seconds taken, and what a
    command prints of it (``lines``)."""

    record_id: str
    ok: bool
    what: str
    seconds: float
    lines: tuple[str, ...] = ()


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
        ok, why = _closed_claim(st, closed, "PROVED")
        (checked if ok else failed).append(why)
    proof = data["proof"]
    if proof is not None and (proof.get("ok") or proof.get("complete") or proof.get("result", "").startswith("PROVED")):
        ok, why = _derivation(record, st, proof)
        (checked if ok else failed).append(why)
    cert = data.get("relaxation")
    if isinstance(cert, dict) and cert.get("status") == "proved":
        from attnbounds.theory.deciding import prover

        try:
            ok, why = prover.replay(st, cert)
        except InvalidArgument as exc:
            raise InvalidArgument(f"record {record.id!r}: {exc}") from None
        (checked if ok else failed).append(f"relaxation certificate: {why}")
    if not checked and not failed:
        failed.append("the record holds no evidence to re-check (no relaxation certificate, derivation or closed "
                      "claim): a PROVED verdict needs one")
    ok = not failed
    return Replayed(record.id, ok, "; ".join(failed if failed else checked), time.perf_counter() - start)


#: how far (relative) a record's stored weights may lie from its normaliser's float weights on its logits (another
#: machine's exp may differ in the last bits; a search step in torch by a few ulps)
WEIGHTS_RTOL = 1e-6


def replay_instances(record: Record, statement: Statement | None = None, *, source: str = "the record") -> Replayed:
    """Re-certify the record's counterexample and its tightest instance (each that it holds) against the statement
    it states (rebuilt, or ``statement`` printing as the record does): each must give the recorded certificate
    status and margin, a counterexample must be violated, stored weights must be the normaliser's on the stored
    logits (to :data:`WEIGHTS_RTOL`), and whether the check is certified or float64 only follows from the statement
    (a Python callable without log F), never from the record's flags."""
    from attnbounds.theory.deciding.certify import STATUSES, certify
    from attnbounds.theory.io.rebuild import statement_of
    from attnbounds.theory.io.serialize import instance_from_json
    from attnbounds.theory.mathematics import notation

    start = time.perf_counter()
    st = statement_of(record, statement)
    cx, tight = record.data["counterexample"], record.data["tightness"]
    shown = [("counterexample", cx["instance"], cx["certificate"])] if cx is not None else []
    if tight.get("witness") is not None:
        shown.append(("tightest instance", tight["witness"], tight.get("certificate")))
    if not shown:
        raise InvalidArgument(f"the record of {record.id!r} has neither a counterexample nor a tightest instance to "
                              f"replay")
    lines = [f"{st.id}: {notation.text(st.relation)}"]

    def done(ok: bool, what: str) -> Replayed:
        return Replayed(record.id, ok, what, time.perf_counter() - start, tuple(lines))

    float_only = not st.certifiable
    flags = [record.data.get("certified", True), *([cx.get("certified", True)] if cx is not None else [])]
    if any(flag is not (not float_only) for flag in flags):
        lines.append(f"NOT reproduced: the record says certified = {flags[-1]}, but its statement is "
                     f"{'about a Python callable without log F (float64 only)' if float_only else 'certifiable'}")
        return done(False, lines[-1])
    failed = []
    for what, data, recorded in shown:
        if not isinstance(recorded, dict) or recorded.get("status") not in STATUSES:
            raise InvalidArgument(f"record {record.id!r}: the {what}'s certificate status is "
                                  f"{str((recorded or {}).get('status'))[:40]!r}; one of {', '.join(STATUSES)} is "
                                  f"recorded with every instance")
        inst = instance_from_json(data)
        classes = f" tokens in {inst.K} classes" if inst.is_classes else ""
        lines.append(f"\nreplaying the record's {what} (L = {inst.L}{classes}) from {source}")
        same = _same_weights(inst)
        if same is not None:
            lines.append(f"NOT reproduced: the {what}'s stored weights are not its normaliser's on its logits ({same})")
            failed.append(what)
            continue
        if float_only:
            ev = st.evaluate(inst)
            margin = float(ev.margin_hi[0])
            ok = bool(ev.applicable[0]) and (margin < 0) == (what == "counterexample")
            lines.append(f"float64 only (the normaliser is a Python function): lhs {float(ev.lhs[0]):.10g}, rhs "
                         f"{float(ev.rhs[0]):.10g}, margin {margin:.6g}")
        else:
            cert = certify(st, inst, 0)
            ends = [(float(cert.margin_lo), recorded.get("margin_lo")), (float(cert.margin_hi), recorded.get("margin_hi"))]
            ok = cert.status == recorded["status"] and (what != "counterexample" or cert.status == "violated") \
                and all(_same_float(a, b) for a, b in ends)
            lines.append(f"certificate {cert.status} ({cert.method}, {cert.precision_bits} bits): margin rhs - lhs in "
                         f"[{cert.margin_lo_text}, {cert.margin_hi_text}], lhs {cert.lhs}, rhs {cert.rhs}")
            lines.append(f"the record says: {recorded['status']}, margin in [{recorded.get('margin_lo')}, "
                         f"{recorded.get('margin_hi')}]")
        lines.append("reproduced" if ok else f"NOT reproduced: the {what} does not give the recorded result")
        if not ok:
            failed.append(what)
    what = (f"the {' and the '.join(failed)} did not reproduce" if failed else
            f"the {' and the '.join(w for w, _, _ in shown)} reproduced")
    return done(not failed, what)


def _same_weights(inst: Any) -> str | None:
    """Why the instance's stored weights are not its normaliser's on its stored logits (None when they are, or when
    the instance has no logits or no normaliser that recomputes them: then the certificate uses the weights as given)."""
    import numpy as np

    from attnbounds.theory.mathematics.callables import CallableNormaliser, other_weights
    from attnbounds.theory.mathematics.errors import AttnBoundsError

    if inst.logits is None or inst.normaliser is None or isinstance(inst.normaliser, CallableNormaliser):
        return None
    try:
        again = np.asarray(inst.normaliser.weights(inst.logits, inst.counts), dtype=np.float64)
    except (ArithmeticError, ValueError, TypeError, AttnBoundsError) as exc:
        return f"the normaliser fails on the logits: {type(exc).__name__}: {exc}"[:200]
    differs = other_weights(again, inst.alpha, inst.counts, rtol=WEIGHTS_RTOL)
    return None if differs is None else f"largest difference {differs:.3g}, beyond {WEIGHTS_RTOL:g} relative"


def _same_float(a: float, b: Any) -> bool:
    """A re-certified margin end against the recorded one (a non-finite one recorded as its text)."""
    try:
        value = float(b)
    except (TypeError, ValueError):
        return False
    return a == value or (math.isnan(a) and math.isnan(value))


def replay_record(record: Record, statement: Statement | None = None) -> Replayed:
    """The replay a record's verdict calls for: :func:`replay_proved` for PROVED, :func:`replay_instances` for
    REFUTED (its counterexample) and for the others that hold a tightest instance; a closed claim decided again.
    A record with none of these (VERIFIED or NOT-APPLICABLE with no instance, ERROR) has nothing to re-check: ``ok``
    with a sentence saying so (its verdict claims no proof and no counterexample)."""
    if record.verdict == "PROVED":
        return replay_proved(record, statement)
    if record.data.get("closed_claim") is not None:
        from attnbounds.theory.io.rebuild import statement_of

        start = time.perf_counter()
        ok, why = _closed_claim(statement_of(record, statement), record.data["closed_claim"], record.verdict)
        return Replayed(record.id, ok, why, time.perf_counter() - start, (why,))
    if record.data["counterexample"] is not None or record.data["tightness"].get("witness") is not None:
        return replay_instances(record, statement)
    return Replayed(record.id, True, f"a {record.verdict} record without an instance: nothing to re-check", 0.0)


def _closed_claim(st: Statement, recorded: Any, verdict: str) -> tuple[bool, str]:
    """Whether the closed claim ``st``, decided again exactly, is ``verdict`` with the recorded conjuncts and values."""
    from attnbounds.theory.deciding import closed_claims
    from attnbounds.theory.io.serialize import canonical

    if not closed_claims.is_closed(st):
        return False, "closed claim: the statement has quantities or free parameters, so it is no closed claim"
    again, _, decided = closed_claims.decide(st)
    if again != verdict:
        return False, f"closed claim: decided again exactly, it is {again}"
    if canonical(decided) != canonical(recorded) and canonical(_sides_swapped(st, decided)) != canonical(recorded):
        return False, "closed claim: the recorded conjuncts or values differ from those decided again"
    return True, f"closed claim decided again exactly: {verdict} ({len(decided['conjuncts'])} conjunct(s))"


def _sides_swapped(st: Statement, decided: Any) -> Any:
    """``decided`` as versions before 2026-12-05 wrote it: a conjunct written ``a >= b`` (or ``>``) with the sides of
    ``b <= a``, the form it is decided as (lhs ``b``, rhs ``a``), and a strict one between equal sides said so in
    other words; its margin and status the same."""
    import copy

    import sympy as sp

    from attnbounds.theory.deciding.closed_claims import written_conjuncts

    out = copy.deepcopy(decided)
    for c, w in zip(out["conjuncts"], written_conjuncts(st)):
        if isinstance(w, (sp.GreaterThan, sp.StrictGreaterThan)):
            c["lhs"], c["rhs"], c["lhs_decimal"], c["rhs_decimal"] = c["rhs"], c["lhs"], c["rhs_decimal"], c["lhs_decimal"]
        c["method"] = c["method"].replace(": the two sides are exactly equal,", ": rhs - lhs is exactly 0,")
    return out


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
    from attnbounds.theory.running.verify import default_prover, derivation_part

    again, proved_by, _, _ = derivation_part(default_prover, st.id)
    if proved_by is None or again is None:
        return False, f"derivation {derivation.name}: does not replay completely now"
    differs = sorted(k for k in set(again) | set(proof) if canonical(again.get(k)) != canonical(proof.get(k)))
    if differs:
        return False, (f"derivation {derivation.name}: replayed again, its {', '.join(differs)} differ from the "
                       f"record's")
    return True, f"derivation {derivation.name} replayed again ({again['checked']} steps checked)"


__all__ = ["Replayed", "WEIGHTS_RTOL", "replay_instances", "replay_proved", "replay_record"]
