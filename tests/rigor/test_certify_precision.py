"""Certification raises its precision when a margin is lost to it, up to ``max_bits`` and no further (issue 35).

``1 / (alpha_max - 1/2)`` on two logits ``(0, eps)``: ``alpha_max - 1/2`` is about ``eps / 4``, a ball that holds 0 (the
margin is then not finite) until the working precision resolves ``eps``: 256 bits for ``eps = 1e-45``, 512 for
``1e-100``, 1024 for ``1e-300``. The bound ``>= 0`` holds and ``<= 0`` is violated; certification must double the
precision from 128 bits until the margin is finite, reach ``max_bits`` itself when that is where it resolves, and
say inconclusive (naming the lost margin) when ``max_bits`` is below it. A margin that stays finite but is lost to
cancellation (wide against its terms) is recomputed at doubled precision the same way.
"""

from __future__ import annotations

import signal
from typing import Any, Iterator

import numpy as np
import pytest

from attnbounds.theory.deciding.certify import certify
from attnbounds.theory.mathematics import normalisers as nm
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.running import api

#: (eps, the precision at which the margin resolves)
RESOLVES = [(1e-45, 256), (1e-100, 512), (1e-300, 1024)]


@pytest.fixture(autouse=True)
def _bounded_time() -> Iterator[None]:
    """A precision loop that does not advance would never end: fail after 30 s instead."""
    def stop(*_: Any) -> None:
        raise TimeoutError("certification did not finish in 30 s")

    old = signal.signal(signal.SIGALRM, stop)
    signal.alarm(30)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _statement(relation: str) -> Any:
    return api.statement(relation, hypotheses=["softmax"], id="precision").statements[0]


def _instance(eps: float) -> Instance:
    return Instance.from_logits(np.array([[0.0, eps]]), nm.softmax(1.0))


@pytest.mark.parametrize("eps, bits", RESOLVES)
@pytest.mark.parametrize("relation, status", [("1/(alpha_max - 1/2) >= 0", "holds"),
                                              ("1/(alpha_max - 1/2) <= 0", "violated")])
def test_precision_is_doubled_until_the_margin_is_finite(eps: float, bits: int, relation: str, status: str) -> None:
    cert = certify(_statement(relation), _instance(eps))
    assert (cert.status, cert.precision_bits) == (status, bits), (cert.status, cert.precision_bits, cert.notes)


@pytest.mark.parametrize("eps, bits", RESOLVES)
def test_the_last_doubling_reaches_max_bits_itself(eps: float, bits: int) -> None:
    cert = certify(_statement("1/(alpha_max - 1/2) >= 0"), _instance(eps), max_bits=bits)
    assert (cert.status, cert.precision_bits) == ("holds", bits), (cert.status, cert.precision_bits, cert.notes)


@pytest.mark.parametrize("eps, bits", RESOLVES)
def test_below_the_precision_it_needs_the_balls_stop_at_max_bits_and_the_exact_tier_decides(eps: float,
                                                                                             bits: int) -> None:
    """The doubling stops at ``max_bits`` (the balls' margin is still not finite there, the note says so); what no
    precision up to the ceiling resolves goes to the exact tier, which decides it (``alpha_max - 1/2 = eps / 4``
    exactly, positive). Without an exact form (token vectors) it would stay inconclusive."""
    cert = certify(_statement("1/(alpha_max - 1/2) >= 0"), _instance(eps), max_bits=bits // 2)
    assert (cert.status, cert.backend, cert.precision_bits) == ("holds", "exact", bits // 2), cert
    assert any(f"at {bits // 2} bits" in n and "not finite" in n for n in cert.notes), cert.notes


#: (eps, the power of ten that brings alpha_max - 1/2 ~ eps / 4 to about 1e-5, the precision that resolves it)
CANCELLING = [(1e-45, 40, 256), (1e-100, 95, 512)]


@pytest.mark.parametrize("eps, power, bits", CANCELLING)
@pytest.mark.parametrize("relation, status", [("(alpha_max - 1/2)*10**{p} <= 1/10**5", "holds"),
                                              ("(alpha_max - 1/2)*10**{p} >= 1/10**5", "violated")])
def test_a_margin_lost_to_cancellation_is_recomputed_at_a_higher_precision(eps: float, power: int, bits: int,
                                                                          relation: str, status: str) -> None:
    """A finite margin interval wide against its terms (10^power times a difference the balls lose at 128 bits)
    is inconclusive only when max_bits stops the doubling."""
    st = _statement(relation.format(p=power))
    cert = certify(st, _instance(eps))
    assert (cert.status, cert.precision_bits) == (status, bits), (cert.status, cert.precision_bits, cert.notes)
    short = certify(st, _instance(eps), max_bits=bits // 2)
    assert (short.status, short.precision_bits) == ("inconclusive", bits // 2), (short.status, short.precision_bits)
