"""The statement a record states, rebuilt from the record's own fields: what every replay checks against.

A record is a claim about its ``statement`` and ``hypotheses``; a replay must re-derive its evidence from those, never
take the evidence's word for what it proves. :func:`statement_of` rebuilds the
:class:`~attnbounds.theory.mathematics.statement.Statement`:

- a reading of the paper (``source = "paper"``) is the registered reading of that id;
- a user's statement is rebuilt from the relation's ``srepr`` (read by
  :func:`~attnbounds.theory.mathematics.srepr.parse_srepr`: no code runs), its bindings, defaults, kind, fixed
  values and ranges, and its hypotheses by id (a ``normaliser(<name>)`` hypothesis from the normaliser's definition
  the record carries under ``statement.normaliser``).

Either way the rebuilt statement must print as the record does: its record parts (:func:`builder.statement_part`
and the hypotheses with their descriptions) must equal the record's field for field, so that the title, formula,
hypotheses and texts a reader sees are those of the statement the replay checks. Anything else raises
:class:`~attnbounds.theory.mathematics.errors.InvalidArgument` naming the record and the field.
"""

from __future__ import annotations

from typing import Any, Mapping

from attnbounds.theory.io.builder import Source, statement_part
from attnbounds.theory.io.records import Record
from attnbounds.theory.io.serialize import canonical
from attnbounds.theory.mathematics.errors import AttnBoundsError, InvalidArgument
from attnbounds.theory.mathematics.hypotheses import (FIXED_HYPOTHESIS, RANGES_HYPOTHESIS, Hypothesis, domain_hypothesis,
                                                      fixed_parameters, parameter_ranges)
from attnbounds.theory.mathematics.statement import Citation, Statement


def statement_of(record: Record, statement: Statement | None = None) -> Statement:
    """The statement ``record`` states (module docstring); ``statement``, when given (a ``--statements`` file's), is
    used instead of rebuilding it, and must print as the record does too."""
    data = record.data
    where = f"record {record.id!r}"
    part = data["statement"]
    source: Source = part["source"]
    if part["id"] != record.id:
        raise InvalidArgument(f"{where}: its statement's id is {str(part['id'])[:80]!r}, not the record's")
    if statement is None:
        if source == "paper":
            from attnbounds.theory.mathematics import registry

            if record.id not in registry.ids():
                raise InvalidArgument(f"{where}: statement.source is 'paper' but no reading of the paper has this id")
            statement = registry.get(record.id)
        else:
            statement = _user_statement(part, data["hypotheses"], where)
    same(where, statement, record, source)
    return statement


def same(where: str, statement: Statement, record: Record, source: Source) -> None:
    """Refuse a record whose statement or hypotheses are not ``statement``'s as this version writes them."""
    try:
        rebuilt = canonical(statement_part(statement, source))
        hyps = [{"id": h.id, "description": h.description} for h in statement.hypotheses]
    except AttnBoundsError as exc:
        raise InvalidArgument(f"{where}: its statement cannot be written: {exc}") from None
    written = canonical(record.data["statement"])
    for key in sorted(set(rebuilt) | set(written)):
        if rebuilt.get(key) != written.get(key):
            raise InvalidArgument(f"{where}: statement.{key} is {str(written.get(key))[:200]!r}, but the statement it "
                                  f"states {'(the registered reading) ' if source == 'paper' else ''}has "
                                  f"{str(rebuilt.get(key))[:200]!r}: the record does not print the statement it "
                                  f"claims")
    if canonical(record.data["hypotheses"]) != hyps:
        recorded = [h.get("id") for h in record.data["hypotheses"]]
        raise InvalidArgument(f"{where}: hypotheses are {recorded}, but the statement it states has "
                              f"{[h['id'] for h in hyps]} (ids and descriptions must be the statement's)")


