"""``attnbounds.tighten``: brackets of best constants derived by hand (issue 34, item 1).

Each case states a bound monotone in one constant C and the best C, derived below from the quantities' definitions
(``theory/mathematics/quantities/``). The bracket must contain the true constant, with the REFUTED side strictly on
the false side of it (a REFUTED record at the best constant itself would be a wrong verdict), and reach a relative
width of 1e-6 where the prover reaches it. A few fast cases run by default; the whole set under ``-m slow``
(``bench/tighten.py`` times the same set).

Derivations (softmax at temperature T: alpha_i = exp(l_i/T) / sum_j exp(l_j/T); a ratio normaliser: alpha_i =
F(l_i) / sum_j F(l_j)):

* **Lemma 1, softmax, |l| <= a.** alpha_max is largest with one token at a and the other L - 1 at -a:
  L*alpha_max = L e^{2a/T} / (e^{2a/T} + L - 1), increasing in L to e^{2a/T}, never attained: the best C of
  ``L*alpha_max <= C`` is e^{2a/T} (PROVED at it, REFUTED below it at large L). Symmetrically L*alpha_min =
  L / (1 + (L - 1) e^{2a/T}) decreases to e^{-2a/T}: the best C of ``L*alpha_min >= C`` is e^{-2a/T}. In
  Lemma 1's multiplicative form ``alpha_i <= C exp(2a/T)/L`` over every a and T the best C is 1, and 1 for
  ``alpha_i >= C exp(-2a/T)/L`` too.
* **Lemma 1, another normaliser** (``bsig``: F = 2 + sigmoid(l/T) takes every value in (2, 3) over unbounded
  logits): L*alpha_max = L F_max / sum F < L * 3 / (3 + 2(L - 1)) -> 3/2, and L*alpha_min -> 2/3; neither is
  attained (sigmoid never reaches 0 or 1): best C 3/2 and 2/3.
* **The softmax Jacobian** (d alpha_i / d l_j = alpha_i (delta_ij - alpha_j) / T). Entry: the diagonal
  alpha_i (1 - alpha_i)/T <= 1/(4T), the off-diagonal alpha_i alpha_j / T <= 1/(4T) since alpha_i + alpha_j <= 1;
  equality at two tokens of weight 1/2: best C of ``J_entry <= C`` at T = 1 is 1/4, of ``J_entry <= C/T`` over
  every T also 1/4, and of ``C*J_entry <= 1`` (PROVED below the best C) 4. Row: ||grad alpha_i||^2 =
  alpha_i^2 ((1 - alpha_i)^2 + sum_{j != i} alpha_j^2) / T^2 <= 2 alpha_i^2 (1 - alpha_i)^2 / T^2 (the other
  weights' squares sum to at most the square of their sum), at most 2/16 at alpha_i = 1/2, attained at two equal
  tokens: best C of ``J_row <= C`` at T = 1 is sqrt(2)/4. Spectral: diag(alpha) - alpha alpha^T has norm <= 1/2
  (Gershgorin: row i's absolute sum is 2 alpha_i (1 - alpha_i) <= 1/2; and 1/2 at two equal tokens): best C 1/2 at
  T = 1 (the relaxation reads J_spectral through Schur's test, which is that same row sum: tight at the optimum).
* **No relaxation** (the finite-difference gradient g_fd = ||alpha(l + eps v) - alpha(l)|| / eps over unit v, softmax,
  T = 1, eps = 1e-3): at most sup ||J||_2 = 1/2 by the mean value theorem, and within O(eps) of it; the prover
  declines the unit direction, so no constant can be PROVED: the upper side must stay open, the lower <= 1/2.
* **Length-aware** (scalable softmax ``ssm``: log F = s log(L) l / T, s = 1/2, T = 1, |l| <= a = 1, L >= 2): the
  largest weight is one token at a against L - 1 at -a: alpha_max = L^{1/2} / (L^{1/2} + (L - 1) L^{-1/2}) =
  L / (2L - 1), decreasing in L: best C of ``alpha_max <= C`` over L in [2, 10^6] is 2/3, attained at L = 2.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import pytest
import sympy as sp

import attnbounds
from attnbounds.theory.mathematics.errors import InvalidArgument

#: the relative width asked for
RTOL = 1e-6
#: budget per check in these tests (calibrated seconds)
BUDGET = 0.5

BSIG = {"name": "bsig", "log_F": "log(2 + sigmoid(l/T))"}
SSM = {"name": "ssm", "log_F": "s*log(L)*l/T", "params": {"T": 1.0, "s": 0.5}}


@dataclass(frozen=True)
class Case:
    """One hand-derived best constant: ``truth`` (sympy text) of ``constant`` in ``relation``, PROVED on the
    ``proved_side`` of it; ``reaches``: whether the prover is expected to PROVE near it (else the upper or lower
    side stays open and only containment is asserted)."""

    name: str
    relation: str
    truth: str
    proved_side: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    reaches: bool = True
    fast: bool = False


CASES = [
    Case("softmax.entry", "J_entry <= C", "1/4", "upper", {"hypotheses": ["softmax"], "fixed": {"T": 1.0}},
         fast=True),
    Case("softmax.entry_T", "J_entry <= C/T", "1/4", "upper", {"hypotheses": ["softmax"]}),
    Case("softmax.entry_inverse", "C*J_entry <= 1", "4", "lower", {"hypotheses": ["softmax"], "fixed": {"T": 1.0}}),
    Case("softmax.row", "J_row <= C", "sqrt(2)/4", "upper", {"hypotheses": ["softmax"], "fixed": {"T": 1.0}}),
    # Schur's problem with the two tokens as row and column needs about 5e6 operations within 1e-6 of 1/2: 2 s of work
    Case("softmax.spectral", "J_spectral <= C", "1/2", "upper",
         {"hypotheses": ["softmax"], "fixed": {"T": 1.0}, "budget": 2.0}),
    # 1/2 bounds the best constant from above (the mean value theorem): REFUTED strictly below it is still checked
    # (50-70 s: with -m slow)
    Case("softmax.fd", "g_fd <= C", "1/2", "upper",
         {"hypotheses": ["softmax", "unit-direction"], "fixed": {"T": 1.0, "eps": 0.001}}, reaches=False),
    Case("softmax.lemma1.max", "L*alpha_max <= C", "exp(2)", "upper",
         {"hypotheses": ["softmax", "logits-bounded"], "fixed": {"T": 1.0, "a": 1.0}}),
    Case("softmax.lemma1.max_a2", "L*alpha_max <= C", "exp(8/3)", "upper",
         {"hypotheses": ["softmax", "logits-bounded"], "fixed": {"T": 1.5, "a": 2.0}}),
    Case("softmax.lemma1.min", "L*alpha_min >= C", "exp(-2)", "lower",
         {"hypotheses": ["softmax", "logits-bounded"], "fixed": {"T": 1.0, "a": 1.0}}),
    Case("softmax.lemma1.C2", "alpha_i <= C*exp(2*a/T)/L", "1", "upper",
         {"hypotheses": ["softmax", "logits-bounded"], "defaults": {"a": "logit_absmax"}, "start": 3.0}),
    Case("softmax.lemma1.C1", "alpha_i >= C*exp(-2*a/T)/L", "1", "lower",
         {"hypotheses": ["softmax", "logits-bounded"], "defaults": {"a": "logit_absmax"}, "start": 0.3}),
    Case("bsig.lemma1.max", "L*alpha_max <= C", "3/2", "upper", {"normaliser": BSIG}),
    Case("bsig.lemma1.min", "L*alpha_min >= C", "2/3", "lower", {"normaliser": BSIG}),
    Case("ssm.alpha_max", "alpha_max <= C", "2/3", "upper",
         {"normaliser": SSM, "hypotheses": ["logits-bounded"], "fixed": {"a": 1.0, "T": 1.0},
          "ranges": {"L": [2, 1000000]}}, fast=True),
]


def run_case(case: Case, **overrides: Any) -> attnbounds.TightenResult:
    kwargs = {"budget": BUDGET, "seed": 0, "rtol": RTOL, **case.kwargs, **overrides}
    return attnbounds.tighten(case.relation, "C", **kwargs)


@functools.lru_cache(maxsize=None)
def default_run(name: str) -> attnbounds.TightenResult:
    """The default run of one case, shared by the tests that read it (a result is immutable)."""
    return run_case(next(c for c in CASES if c.name == name))


def formula_at(case: Case, value: str) -> str:
    """The case's relation with C replaced by the exact rational ``value``, as a record prints it."""
    from attnbounds.theory.running.tighten import user_statement

    keys = ("hypotheses", "fixed", "ranges", "defaults", "normaliser")
    st = user_statement(case.relation, "C", **{k: v for k, v in case.kwargs.items() if k in keys}).statements[0]
    return sp.sstr(st.subs(C=sp.Rational(value)).relation)


