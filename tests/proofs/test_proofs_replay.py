"""Every derivation replays; the API maps readings to derivations; every reading is accounted for."""

import pytest

from attnbounds import proofs
from attnbounds.proofs.framework import Prose
from attnbounds.theory.mathematics import registry
from attnbounds.theory.mathematics.errors import AttnBoundsError

DERIVATIONS = proofs.all_derivations()


@pytest.mark.parametrize("derivation", DERIVATIONS, ids=[d.name for d in DERIVATIONS])
def test_derivation_replays(derivation):
    replay = derivation.replay()
    assert replay.ok, "\n".join(f"{s.kind}: {s.text} -> {s.detail}" for s in replay.failures)
    assert replay.checked >= len(derivation.targets)  # at least one conclusion per target
    assert replay.result in ("PROVED", "PROVED MODULO PROSE")
    assert replay.complete == (replay.prose == 0)
    if derivation.witness is not None:
        assert replay.sharp is True


def test_no_derivation_rests_on_prose():
    prose = {d.name for d in DERIVATIONS if any(isinstance(s, Prose) for s in d.steps)}
    assert prose == set()


def test_replay_by_statement_id_is_cached_and_restricted():
    first = proofs.replay("theorem1.random[R2,scaled,mean,corrected]")
    assert first is proofs.replay("theorem1.random[R2,scaled,mean,corrected]")
    assert first.targets == ("theorem1.random[R2,scaled,mean,corrected]",) and first.ok
    assert proofs.replay("theorem2.lower[full]") is None


def test_names_are_unique_and_targets_disjoint():
    names = [d.name for d in DERIVATIONS]
    assert len(names) == len(set(names))
    targets = [t for d in DERIVATIONS for t in d.targets]
    assert len(targets) == len(set(targets))


@pytest.mark.parametrize("statement_id", registry.ids())
def test_every_reading_is_proved_or_explained(statement_id):
    derivation = proofs.get(statement_id)
    note = proofs.not_proved().get(statement_id)
    assert (derivation is None) != (note is None), "exactly one of a derivation and a not-proved note"
    if derivation is not None:
        assert statement_id in derivation.targets
        return
    why, corrected = note
    assert why
    if corrected is not None:
        assert corrected in registry.ids()
        assert proofs.get(corrected) is not None, f"{corrected} is named as the proved form but has no derivation"


def test_get_rejects_unknown_ids():
    with pytest.raises(AttnBoundsError, match="unknown statement id"):
        proofs.get("theorem1.fixed[R3,g1]")


def test_restrict_keeps_one_target():
    d = proofs.get("theorem1.random[R2,printed,mean,corrected]")
    rep = d.replay()
    one = rep.restrict("theorem1.random[R2,printed,mean,corrected]")
    conclusions = [s for s in one.steps if s.kind == "conclusion"]
    assert len(conclusions) == 1 and conclusions[0].target == "theorem1.random[R2,printed,mean,corrected]"
    assert one.checked == rep.checked - (len(d.targets) - 1)
    with pytest.raises(AttnBoundsError, match="does not prove"):
        rep.restrict("lemma1")