def _user_statement(part: Mapping[str, Any], hypotheses: list[Mapping[str, Any]], where: str) -> Statement:
    from attnbounds.theory.mathematics.srepr import parse_srepr

    relation = parse_srepr(part["srepr"], where=f"{where}: statement.srepr", exact=True)
    fixed = _numbers(part.get("fixed", {}), f"{where}: statement.fixed")
    ranges = {k: _pair(v, f"{where}: statement.ranges.{k}") for k, v in _mapping(part.get("ranges", {}),
                                                                                  f"{where}: statement.ranges").items()}
    known = _hypotheses(part, fixed, ranges, where)
    hyps = []
    for k, h in enumerate(hypotheses):
        if h.get("id") not in known:
            raise InvalidArgument(f"{where}: hypotheses[{k}]: unknown hypothesis {str(h.get('id'))[:80]!r}"
                                  + ("" if part.get("normaliser") is not None else
                                     " (a normaliser(<name>) hypothesis needs the normaliser's definition under "
                                     "statement.normaliser)"))
        hyps.append(known[h["id"]])
    citation = part["citation"]
    try:
        return Statement(part["id"], part["title"], relation,
                         Citation(citation["numbering"], arxiv=citation["arxiv"], version=citation["version"],
                                  source="record"),
                         tuple(hyps), bindings=dict(part["bindings"]), defaults=dict(part["defaults"]), kind=part["kind"],
                         expectation_over=part["expectation_over"], notes=part["notes"], fixed=fixed, ranges=ranges)
    except AttnBoundsError as exc:
        raise InvalidArgument(f"{where}: its statement cannot be rebuilt: {exc}") from None


def _hypotheses(part: Mapping[str, Any], fixed: dict[str, float], ranges: dict[str, tuple[float, float]],
                where: str) -> dict[str, Hypothesis]:
    """Every hypothesis a user's record may name, by id: those a statements file may name, the domains, the
    statement's own fixed values and ranges, and the normaliser the record defines (``statement.normaliser``)."""
    from attnbounds.theory.io.userbounds import hypothesis_catalogue
    from attnbounds.theory.mathematics.hypotheses import DOMAINS

    known = {**hypothesis_catalogue(), **{h.id: h for h in (domain_hypothesis(name) for name in DOMAINS)},
             FIXED_HYPOTHESIS: fixed_parameters(fixed), RANGES_HYPOTHESIS: parameter_ranges(ranges)}
    if part.get("normaliser") is not None:
        named = _named_normaliser(part["normaliser"], where)
        known[named.id] = named
    return known


def _named_normaliser(definition: Any, where: str) -> Hypothesis:
    """``normaliser(<name>)`` from the definition the record carries (a Python callable cannot be rebuilt)."""
    from attnbounds.theory.io.serialize import normaliser_from_json
    from attnbounds.theory.mathematics.callables import same_normaliser
    from attnbounds.theory.mathematics.normalisers import Normaliser, RatioNormaliser

    if not isinstance(definition, dict):
        raise InvalidArgument(f"{where}: statement.normaliser must be an object, got {type(definition).__name__}")
    if definition.get("family") == "callable":
        raise InvalidArgument(f"{where}: the normaliser {str(definition.get('name'))[:40]!r} is a Python callable: the "
                              f"record cannot rebuild it (give the statements file that defines it)")
    body = {k: v for k, v in definition.items() if k != "torch"}
    proto = normaliser_from_json(body, f"{where}: statement.normaliser")
    if not isinstance(proto, Normaliser):
        raise InvalidArgument(f"{where}: statement.normaliser does not define a normaliser")
    name = proto.name if isinstance(proto, RatioNormaliser) else str(definition.get("family"))
    return same_normaliser(name, proto, torch=definition.get("torch") is True)


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InvalidArgument(f"{where} must be an object, got {type(value).__name__}")
    return value


def _numbers(value: Any, where: str) -> dict[str, float]:
    out = {}
    for k, v in _mapping(value, where).items():
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise InvalidArgument(f"{where}.{k} must be a number, got {v!r:.40}")
        out[str(k)] = float(v)
    return out


def _pair(value: Any, where: str) -> tuple[float, float]:
    if not isinstance(value, list) or len(value) != 2 or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        raise InvalidArgument(f"{where} must be a pair of numbers, got {value!r:.60}")
    return float(value[0]), float(value[1])


__all__ = ["same", "statement_of"]
