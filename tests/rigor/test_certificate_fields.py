"""What a certificate says about itself (issue 35): where its worst margin is, whether a strict bound's equality case
is open, and how a closed claim was decided. Records quote these fields; a fault that leaves the status right but
these wrong passed every earlier test."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

from attnbounds.theory.mathematics import exact as exact_tier
from attnbounds.theory.deciding.certify import EXACT_MAX_COLUMNS, certify
from attnbounds.theory.mathematics import normalisers as nm
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.running import api


def _statement(relation: str) -> object:
    return api.statement(relation, hypotheses=["softmax"], id="fields").statements[0]


def test_the_worst_token_is_named_for_a_per_token_bound_and_minus_one_for_a_per_instance_bound() -> None:
    inst = Instance.from_logits(np.array([[0.0, 3.0, 1.0]]), nm.softmax(1.0))
    per_token = certify(_statement("alpha_i <= 1/2"), inst)
    assert per_token.status == "violated" and per_token.worst == {"conjunct": 0, "token": 1}
    per_instance = certify(_statement("alpha_max <= 1/2"), inst)
    assert per_instance.status == "violated" and per_instance.worst == {"conjunct": 0, "token": -1}


@pytest.mark.parametrize("relation, status", [("alpha_max <= 1/2", "violated"), ("alpha_max <= 1", "holds"),
                                              ("alpha_max >= 1/L", "holds"), ("alpha_min >= 0.1", "violated")])
def test_a_certificate_is_violated_exactly_when_its_status_says_so(relation: str, status: str) -> None:
    """``Certificate.violated`` (what an API user reads) is the status "violated", not "holds", "inconclusive" or
    "not-applicable"; ``statistical`` is a Hoeffding interval's, never an interval enclosure's."""
    inst = Instance.from_logits(np.array([[0.0, 3.0, 1.0]]), nm.softmax(1.0))
    cert = certify(_statement(relation), inst)
    assert cert.status == status and cert.violated is (status == "violated") and not cert.statistical
    sparse = certify(_statement(relation), Instance.from_logits(np.array([[0.0, 3.0, 1.0]]),
                                                                nm.CONSTRUCTORS["sparsemax"](T=1.0)))
    assert sparse.status == "not-applicable" and not sparse.violated


@pytest.mark.parametrize("relation", ["alpha_i >= 1/(2*L)", "alpha_i <= 1/2", "alpha_i > 1/(4*L)", "alpha_i >= 1/L"])
@pytest.mark.parametrize("ghost", [-50.0, 50.0])
def test_a_per_token_bound_is_judged_on_the_tokens_there_are(relation: str, ghost: float) -> None:
    """Token classes: a column of count 0 holds no token, so a per-token bound says nothing about it. Its weight is 0
    (which ``alpha_i >= 1/(2L)`` would call violated) whatever its logit; the four tokens there are have 1/4 each."""
    inst = Instance.from_logits(np.array([[0.0, ghost, 0.0]]), nm.softmax(1.0), counts=[[2, 0, 2]])
    cert = certify(_statement(relation), inst)
    assert cert.status == "holds" and cert.worst["token"] in (0, 2), (cert.status, cert.worst, cert.notes)
    assert cert.margin_lo >= 0, cert


def test_a_certificate_with_no_margin_points_nowhere() -> None:
    inst = Instance.from_logits(np.array([[0.0, 3.0, 1.0]]), nm.CONSTRUCTORS["sparsemax"](T=1.0))  # not softmax: not applicable
    cert = certify(_statement("alpha_max <= 1/2"), inst)
    assert cert.status == "not-applicable" and cert.worst == {"conjunct": -1, "token": -1}


def test_a_strict_bound_at_its_equality_case_is_open_and_says_so() -> None:
    tie = Instance.from_logits(np.array([[1.0, 1.0]]), nm.softmax(1.0))  # alpha = (1/2, 1/2) exactly
    exact = certify(_statement("alpha_max < 1/2"), tie)  # margin exactly 0: the strict bound fails, certified
    assert exact.status == "violated" and not exact.strict
    # a margin of exp(-1000), below what the balls resolve next to 1/2: decided by the exact tier
    tiny = certify(_statement("alpha_max < 1/2 + exp(-1000)"), tie)
    assert tiny.status == "holds" and tiny.backend == "exact" and not tiny.strict, (tiny.status, tiny.notes)
    assert certify(_statement("alpha_max < 1/2 - exp(-1000)"), tie).status == "violated"
    # the spectral norm at a tied largest weight is |g| t = 1/2 exactly (the exact tier): decided both ways
    assert certify(_statement("J_spectral < 1/2"), tie).status == "violated"
    assert certify(_statement("J_spectral <= 1/2"), tie).status == "holds"
    # more columns than the exact tier expands: the balls straddle 0 (e / (K e) is not exactly 1/K in arb) and the
    # equality case stays open, flagged strict where a margin of exactly 0 would refute it
    K = EXACT_MAX_COLUMNS + 1
    many = Instance.from_logits(np.ones((1, K)), nm.softmax(1.0))
    open_ = certify(_statement(f"alpha_max < 1/{K}"), many)
    assert open_.status == "inconclusive" and open_.strict, (open_.status, open_.notes)
    assert any("a strict inequality is false if it is exactly 0" in n for n in open_.notes), open_.notes
    # the same tie of a non-strict bound holds if the margin is exactly 0: its notes do not say it fails there
    weak = certify(_statement(f"alpha_max <= 1/{K}"), many)
    assert weak.status == "inconclusive" and not weak.strict, (weak.status, weak.notes)
    assert any("contains 0" in n for n in weak.notes) and not any("strict" in n for n in weak.notes), weak.notes
    violated = certify(_statement("alpha_max < 1/4"), tie)
    assert violated.status == "violated" and not violated.strict
    holds = certify(_statement("alpha_max < 3/4"), tie)
    assert holds.status == "holds" and not holds.strict


@pytest.mark.parametrize("K, vectors", [(EXACT_MAX_COLUMNS, ""), (EXACT_MAX_COLUMNS + 1, ""), (2, "x"), (2, "q, k")])
def test_the_exact_tier_expands_only_instances_of_few_columns_and_no_vectors(K: int, vectors: str) -> None:
    """An equality case below what the balls resolve (``alpha_max < 1/K + exp(-1000)`` at K equal logits) is decided
    by the exact tier only on an instance of at most :data:`EXACT_MAX_COLUMNS` columns without vectors (``x``, ``q``,
    ``k``); beyond, whose exact expansion may not finish, it stays inconclusive, its margin interval holding 0."""
    arrays = {"x": {"x": np.ones((1, K, 2))}, "q, k": {"q": np.zeros((1, 2)), "k": np.ones((1, K, 2))}}
    tie = Instance.from_logits(np.zeros((1, K)), nm.softmax(1.0), **arrays.get(vectors, {}))
    cert = certify(_statement(f"alpha_max < 1/{K} + exp(-1000)"), tie)
    if K <= EXACT_MAX_COLUMNS and not vectors:
        assert cert.status == "holds" and cert.backend == "exact", (cert.status, cert.backend, cert.notes)
    else:
        assert cert.status == "inconclusive" and cert.backend != "exact", (cert.status, cert.backend, cert.notes)


@pytest.mark.parametrize("relation, hypotheses, closed", [
    ("1 - 0.2**2 >= 0.99", [], True), ("exp(-1600) < 1", [], True), ("sqrt(2)/4 <= 1/(2*sqrt(2))", [], True),
    ("alpha_max <= 1", ["softmax"], False), ("alpha_max*L >= exp(-1600)", ["softmax"], False)])
def test_a_closed_claim_is_one_with_no_quantity_and_no_free_symbol(relation: str, hypotheses: list[str],
                                                                   closed: bool) -> None:
    """Only a statement with nothing to search (no quantity, no free symbol) is decided as a closed claim: one that
    reads a quantity is searched, proved or refuted over instances."""
    from attnbounds.theory.deciding.closed_claims import is_closed

    assert is_closed(api.statement(relation, hypotheses=hypotheses).statements[0]) is closed


def test_a_rational_closed_claim_is_decided_in_exact_rational_arithmetic() -> None:
    for value, sign in ((sp.Rational(1, 100), 1), (sp.Rational(-3, 7), -1), (sp.Integer(0), 0)):
        assert exact_tier.sign_of(value) == (sign, "exact rational arithmetic")
    sign, method = exact_tier.sign_of(sp.sqrt(2) - sp.Rational(141421, 100000))
    assert sign == 1 and "interval arithmetic" in method


@pytest.mark.parametrize("value", [sp.sqrt(2 + sp.sqrt(3)) - (sp.sqrt(6) + sp.sqrt(2)) / 2,
                                   sp.sqrt(5 + 2 * sp.sqrt(6)) - sp.sqrt(2) - sp.sqrt(3),
                                   sp.log(6) - sp.log(2) - sp.log(3),
                                   sp.exp(sp.sqrt(2)) * sp.exp(sp.sqrt(3)) - sp.exp(sp.sqrt(2) + sp.sqrt(3))], ids=str)
def test_an_exact_zero_no_precision_separates_from_0_is_an_equality(value: sp.Expr) -> None:
    """A closed number that is exactly 0 but not syntactically so: arb's ball holds 0 at every precision, and sign_of
    asks sympy to recognise the zero (an exact simplification, a surd's self-consistency, a minimal polynomial) only
    when the ball at the top precision is within 2^-(bits/2) of 0. That test once compared a float radius (never below
    5e-324) with 2^-2048, which is 0.0 in doubles, so these stayed undecided (UNDECIDED at an algebraic equality)."""
    assert exact_tier.sign_of(value) == (0, "sympy: exactly 0 (equality)")
    assert exact_tier.sign_of(value + sp.exp(-sp.Integer(5000)))[0] == 1  # a hair off 0 is no equality: a sign
    assert exact_tier.sign_of(value - sp.exp(-sp.Integer(40000)))[0] == -1  # 2^-57708: at the top rung, 65536 bits


def test_a_margin_far_below_4096_bits_is_a_sign_and_sympy_is_not_asked_about_huge_exponents() -> None:
    """softmax at T = 6.65e-4 with two logits 29.1 above two others: the Frobenius norm of its Jacobian is 1/(2T)
    less a term of order e^-43786 (2^-63170), so ``J_frobenius <= 1/(2T)`` holds, strictly. arb's balls up to 4096
    bits straddle 0; sympy's ``equals``, asked then, spent two minutes and recognised nothing (the tightest instance of
    Corollary 3's corrected Frobenius reading, 121 s of one verify). At 65536 bits it is a sign. Beyond the top rung,
    a number with an exp of an argument over MAX_ZERO_TEST_EXP stays undecided without asking sympy."""
    st = api.statement("J_frobenius <= 1/(2*T)", hypotheses=["softmax"], id="frob").statements[0]
    logits = np.array([[29.116214014398796, 29.116214014398796, 0.0, -29.116214014398796]])
    cert = certify(st, Instance.from_logits(logits, nm.softmax(0.0006649947500516409)))
    assert cert.status == "holds" and cert.backend == "exact", (cert.status, cert.backend, cert.notes)
    assert cert.margin_lo >= 0 and cert.margin_hi < 1e-20, cert
    tiny = sp.log(1 + sp.exp(-sp.Integer(100_000)))  # 2^-144270
    sign, method = exact_tier.sign_of(tiny)
    assert sign is None and f"beyond {exact_tier.MAX_ZERO_TEST_EXP}" in method, method
    assert exact_tier.sign_of(sp.log(1 + sp.exp(-sp.Integer(10_000))))[0] == 1  # 2^-14427: the rung of 16384 bits


def test_a_closed_claims_sides_are_shown_exactly_when_rational_and_as_enclosures_when_not() -> None:
    """The record's decimals of a closed claim's sides: a rational side is its own decimal (an integer as itself, no
    enclosure, since it is exact), an irrational one an enclosure (midpoint +/- radius) that holds the value."""
    from attnbounds.theory.deciding.closed_claims import decide_conjunct

    def le(a: sp.Expr, b: sp.Expr) -> sp.Rel:
        return sp.Le(a, b, evaluate=False)

    for rational in (sp.Rational(24, 25), sp.Rational(1, 3), sp.Integer(2), sp.Rational(-7, 8), sp.Integer(10)**40):
        out = decide_conjunct(le(rational, rational + 1))
        for side, value in (("lhs_decimal", rational), ("rhs_decimal", rational + 1)):
            text = out[side]
            assert "+/-" not in text and "[" not in text, (value, text)
            if value.is_Integer:
                assert text == str(value), (value, text)
            else:
                assert abs(sp.Rational(text) - value) <= abs(value) * sp.Rational(1, 10**29), (value, text)
    for irrational in (sp.sqrt(2) - 1, sp.exp(-sp.Integer(1000)), sp.pi):
        text = decide_conjunct(le(sp.Integer(0), irrational))["rhs_decimal"]
        assert text.startswith("[") and "+/-" in text, (irrational, text)
        mid, rad = (sp.Rational(part.strip(" []")) for part in text.split("+/-"))
        assert mid - rad <= irrational <= mid + rad, (irrational, text)


@pytest.mark.parametrize("lhs, rhs, strict, status", [
    (sp.Rational(24, 25), sp.Rational(99, 100), False, "holds"),  # 1 - 0.2**2 = 0.96 <= 0.99
    (1 - (1 - sp.Rational(4, 5))**3, sp.Rational(99, 100), False, "violated"),  # 0.992 > 0.99
    (sp.sqrt(2) / 4, 1 / (2 * sp.sqrt(2)), False, "holds"),  # an algebraic equality: holds as <=
    (sp.sqrt(2) / 4, 1 / (2 * sp.sqrt(2)), True, "violated"),  # and fails as <: the margin is exactly 0
    (sp.exp(-sp.Integer(1600)), sp.exp(-sp.Integer(1599)), True, "holds"),  # far below the doubles
    # equalities only sympy's equals recognises (a nested surd, a log identity): no precision separates them from 0
    (sp.sqrt(2 + sp.sqrt(3)), (sp.sqrt(6) + sp.sqrt(2)) / 2, False, "holds"),
    (sp.sqrt(2 + sp.sqrt(3)), (sp.sqrt(6) + sp.sqrt(2)) / 2, True, "violated"),
    (sp.log(6), sp.log(2) + sp.log(3), True, "violated"),
    (sp.sqrt(3 - 2 * sp.sqrt(2)) + 1, sp.sqrt(2), False, "holds"),
])
def test_a_closed_claim_is_decided_by_the_exact_sign_of_its_margin(lhs: sp.Expr, rhs: sp.Expr, strict: bool,
                                                                   status: str) -> None:
    """Each conjunct of a closed claim is decided from the exact sign of rhs - lhs: holds, violated, or (strict, exactly
    0) violated; never undecided where the sign is known."""
    from attnbounds.theory.deciding.closed_claims import decide_conjunct

    rel = (sp.Lt if strict else sp.Le)(lhs, rhs, evaluate=False)
    out = decide_conjunct(rel)
    assert out["status"] == status, out


@pytest.mark.parametrize("relation", ["alpha_max <= 1/3", "alpha_max <= 0.9", "J_spectral <= 1/2", "J_row <= 1/4"])
def test_the_margins_ends_are_printed_to_25_significant_digits(relation: str) -> None:
    """``margin_lo_text`` and ``margin_hi_text`` are the margin interval's two ends in decimal, each to the same 25
    significant digits (a reader compares them digit by digit), within a unit of the 25th digit of the float ends."""
    import re
    from decimal import Decimal

    cert = certify(_statement(relation), Instance.from_logits(np.array([[0.0, 1.0, 2.0]]), nm.softmax(1.0)))
    for text, end in ((cert.margin_lo_text, cert.margin_lo), (cert.margin_hi_text, cert.margin_hi)):
        mantissa = re.sub(r"e.*$", "", text.lstrip("-")).replace(".", "").lstrip("0")
        assert len(mantissa) == 25, (relation, text)
        assert abs(Decimal(text) - Decimal(end)) <= abs(Decimal(end)) * Decimal("1e-15"), (relation, text, end)