def check_bracket(case: Case, result: attnbounds.TightenResult) -> None:
    """The bracket never excludes the truth: PROVED at or past it, REFUTED strictly before it; the records are the
    verdicts they claim, about exactly the constants the bracket names; width <= rtol where the prover reaches."""
    truth = sp.sympify(case.truth)
    assert result.proved_side == case.proved_side, result
    easy_q = result.upper_exact if case.proved_side == "upper" else result.lower_exact
    hard_q = result.lower_exact if case.proved_side == "upper" else result.upper_exact
    sign = 1 if case.proved_side == "upper" else -1
    if easy_q is not None:
        easy = sp.Rational(easy_q)
        assert bool(sign * (easy - truth) >= 0), f"PROVED at {easy_q}, past the true constant {truth}: {result}"
        assert result.proved is not None and result.proved.verdict == "PROVED"
        assert result.proved.id.endswith(f"{{C={easy_q}}}"), result.proved.id
        assert result.proved.data["statement"]["formula"] == formula_at(case, easy_q)  # exactly that number
    else:
        assert result.proved is None
    if hard_q is not None:
        hard = sp.Rational(hard_q)
        assert bool(sign * (truth - hard) > 0), f"REFUTED at {hard_q}, not strictly before {truth}: {result}"
        assert result.refuted is not None and result.refuted.verdict == "REFUTED" and result.refuted.certified
        assert result.refuted.counterexample is not None
        assert result.refuted.id.endswith(f"{{C={hard_q}}}"), result.refuted.id
        assert result.refuted.data["statement"]["formula"] == formula_at(case, hard_q)
    else:
        assert result.refuted is None
    if case.reaches:
        assert result.converged, result
        assert result.relative_width is not None and result.relative_width <= RTOL, result
        lo, hi = Fraction(result.lower_exact or "0"), Fraction(result.upper_exact or "0")
        assert float((hi - lo) / min(abs(lo), abs(hi))) == pytest.approx(result.relative_width)


