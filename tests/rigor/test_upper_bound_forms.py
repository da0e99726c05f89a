"""Relaxed forms that are only an upper bound of their quantity (``rx.at_most``: ``J_spectral`` by Schur's test or by
interlacing, each tried as strategies of their own).

A proof with an upper bound of a quantity proves a statement only where the margin cannot grow with the quantity
(``J_spectral <= C``); elsewhere the relaxation must decline. Checked here:

- the relaxation reads the bounds on the favourable side only, one family of strategies per bound, says which in each
  problem, and marks the problems as not exact; on the other side (``J_spectral >= C``, or a margin of unknown sign
  in it) it declines, naming the bounds;
- Corollary 3's corrected spectral bound ``J_spectral <= 1/(2T)`` (attained by two tokens of equal logits, so tight
  only at an equality with a vanishing gradient: Schur's test) and the length-aware ``J_spectral <= e^(2a) / (L T)``
  under bounded logits (Lemma 1 through interlacing, equality at equal logits) are PROVED and replay;
- the same bounds a hair lower are never PROVED (two equal tokens: J_spectral = 1/(2T); L equal logits: 1/(L T)).
"""

from __future__ import annotations

import sympy as sp

from attnbounds.theory.deciding.prover import prove, replay
from attnbounds.theory.deciding.prover.relax import Declined, relax
from attnbounds.theory.mathematics import hypotheses as hyp
from attnbounds.theory.mathematics.statement import Citation, Statement
from attnbounds.theory.mathematics.statements import gradients

J, T = sp.symbols("J_norm T", positive=True)
WORK = 2 * 10**7


def _statement(relation: sp.Basic, sid: str, a: float | None = None) -> Statement:
    hypotheses = (hyp.SOFTMAX,) if a is None else (hyp.SOFTMAX, hyp.LOGITS_BOUNDED)
    return Statement(sid, "a bound on the spectral norm of the softmax Jacobian", relation, Citation("test"),
                     hypotheses, bindings={"J_norm": "J_spectral"}, fixed={} if a is None else {"a": a, "T": 1.0})


def test_the_bound_is_read_only_where_the_margin_falls_with_the_quantity() -> None:
    rel = relax(_statement(sp.Le(J, 1 / (2 * T)), "upper"))
    problems = rel.problems
    assert problems and all(not p.exact for p in problems)
    assert all("upper bound" in p.pattern for p in problems)
    assert {"Schur" in p.pattern for p in problems} == {True, False}  # both bounds, each in strategies of its own
    assert len(rel.final[0]) == 2
    for relation in (sp.Ge(J, 1 / (8 * T)), sp.Le(J * (J - 1), 1 / T)):  # the other side; a margin not monotone in J
        try:
            relax(_statement(relation, "other"))
        except Declined as exc:
            assert "upper bound" in str(exc) and "J_spectral" in str(exc), exc
        else:
            raise AssertionError(f"{relation}: an upper bound of J_spectral read where it proves nothing")


def test_corollary3_spectral_corrected_is_proved_by_the_relaxation_and_replays() -> None:
    statement = next(s for s in gradients.STATEMENTS if s.id == "corollary3[spectral,corrected]")
    result = prove(statement, work=WORK)
    assert result.status == "proved", result.reason
    certificate = result.to_json()
    ok, why = replay(statement, certificate)
    assert ok, why


def test_a_spectral_bound_below_the_supremum_is_never_proved() -> None:
    # two tokens of equal logits: J = (1/T) [[1/4, -1/4], [-1/4, 1/4]], spectral norm 1/(2T) > 0.499/T
    result = prove(_statement(sp.Le(J, sp.Rational(499, 1000) / T), "below"), work=WORK)
    assert result.status != "proved", result.reason


def test_a_length_aware_spectral_bound_is_proved_through_interlacing() -> None:
    # |l| <= 1, T = 1: J_spectral <= alpha_max <= e^2 / (e^2 + L - 1) < e^2 / L (Lemma 1's constant)
    L = sp.Symbol("L", positive=True)
    statement = _statement(sp.Le(J, sp.exp(2) / (L * T)), "length", a=1.0)
    result = prove(statement, work=WORK)
    assert result.status == "proved", result.reason
    assert any("interlacing" in r.problem.pattern for r in result.reports)
    ok, why = replay(statement, result.to_json())
    assert ok, why
    # at equal logits J_spectral = 1/(L T) exactly: 0.999/(L T) is false from L = 2 on
    below = prove(_statement(sp.Le(J, sp.Rational(999, 1000) / (L * T)), "length-below", a=1.0), work=WORK)
    assert below.status != "proved", below.reason
