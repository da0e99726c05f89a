"""``attnbounds.check`` / ``assert_bound``: the Python API over the same loading, search, certification and record as
``attnbounds verify --statements``; callables as normalisers (certified or not); fixed parameters, ranges and closed
claims in TOML and in the API; bad input refused naming the value and what is allowed.

Every verdict here comes from the real search and certifier (small budgets)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import sympy as sp
import torch

import attnbounds
from attnbounds.theory.io import userbounds
from attnbounds.theory.mathematics import normalisers as nm
from attnbounds.theory.running.api import _cells, counterexample_table
from attnbounds.theory.mathematics.errors import InvalidArgument
from attnbounds.theory.io.serialize import float_from_json
from attnbounds.theory.running.verify import verify

ROOT = Path(__file__).resolve().parents[2]


pytestmark = pytest.mark.usefixtures("restore_family")


def test_check_leaves_the_normaliser_family_as_it_was():
    before = dict(nm.CONSTRUCTORS)
    attnbounds.check("alpha_i <= 1", normaliser=softpick, budget=0.2)
    assert nm.CONSTRUCTORS == before


def softpick(logits, T):
    x = logits / T
    m = x.max(dim=-1, keepdim=True).values.clamp(min=0.0)
    shifted = torch.exp(x - m) - torch.exp(-m)
    return torch.relu(shifted) / (shifted.abs().sum(-1, keepdim=True) + 1e-12 * torch.exp(-m))


def plain_softmax(logits, T):
    return torch.softmax(logits / T, dim=-1)


def ssmax(logits, T):
    L = torch.tensor(float(logits.shape[-1]), dtype=logits.dtype)
    return torch.softmax(0.4 * torch.log(L) * logits / T, dim=-1)


SSMAX = {"name": "ssmax_mine", "torch": ssmax, "log_F": "s*log(L)*l/T", "params": {"s": 0.4}}
FLOOR = dict(hypotheses=["logits-bounded"], defaults={"a": "logit_absmax"})


# -- the done-when of the API: verdicts from the real search and certifier --------------------------------------
def test_check_refutes_and_verifies_the_softmax_jacobian_bound():
    r = attnbounds.check("J_spectral <= 0.49/T", hypotheses=["softmax"], budget=2)
    assert r.verdict == "REFUTED" and r.certified
    assert r.counterexample["certificate"]["status"] == "violated"
    assert r.counterexample["certificate"]["margin_hi"] < 0
    r = attnbounds.check("J_spectral <= 1/(2*T)", hypotheses=["softmax"], budget=2)
    assert r.verdict in ("VERIFIED", "PROVED") and r.counterexample is None
    assert r.best_ratio is not None and 0.9 < r.best_ratio <= 1.0 + 1e-9


def test_record_api_json_cite_and_the_same_record_as_the_cli(tmp_path):
    r = attnbounds.check("alpha_i <= 1", budget=0.5, seed=1, id="mine.weights")
    data = r.to_json()
    assert data["id"] == "mine.weights" and data["statement"]["source"] == "user"
    assert data["search"]["budget_s"] == 0.5 and data["search"]["seed"] == 1
    cite = r.cite()
    assert "user-declared bound mine.weights" in cite and r.content_hash in cite and "@article" in cite
    # the same statement through a TOML file and verify gives the same record (apart from timing)
    f = tmp_path / "b.toml"
    f.write_text('[[statement]]\nid = "mine.weights"\nrelation = "alpha_i <= 1"\n'
                 'citation = "user bound mine.weights"\n')
    other = verify(statements=userbounds.load_statements(f).statements, budget_s=0.5, seed=1, progress=False)[0]
    assert other.content_hash == r.content_hash


def test_budget_and_seed_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("ATTNBOUNDS_BUDGET", "0.3")
    monkeypatch.setenv("ATTNBOUNDS_SEED", "5")
    r = attnbounds.check("alpha_i <= 1")
    assert r.data["search"]["budget_s"] == 0.3 and r.data["search"]["seed"] == 5
    monkeypatch.setenv("ATTNBOUNDS_BUDGET", "fast")
    with pytest.raises(InvalidArgument, match=r"\$ATTNBOUNDS_BUDGET must be a number, got 'fast'"):
        attnbounds.check("alpha_i <= 1")
    monkeypatch.setenv("ATTNBOUNDS_BUDGET", "-1")
    with pytest.raises(InvalidArgument, match="budget"):
        attnbounds.check("alpha_i <= 1")


# -- assert_bound ------------------------------------------------------------------------------------------------
def test_assert_bound_raises_with_a_readable_counterexample_table():
    with pytest.raises(AssertionError) as info:
        attnbounds.assert_bound("J_spectral <= 0.49/T", hypotheses=["softmax"], budget=1)
    text = str(info.value)
    assert text.startswith("J_spectral <= 0.49/T: REFUTED (certified counterexample)")
    for row in ("L ", "logits", "weights", "lhs", "rhs", "margin"):
        assert f"\n  {row}" in text, row
    assert "certified (arb" in text or "certified (mpmath" in text


def test_assert_bound_passes_and_fails_on_undecided_unless_allowed():
    r = attnbounds.assert_bound("alpha_i <= 1", budget=0.5)
    assert r.verdict == "VERIFIED"
    # softmax hypotheses never hold for a callable without log F: NOT-APPLICABLE, a failure unless allowed
    with pytest.raises(AssertionError, match="NOT-APPLICABLE"):
        attnbounds.assert_bound("alpha_i <= 1", hypotheses=["softmax"], normaliser=plain_softmax, budget=0.5)
    r = attnbounds.assert_bound("alpha_i <= 1", hypotheses=["softmax"], normaliser=plain_softmax, budget=0.5,
                                allow_undecided=True)
    assert r.verdict == "NOT-APPLICABLE"


def test_long_rows_are_cut_in_the_middle():
    text = _cells(list(range(20)))
    assert text.startswith("[0, 1, 2, 3, ... (12 more), 16, 17, 18, 19]")


# -- callables ---------------------------------------------------------------------------------------------------
def test_a_callable_without_log_F_is_refuted_in_float_only_never_certified():
    r = attnbounds.check("alpha_i*L >= exp(-2*a/T)", normaliser=softpick, budget=1, **FLOOR)
    assert r.verdict == "REFUTED" and r.certified is False and r.data["certified"] is False
    cx = r.counterexample
    assert cx["certified"] is False and cx["float"]["margin"] < 0 and "NOT certified" in cx["note"]
    assert "NOT certified" in r.reason and "float" in r.reason
    assert "not certified" in r.cite() and "certified by" not in r.cite()
    table = counterexample_table(r)
    assert "float64 only: NOT certified" in table and "softpick" in table
    with pytest.raises(AssertionError, match=r"REFUTED \(violated in float64 arithmetic \(NOT certified\)\)"):
        attnbounds.assert_bound("alpha_i*L >= exp(-2*a/T)", normaliser=softpick, budget=1, **FLOOR)


def test_a_callable_that_holds_is_at_most_verified_and_its_jacobian_comes_from_autograd():
    r = attnbounds.check("alpha_i <= 1", normaliser=softpick, budget=0.5)
    assert r.verdict == "VERIFIED" and not r.certified and "not certified" in r.reason
    # the Jacobian of plain softmax by autograd: ||J||_2 <= 1/(2T) holds (Corollary 3), searched, not certified
    r = attnbounds.check("J_spectral <= 1/(2*T)", normaliser=plain_softmax, budget=0.5)
    assert r.verdict == "VERIFIED" and not r.certified
    assert r.best_ratio is not None and 0.5 < r.best_ratio <= 1.0 + 1e-9
    assert r.data["search"]["plan"]["gradient_starts"] == 0  # gradient ascent steps log F: none for a callable


def test_hypotheses_computed_from_log_F_never_hold_for_a_callable_without_it():
    for hyp in ("softmax", "F-positive", "F-length-independent"):
        r = attnbounds.check("alpha_i <= 1", hypotheses=[hyp], normaliser=plain_softmax, budget=0.3)
        assert r.verdict == "NOT-APPLICABLE", hyp


def test_a_callable_with_log_F_is_certified_and_lemma1_costs_what_it_costs():
    # Lemma 1's hypothesis F-length-independent fails for SSMax (computed from log F)
    r = attnbounds.check("alpha_i >= C_1/L", hypotheses=["F-positive", "F-length-independent", "logits-bounded"],
                         defaults={"a": "logit_absmax"}, normaliser=SSMAX, budget=0.5)
    assert r.verdict == "NOT-APPLICABLE"
    # softmax's floor exp(-2a/T)/L fails for SSMax once s log L > 1 (L > e^2.5 ~ 12), certified
    r = attnbounds.check("alpha_i >= exp(-2*a/T)/L", normaliser=SSMAX, ranges={"L": [2, 4096]}, budget=1, **FLOOR)
    assert r.verdict == "REFUTED" and r.certified and r.counterexample["certificate"]["status"] == "violated"
    assert 13 <= r.counterexample["L"] <= 4096
    assert r.data["counterexample"]["instance"]["normaliser"]["log_F"] == "L**0*s*l*log(L)/T" or \
        "log(L)" in r.data["counterexample"]["instance"]["normaliser"]["log_F"]


def test_a_callable_that_disagrees_with_its_log_F_or_is_malformed_is_refused():
    with pytest.raises(InvalidArgument, match=r"the callable and log_F = .* disagree at L = \d+"):
        attnbounds.check("alpha_i <= 1", normaliser={"name": "wrong", "torch": ssmax, "log_F": "l/T"}, budget=0.3)
    with pytest.raises(InvalidArgument, match=r"returned weights of shape \(3, 1\); it must return one weight per logit .*\(logits of shape \(3, \d\)\)"):
        attnbounds.check("alpha_i <= 1", normaliser=lambda lg, T: lg[..., :1], budget=0.3)
    with pytest.raises(InvalidArgument, match="not permutation-equivariant"):
        attnbounds.check("alpha_i <= 1", budget=0.3,
                         normaliser=lambda lg, T: torch.softmax(lg + torch.arange(lg.shape[-1], dtype=lg.dtype), -1))
    with pytest.raises(InvalidArgument, match="a normaliser must be|normaliser must be None"):
        attnbounds.check("alpha_i <= 1", normaliser=42, budget=0.3)
    with pytest.raises(InvalidArgument, match="unknown normaliser 'softmaxx'; .*built-in: .*softmax"):
        attnbounds.check("alpha_i <= 1", normaliser="softmaxx", budget=0.3)
    assert "wrong" not in nm.CONSTRUCTORS


# -- fixed, ranges, closed claims ----------------------------------------------------------------------------------
def test_fixed_parameters_in_toml_decide_the_multihead_coverage(tmp_path):
    f = tmp_path / "heads.toml"
    f.write_text('[[statement]]\nid = "heads2"\nrelation = "coverage_enum >= 0.99"\nfixed = { p = 0.8, H = 2 }\n\n'
                 '[[statement]]\nid = "heads3"\nrelation = "coverage_enum >= 0.99"\nfixed = { p = 0.8, H = 3 }\n')
    recs = {r.id: r for r in verify(statements=userbounds.load_statements(f).statements, budget_s=1, progress=False)}
    two, three = recs["heads2"], recs["heads3"]
    assert two.verdict == "REFUTED" and three.verdict in ("VERIFIED", "PROVED")
    params = two.counterexample["instance"]["params"]
    assert float_from_json(params["p"], "p").tolist() == [0.8] and float_from_json(params["H"], "H").tolist() == [2.0]
    assert two.data["statement"]["fixed"] == {"H": 2.0, "p": 0.8}
    assert three.data["statement"]["fixed"] == {"H": 3.0, "p": 0.8}
    assert three.best_ratio == pytest.approx(0.99 / 0.992)  # the one value of the coverage: 1 - 0.2**3


def test_fixed_and_ranges_in_the_api():
    r = attnbounds.check("alpha_i <= 2/L", normaliser="softmax", fixed={"T": 0.5},
                         ranges={"L": [21, 1_000_000]}, budget=1)
    assert r.verdict == "REFUTED"
    assert 21 <= r.counterexample["L"] <= 1_000_000
    T = float_from_json(r.counterexample["instance"]["params"]["T"], "T").tolist()
    assert T == [0.5]
    lo, hi = r.data["search"]["L_range"]["all"]
    assert 21 <= lo <= hi <= 1_000_000
    assert r.data["statement"]["ranges"] == {"L": [21.0, 1_000_000.0]}
    r = attnbounds.check("alpha_i <= 1", ranges={"L": [21, 1000], "T": [0.01, 10]}, budget=0.5)
    assert r.verdict == "VERIFIED"
    lo, hi = r.data["search"]["L_range"]["all"]
    assert 21 <= lo <= hi <= 1000


def test_ranges_and_the_normaliser_key_in_toml_and_a_builtin_normaliser_keeps_its_values(tmp_path):
    f = tmp_path / "r.toml"
    f.write_text('[[statement]]\nid = "long"\nrelation = "alpha_i <= 2/L"\nnormaliser = "softmax"\n'
                 'ranges = { L = [21, 1000000], T = [0.01, 10] }\n')
    (r,) = verify(statements=userbounds.load_statements(f).statements, budget_s=0.5, progress=False)
    assert r.verdict == "REFUTED" and 21 <= r.counterexample["L"] <= 1_000_000
    assert r.data["statement"]["ranges"] == {"L": [21.0, 1_000_000.0], "T": [0.01, 10.0]}
    assert any(h["id"] == "normaliser(softmax)" for h in r.data["hypotheses"])
    T = float_from_json(r.counterexample["instance"]["params"]["T"], "T")[0]
    assert 0.01 <= T <= 10
    r = attnbounds.check("alpha_i <= 1", normaliser=nm.exp_poly(b=0.25), budget=0.3)
    # true for every L: the relaxation prover proves it (for exp_poly at b = 0.25, any T)
    assert r.verdict == "PROVED" and r.data["relaxation"]["status"] == "proved"
    assert r.data["statement"]["fixed"] == {"b": 0.25}


@pytest.mark.parametrize("kwargs, message", [
    ({"fixed": {"q": 1.0}}, r"key 'fixed.q': unknown parameter 'q'; parameters that can be fixed: .*\bp\b"),
    ({"fixed": {"p": 1.5}}, r"key 'fixed.p' = 1.5 is outside its domain: .*0 <= p <= 1"),
    ({"fixed": {"H": 2.5}}, r"key 'fixed.H' = 2.5 is outside its domain: .*whole number"),
    ({"fixed": {"L": 10}}, r"key 'fixed.L': L is each instance's length.*ranges = \{ L = \[10, 10\] \}"),
    ({"fixed": {"T": "hot"}}, r"key 'fixed.T' must be a finite number, got 'hot'"),
    ({"ranges": {"L": [100, 10]}}, r"key 'ranges.L' = \[100, 10\]: low 100 is above high 10"),
    ({"ranges": {"L": [2.5, 10]}}, r"the low end 2.5 is outside the domain: L must be a whole number"),
    ({"ranges": {"T": [0, 10]}}, r"key 'ranges.T' = \[0, 10\]: the low end 0 is outside the domain: .*T > 0"),
    ({"ranges": {"N": [1, 2]}}, r"unknown parameter 'N'; parameters with a range: L, T, p, H, eps, M"),
    ({"ranges": {"L": [1, 2, 3]}}, r"key 'ranges.L' must be a pair \[low, high\], got \[1, 2, 3\]"),
    ({"fixed": {"T": 1.0}, "ranges": {"T": [1, 2]}}, r"'T' is also fixed"),
    ({"fixed": [1]}, r"fixed must be a dict"),
])
def test_bad_fixed_and_ranges_are_refused_naming_the_value(kwargs, message):
    with pytest.raises(InvalidArgument, match=message):
        attnbounds.check("alpha_i <= 1", budget=0.3, **kwargs)


def test_closed_claims_are_decided_exactly():
    r = attnbounds.check("1 - (1 - 0.8)**2 >= 0.99")
    assert r.verdict == "REFUTED" and r.counterexample is None
    (part,) = r.data["closed_claim"]["conjuncts"]
    # exact (0.8 is 4/5), each side as written: lhs 1 - (1 - 4/5)^2, rhs 99/100; the margin by how much it holds
    assert (part["lhs"], part["rhs"], part["margin"]) == ("24/25", "99/100", "-3/100")
    assert part["method"] == "exact rational arithmetic" and "24/25" in r.reason
    r = attnbounds.check("1 - (1 - p)**H >= 0.99", fixed={"p": 0.8, "H": 3})
    assert r.verdict == "PROVED" and r.data["closed_claim"]["conjuncts"][0]["lhs"] == "124/125"
    assert r.data["statement"]["fixed"] == {"H": 3.0, "p": 0.8}
    r = attnbounds.check("(exp(1) >= 2.718) & (pi <= 3.1416)")
    assert r.verdict == "PROVED" and all("interval arithmetic" in c["method"] for c in r.data["closed_claim"]["conjuncts"])
    r = attnbounds.check("sqrt(2)**2 <= 2")
    assert r.verdict == "PROVED"  # an exact equality, recognised exactly
    assert "closed claim" in r.cite() and "decided exactly" in r.cite()
    with pytest.raises(AssertionError, match=r"(?s)REFUTED \(decided exactly\).*\n  lhs +24/25"):
        attnbounds.assert_bound("1 - (1 - 0.8)**2 >= 0.99")


@pytest.mark.parametrize("written, mirror, lhs, rhs, status", [
    ("1 - 0.2**2 >= 0.99", "0.99 <= 1 - 0.2**2", "24/25", "99/100", "violated"),
    ("sqrt(2) >= 1.5", "1.5 <= sqrt(2)", "sqrt(2)", "3/2", "violated"),
    ("1/3 > 1/3", "1/3 < 1/3", "1/3", "1/3", "violated"),  # strict between exactly equal sides
    ("2 >= 1", "1 <= 2", "2", "1", "holds"),
])
def test_a_closed_claim_reports_each_side_as_written(written, mirror, lhs, rhs, status):
    """``a >= b`` and ``b <= a`` are one claim: the same margin and status, each record naming its own sides."""
    (part,) = attnbounds.check(written).data["closed_claim"]["conjuncts"]
    (other,) = attnbounds.check(mirror).data["closed_claim"]["conjuncts"]
    assert (part["lhs"], part["rhs"]) == (lhs, rhs) and (other["lhs"], other["rhs"]) == (rhs, lhs), (part, other)
    assert (part["lhs_decimal"], part["rhs_decimal"]) == (other["rhs_decimal"], other["lhs_decimal"])
    assert float(part["lhs_decimal"].strip("[").split()[0]) == pytest.approx(float(sp.sympify(lhs)))  # a ball or exact
    assert part["margin"] == other["margin"] and part["status"] == other["status"] == status
    if lhs == rhs:
        assert "exactly equal" in part["method"], part


def test_closed_claims_in_toml_and_relations_decided_whatever_the_values(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text('[[statement]]\nid = "c"\nrelation = "2 <= 1"\n')
    (r,) = verify(statements=userbounds.load_statements(f).statements, progress=False)
    assert r.verdict == "REFUTED" and r.data["closed_claim"]["conjuncts"][0]["lhs"] == "2"
    with pytest.raises(InvalidArgument, match="is True whatever the values .*evaluates to True"):
        attnbounds.check("J_spectral <= J_spectral + 1")
    with pytest.raises(InvalidArgument, match="closed claim .* 'hypotheses'"):
        attnbounds.check("2 <= 1", hypotheses=["softmax"])
    with pytest.raises(InvalidArgument, match="must be an inequality"):
        attnbounds.check("1 + 2")


def test_bad_arguments_are_refused_naming_them():
    with pytest.raises(InvalidArgument, match="relation must be a string"):
        attnbounds.check(3)
    with pytest.raises(InvalidArgument, match="unknown hypothesis 'sofmax'; known: .*softmax"):
        attnbounds.check("alpha_i <= 1", hypotheses=["sofmax"])
    with pytest.raises(InvalidArgument, match="unknown name 'alpha'"):
        attnbounds.check("alpha <= 1")


# -- the example -------------------------------------------------------------------------------------------------
@pytest.mark.slow  # 20-28 s: the whole example
def test_the_check_your_variant_example_runs(tmp_path):
    env = {**os.environ, "ATTNBOUNDS_BUDGET": "0.5", "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "check_your_variant.py")], capture_output=True,
                         text=True, timeout=300, cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    text = out.stdout
    assert "summary: every verdict as expected" in text
    assert "verdict: NOT-APPLICABLE" in text and "verdict: REFUTED" in text and "(not certified)" in text
    assert "REFUTED (violated in float64 arithmetic (NOT certified))" in text
    assert list(tmp_path.iterdir()) == []  # nothing written where it runs