@pytest.mark.parametrize("case", [c for c in CASES if c.fast], ids=lambda c: c.name)
def test_fast_brackets_contain_the_true_constant(case: Case) -> None:
    check_bracket(case, default_run(case.name))


@pytest.mark.slow
@pytest.mark.parametrize("case", [c for c in CASES if not c.fast], ids=lambda c: c.name)
def test_brackets_contain_the_true_constant(case: Case) -> None:
    check_bracket(case, run_case(case))


@pytest.mark.slow  # 45-60 s
def test_no_proof_is_said_so_and_no_side_is_faked() -> None:
    """The prover declines the unit direction of g_fd: the upper side is None, the reason says the prover declined,
    the refuted side is certified and at most the supremum 1/2 (module docstring)."""
    result = default_run("softmax.fd")
    assert result.upper is None and result.proved is None and result.relative_width is None
    assert result.status == "stopped" and "declined" in result.reason and "VERIFIED" in result.reason
    assert result.lower is not None and 0.49 <= result.lower <= 0.5
    assert result.refuted is not None and result.refuted.verdict == "REFUTED"
    assert "?" in str(result) and "REFUTED" in str(result)
    assert result.best_verified is not None and sp.Rational(result.best_verified) > result.lower  # not a side


def test_result_views_and_json() -> None:
    case = CASES[0]
    result = default_run(case.name)
    line = str(result)
    assert "\n" not in line and "J_entry <= C" in line and "PROVED" in line and "REFUTED" in line
    assert "<table" in result._repr_html_() and "PROVED record" in result._repr_html_()
    assert "| relative width |" in result._repr_markdown_()
    data = json.loads(json.dumps(result.to_json()))
    assert data["proved"]["verdict"] == "PROVED" and data["refuted"]["verdict"] == "REFUTED"
    assert data["checks"] == len(data["steps"]) == result.checks >= 2
    assert result.proved is not None
    assert attnbounds.Record.from_json(data["proved"]).content_hash == result.proved.content_hash
    # seeded: the same seed and budget give the same checks (a shorter run is a prefix of a longer one)
    again = run_case(case, max_checks=2)
    assert [(s.constant, s.verdict) for s in again.steps] == [(s.constant, s.verdict) for s in result.steps[:2]]
    assert again.status == "stopped" and "max_checks" in again.reason


@pytest.mark.parametrize("relation, kwargs, message", [
    ("J_entry <= C", {"constant": "K"}, "does not appear in the relation"),
    ("J_entry <= C", {"constant": "T"}, "instance parameter"),
    ("J_entry <= C", {"constant": "J_entry"}, "is a quantity"),
    ("J_entry <= C", {"constant": "2C"}, "name of a free symbol"),
    ("J_entry <= C", {"budget": -1}, "budget must be"),
    ("J_entry <= C", {"rtol": 0}, "rtol must be"),
    ("J_entry <= C", {"max_checks": 0}, "max_checks must be"),
    ("J_entry <= C", {"start": float("nan")}, "start must be"),
    ("J_entry <= C - C**2", {}, "monotone"),
    ("(J_entry <= C) & (J_row >= C)", {}, "not monotone"),
    ("J_entry <= 0*C + 1", {}, "not a free symbol"),
])
def test_bad_input_is_refused_naming_it(relation: str, kwargs: dict[str, Any], message: str) -> None:
    constant = kwargs.pop("constant", "C")
    with pytest.raises(InvalidArgument, match=message):
        attnbounds.tighten(relation, constant, hypotheses=["softmax"], fixed={"T": 1.0}, **kwargs)


def test_both_records_replay(tmp_path: Any) -> None:
    """The PROVED side re-checks with ``prove --replay`` and the REFUTED side's counterexample with ``search
    --replay``, each against the statement rebuilt from its record (the constant inside it, exactly)."""
    from tests._cli import run_cli

    result = default_run(CASES[0].name)
    assert result.proved is not None and result.refuted is not None
    path = tmp_path / "records.json"
    path.write_text(json.dumps([result.proved.to_json(), result.refuted.to_json()]))
    code, out, err = run_cli(["prove", "--replay", str(path)])
    assert code == 0 and "REPLAYS" in out, (out, err)
    code, out, err = run_cli(["search", result.refuted.id, "--replay", str(path)])
    assert code == 0 and "reproduced" in out, (out, err)


def test_direction_is_decided_symbolically() -> None:
    from attnbounds.theory.running.tighten import direction, user_statement

    for relation, expected in [("J_entry <= C", (1, False)), ("C*J_entry <= 1", (-1, False)),
                               ("J_spectral <= 1/(C*T)", (-1, True)), ("exp(C) >= J_row", (1, False)),
                               ("L*alpha_min >= C", (-1, False))]:
        st = user_statement(relation, "C", hypotheses=["softmax"]).statements[0]
        assert direction(st, "C") == expected, relation


def test_cli_tightens_a_statement_of_a_file(tmp_path: Any) -> None:
    from tests._cli import run_cli

    path = tmp_path / "mine.toml"
    path.write_text('[[statement]]\nid = "mine.row"\nrelation = "J_row <= C"\nhypotheses = ["softmax"]\n'
                    'fixed = { T = 1.0 }\n')
    out = tmp_path / "bracket.json"
    code, stdout, stderr = run_cli(["tighten", "mine.row", "--statements", str(path), "--budget", str(BUDGET),
                                    "--start", "0.3535535", "--json", str(out)])
    assert code == 0, stderr
    assert "best C in" in stdout and "tighten: check 1:" in stderr
    data = json.loads(out.read_text())
    truth = sp.sqrt(2) / 4
    assert bool(sp.Rational(data["lower_exact"]) < truth <= sp.Rational(data["upper_exact"]))
    assert data["relative_width"] <= RTOL and data["proved"]["verdict"] == "PROVED" and data["checks"] == 2
    code, _, stderr = run_cli(["tighten", "mine.nope", "--statements", str(path)])
    assert code == 2 and "no statement with id 'mine.nope'" in stderr
    code, _, stderr = run_cli(["tighten", "mine.row", "--statements", str(path), "--constant", "K"])
    assert code == 2 and "does not appear" in stderr
    code, _, stderr = run_cli(["tighten", "mine.row", "--statements", str(path), "--rtol", "3"])
    assert code == 2 and "rtol must be" in stderr
