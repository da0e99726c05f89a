"""What the relaxation reaches beyond one fixed log F and one logit box (issue 33).

- every positive F: with no hypothesis fixing log F, and only 'F positive' / 'F independent of L' said about it, the
  relaxation ranges over the log-F values themselves (every point is the instance of some F), so Lemma 1 is proved
  for every F at once; false variants are never proved (the model realises no counterexample: the search refutes
  them);
- query-key logits: Cauchy-Schwarz bounds every logit by Delta_max, the relaxed logit box's a;
- the limit on distinguished tokens is inclusive: a statement with exactly that many is relaxed (one problem has them
  all on tokens of their own), one with more is declined with the count and the limit.
"""

from __future__ import annotations

import importlib
import json
from typing import Any

import numpy as np
import pytest
import sympy as sp

import attnbounds
from attnbounds.theory.deciding import prover
from attnbounds.theory.running import api


def test_lemma1_is_proved_for_every_F_and_replays() -> None:
    st = attnbounds.get("lemma1")
    result = prover.prove(st, work=prover.work_for(2.0))
    assert result.status == "proved", result.reason
    assert prover.replay(st, json.loads(json.dumps(result.to_json())))[0]


@pytest.mark.parametrize("relation", [
    "alpha_i <= C_2/(L+1)",        # false where C_2 < 2: equal F values give 1/L > 1/(L+1)
    "alpha_i >= 1.0001*C_1/L",      # false at equal F values (C_1 = 1, alpha_i = 1/L)
    "alpha_max < C_2/(C_2 + L - 1)",  # the supremum is attained: one token at F's maximum, the others at its minimum
])
def test_false_bounds_over_every_F_are_not_proved(relation: str) -> None:
    st = api.statement(relation, hypotheses=["F-positive", "logits-bounded"], defaults={"a": "logit_absmax"},
                       id="everyF").statements[0]
    assert prover.prove(st, work=prover.work_for(1.0)).status != "proved"


@pytest.mark.parametrize("relation, ranges", [("alpha_max <= 1", {}), ("alpha_max*L >= 1", {}),
                                             ("alpha_min*L <= 1", {})])
def test_bounds_over_every_F_whose_denominator_vanishes_only_at_no_instance_are_proved(relation: str,
                                                                                      ranges: dict) -> None:
    """``alpha_max <= 1`` for every F: the core ``(1 - t) S / (t + (1 - t) S)`` (S the others' mean of
    ``F / F_max``, in (0, 1]) has a denominator whose lower end on the box is 0 (t = 0 and S -> 0: no instance), but
    that is ``t`` plus a part >= 0 on the box, so > 0 at every instance; the factors >= 0 of the numerator go too and
    the core left is a constant. Proved and replayed."""
    st = api.statement(relation, hypotheses=["F-positive"], id="every-F", ranges=ranges).statements[0]
    result = prover.prove(st, work=prover.work_for(2.0))
    assert result.status == "proved", result.reason
    assert prover.replay(st, json.loads(json.dumps(result.to_json())))[0]


@pytest.mark.parametrize("relation", ["alpha_max <= 0.999", "alpha_max < 1", "alpha_min >= 1e-300",
                                      "alpha_max*L >= 1.001"])
def test_their_false_twins_over_every_F_are_never_proved(relation: str) -> None:
    """False at L = 1 (alpha_max = 1), at one token far heavier than the rest, or at equal weights."""
    st = api.statement(relation, hypotheses=["F-positive"], id="every-F").statements[0]
    result = prover.prove(st, work=prover.work_for(2.0))
    assert result.status != "proved"
    assert "failed" not in result.reason, result.reason  # no internal error (a constant past the doubles, say)


def test_an_F_property_the_log_F_values_do_not_keep_still_declines() -> None:
    """'weights on the simplex' allows zero weights, which no finite log-F value is: that reading stays declined."""
    st = api.statement("alpha_max >= 1/L", hypotheses=["simplex"], id="simplex").statements[0]
    assert prover.prove(st, work=prover.work_for(1.0)).status == "declined"


def test_corollary1_with_the_largest_key_is_proved_through_the_keys_bound_of_the_logits() -> None:
    """logits-qk: |<q, k_j>| <= ||q|| ||k_j|| <= Delta_max, so the relaxed logits lie in [-a, a] with a = Delta_max."""
    st = attnbounds.get("corollary1[delta=max-key]")
    result = prover.prove(st, work=prover.work_for(2.0))
    assert result.status == "proved", result.reason
    assert prover.replay(st, json.loads(json.dumps(result.to_json())))[0]


def test_corollary1_with_the_own_key_is_proved_through_cauchy_schwarz_on_both_sides_of_its_kink() -> None:
    """||q|| ||k_i|| >= |l_i| is read as a lower bound (the margin grows with Delta_i); |l_i| is split at l_i = 0,
    where each side is an identity at its tight face, and the parts together cover the logit's whole range."""
    st = attnbounds.get("corollary1[delta=own-key,corrected]")
    result = prover.prove(st, work=prover.work_for(2.0))
    assert result.status == "proved", result.reason
    certificate = json.loads(json.dumps(result.to_json()))
    assert prover.replay(st, certificate)[0]
    rel = prover.relax(st)
    for per in rel.strategies:
        parts = sorted((co.lo, co.hi) for group in per[-1] for p in group.alternatives for co in p.coordinates
                       if str(co.symbol) == "u_r0")
        assert parts == [(-1.0, 0.0), (0.0, 1.0)], parts
        assert all("lower bound: Delta_own" in p.pattern for group in per[-1] for p in group.alternatives)


@pytest.mark.parametrize("relation", [
    "alpha_i <= exp(Delta_max/T)/L", "alpha_i >= exp(-Delta_max/T)/L",  # half the exponent of Corollary 1
    "alpha_i <= exp(2*Delta_own/T)/L", "exp(-2*Delta_own/T)/L <= alpha_i",  # the i-th key alone bounds no other logit
    "alpha_i*L <= exp(Delta_max/T + Delta_own/(2*T))",  # a little below the corrected reading
])
def test_bounds_of_the_weights_by_the_keys_that_are_too_strong_are_refuted_by_query_key_instances(relation: str
                                                                                                  ) -> None:
    """With half an exponent the bound fails (one key antiparallel to q, the others parallel with the largest norm):
    the prover's counterexample is built from a query and keys (logits-qk holds on it) and violates the bound."""
    from attnbounds.theory.mathematics.hypotheses import LOGITS_QK
    from attnbounds.theory.mathematics.quantities import compute

    st = api.statement(relation, hypotheses=["softmax", "logits-qk"], id="qk").statements[0]
    result = prover.prove(st, work=prover.work_for(1.0))
    assert result.status == "refuted", result.reason
    cx = result.counterexample
    assert cx is not None and cx.q is not None and bool(LOGITS_QK(cx)[0])
    T = float(cx.normaliser.params["T"])  # type: ignore[union-attr]
    values = {"alpha_i": np.asarray(compute("alpha_i", cx))[0], "Delta_own": np.asarray(compute("Delta_own", cx))[0],
              "Delta_max": float(np.asarray(compute("Delta_max", cx))[0]), "T": T, "L": cx.L}
    holds = sp.lambdify(sorted(st.relation.free_symbols, key=str), st.relation.xreplace(
        {sym: sp.Symbol(st.bindings.get(str(sym), str(sym))) for sym in st.relation.free_symbols}), "numpy")
    names = sorted(st.relation.free_symbols, key=str)
    assert not np.all(holds(*(values[st.bindings.get(str(n), str(n))] for n in names)))


def test_a_margin_that_shrinks_as_the_own_key_grows_is_not_read_through_its_lower_bound() -> None:
    """``Delta_own <= Delta_max`` is true, but |l_i| <= Delta_own bounds Delta_own from below: reading it there would
    prove nothing, and the relaxation declines saying so."""
    st = api.statement("Delta_own <= Delta_max", hypotheses=["softmax", "logits-qk"], id="qk").statements[0]
    result = prover.prove(st, work=prover.work_for(1.0))
    assert result.status == "declined" and "lower bound" in result.reason, (result.status, result.reason)


# -- normalisers that read L through log(log L) or a power of L (issue 33: final verdicts where bounds are tight) ------
#: F = exp(log(1 + log L) l / T) and F = exp(sqrt(L) l / T), logits in [-1, 1]: L alpha_min >= L / (1 + (L - 1) G(L)^2)
#: with G = 1 + log L (resp. e^sqrt(L)), one token at -1 and the others at +1
LLOG = {"name": "llog", "log_F": "log(1 + log(L))*l/T"}
LPOW = {"name": "lpow", "log_F": "sqrt(L)*l/T"}
REACH = {"hypotheses": ["logits-bounded"], "fixed": {"a": 1.0, "T": 1.0}}


def _reach(relation: str, normaliser: dict[str, str], work_s: float = 2.0) -> tuple[Any, Any]:
    from attnbounds.theory.mathematics.normalisers import constructors_added

    user = api.statement(relation, normaliser=normaliser, id="reach", **REACH)
    with constructors_added(user.normalisers):
        statement = user.statements[0]
        return statement, prover.prove(statement, work=prover.work_for(work_s))


@pytest.mark.parametrize("relation, normaliser", [
    ("L*alpha_min >= 1/(1 + log(L))**2", LLOG),  # equality at L = 1, the margin ~ 1/(L log^2 L) as L -> oo
    pytest.param("L*alpha_min >= exp(-2*sqrt(L))", LPOW, marks=pytest.mark.slow),  # the margin ~ e^(-2 sqrt L) / L
])
def test_bounds_whose_margin_vanishes_faster_than_any_power_of_t_are_proved_and_replay(relation: str,
                                                                                     normaliser: dict[str, str]) -> None:
    """The margin tends to 0 as L -> oo at a rate no power of t = 1/L matches, through log(-log t) or t^(-1/2): the
    core over its own denominator (numerator factored, denominator kept as built) is a product of factors of known
    sign on every box [0, h] of t, which the whole-line expansion sympy makes of that denominator is not."""
    from attnbounds.theory.mathematics.normalisers import constructors_added

    statement, result = _reach(relation, normaliser)
    assert result.status == "proved", result.reason
    cert = json.loads(json.dumps(result.to_json()))
    with constructors_added(api.statement(relation, normaliser=normaliser, id="reach", **REACH).normalisers):
        assert prover.replay(statement, cert)[0]
        # a face form that is not the core on its face is refused (exact algebra), whatever the tree says
        forged = json.loads(json.dumps(cert))
        problem = forged["problems"][-1]
        key = next(k for k, forms in problem["faces"].items() if len(forms) > 1)
        problem["faces"][key] = [problem["faces"][key][0]] * len(problem["faces"][key])
        problem["faces"][key][-1] = "Integer(1)"
        ok, why = prover.replay(statement, forged)
        assert not ok and "is not the core there" in why, why


@pytest.mark.parametrize("relation, normaliser", [
    ("L*alpha_min >= 1/(1 + 0.9*log(L))**2", LLOG),  # false from L = 2 on
    ("L*alpha_min >= exp(-1.9*sqrt(L))", LPOW),  # false from L = 5 on
    ("L*alpha_min >= 1.0001/(1 + log(L))**2", LLOG),  # false at L = 1 (and from L of about 1e4 on)
])
def test_near_misses_of_those_bounds_are_never_proved(relation: str, normaliser: dict[str, str]) -> None:
    _, result = _reach(relation, normaliser, work_s=1.0)
    assert result.status != "proved", result.reason


def test_a_bound_false_only_beyond_l_of_four_times_ten_to_the_fourteen_is_refuted_there() -> None:
    """L alpha_min >= 0.00083 under llog: L / (1 + (L - 1)(1 + log L)^2) < 0.00083 once (1 + log L)^2 > ~1205, from
    L ~ 4.4e14 on (true at L = 9^15 ~ 2.1e14: 1/1160 > 0.00083). Boxes [0, h] of t are cut at h^2 (log log L steps),
    so the negative box is a few cuts away; the counterexample is realised as token classes (one token at -1, the others
    at +1) at the shortest length the prover tries that violates it, 10^15, the longest (``prover.LENGTHS``), and
    certified. (0.001, false from L ~ 2e13, is the tight set's false.reach.llog, run with -m slow.)"""
    from attnbounds.theory.deciding.certify import certify
    from attnbounds.theory.mathematics.normalisers import constructors_added

    statement, result = _reach("L*alpha_min >= 0.00083", LLOG)
    assert result.status == "refuted", result.reason
    inst = result.counterexample
    assert inst is not None and inst.L == 10**15
    with constructors_added(api.statement("L*alpha_min >= 0.00083", normaliser=LLOG, id="reach", **REACH).normalisers):
        assert certify(statement, inst).status == "violated"


def test_the_float_tier_keeps_the_sign_of_odd_powers_and_inverts_powers_of_two_exactly() -> None:
    """1/t on [0, h] is [1/h, inf] (t^1 was widened below 0: the whole line), and 1/[1, 1] is exactly 1 (log(1/t) at
    L = 1 is then 0, not a negative ulp that hides every sign read through log(log(1/t) + 1))."""
    import numpy as np
    import sympy as sp

    from attnbounds.theory.deciding.prover.program import compile_program, run_float

    t = sp.Symbol("t", real=True)
    prog = compile_program([1 / t, t**3, sp.log(1 / t), 1 / (-t) ** 3], [t])
    (r_lo, r_hi), (c_lo, c_hi), (g_lo, g_hi), (n_lo, n_hi) = run_float(prog, np.array([[0.0], [1.0], [0.25]]),
                                                                       np.array([[0.5], [1.0], [0.5]]))
    assert r_lo[0] == 2.0 and r_hi[0] == np.inf and c_lo[0] == 0.0 and n_lo[0] == -np.inf and n_hi[0] < 0
    assert r_lo[1] == r_hi[1] == 1.0 and g_lo[1] == g_hi[1] == 0.0
    assert (r_lo[2], r_hi[2]) == (2.0, 4.0)


def test_float_enclosures_contain_sampled_values_near_t_zero() -> None:
    """The float tier (a filter) and the rigorous tier enclose the core of the log-log reach statement at sampled
    points of boxes [0, h], h down to 1e-300 (its own expression and the kept-denominator form)."""
    import numpy as np
    import sympy as sp

    from attnbounds.theory.deciding.prover.bnb import _forms
    from attnbounds.theory.deciding.prover.program import compile_program, run_float, run_rigorous

    t, d = sp.Symbol("t", real=True), sp.Symbol("d", real=True)
    G = sp.log(1 / t) + 1
    core = -1 / G**2 + 1 / (t + (1 - t) * sp.exp(d * sp.log(G)))
    forms = _forms(core)
    assert len(forms) >= 2
    prog = compile_program(forms, [t, d])
    rng = np.random.default_rng(0)
    for h in (0.5, 1e-3, 1e-20, 1e-300):
        for d_lo, d_hi in ((0.0, 2.0), (1.5, 2.0), (2.0, 2.0)):
            lo, hi = np.array([0.0, d_lo]), np.array([h, d_hi])
            fl = run_float(prog, lo[None], hi[None])
            rg = run_rigorous(prog, lo, hi, "mpmath.iv")
            for _ in range(20):
                x = float(h * rng.random() ** 8) or h
                dd = float(d_lo + (d_hi - d_lo) * rng.random())
                value = float(sp.N(core.subs({t: sp.Rational(x), d: sp.Rational(dd)}), 30))
                for k in range(len(forms)):
                    assert fl[k][0][0] <= value * (1 + 1e-9) + 1e-300 and value * (1 - 1e-9) - 1e-300 <= fl[k][1][0]
                    assert rg[k][0] <= value * (1 + 1e-9) + 1e-300 and value * (1 - 1e-9) - 1e-300 <= rg[k][1]


def test_boxes_of_t_reaching_zero_are_cut_at_the_square_of_their_end() -> None:
    from attnbounds.theory.deciding.prover.bnb import _split_point

    assert _split_point(0.0, 0.25, limit=True) == 0.0625
    assert _split_point(0.0, 1e-200, limit=True) == 1e-200 / 2  # h^2 underflows: halved
    assert _split_point(0.0, 1.0, limit=True) == 0.5  # (at t = 1 the square is the end itself)
    assert _split_point(0.0, 0.25) == 0.125  # other coordinates: as before


def test_a_bound_that_does_not_read_the_logit_box_is_proved_through_the_stronger_statement_first() -> None:
    """J_row <= C/T (sup sqrt(2)/4 at two equal tokens, any T) with |l| <= 1: the relation does not read a, so the
    statement without logits-bounded (the weights model: two coordinates) is tried first, on half of the work,
    and its proof is the statement's. The logits model alone (six coordinates, T unbounded) runs out of that work."""
    st = api.statement("J_row <= 0.3542/T", hypotheses=["softmax", "logits-bounded"], fixed={"a": 1.0},
                       id="row").statements[0]
    result = prover.prove(st, work=prover.work_for(0.5))
    assert result.status == "proved", result.reason
    assert "stronger statement without the hypothesis logits-bounded" in result.reason
    assert result.work <= prover.work_for(0.5) * prover.STRONGER_SHARE + 1
    assert prover.replay(st, json.loads(json.dumps(result.to_json())))[0]


def test_a_false_stronger_statement_leaves_the_statement_its_work() -> None:
    """L*alpha_max <= e^2 + 0.01 needs |l| <= 1 (without it one token takes all the weight): the stronger statement
    fails, and the statement itself is proved on the rest of the work, which the record counts in full."""
    st = api.statement("L*alpha_max <= 7.4", hypotheses=["softmax", "logits-bounded"], fixed={"a": 1.0, "T": 1.0},
                       id="lemma1ish").statements[0]
    result = prover.prove(st, work=prover.work_for(1.0))
    assert result.status == "proved", result.reason
    assert "stronger statement" not in result.reason
    assert prover.replay(st, json.loads(json.dumps(result.to_json())))[0]


def test_the_statement_itself_gets_the_work_the_stronger_one_left() -> None:
    """``prove``'s work is one budget: the stronger statement spends at most its share, the statement itself gets the
    rest (not the whole budget again), and the result counts both. Neither closes here, so each runs to its limit and
    the total is exactly the two runs' (deterministic: the same counts on every machine)."""
    st = api.statement("J_row <= 0.36/T - 0.01", hypotheses=["softmax", "logits-bounded"], fixed={"a": 1.0},
                       id="rest").statements[0]
    work = 1_000_000
    result = prover.prove(st, work=work)
    stronger = prover._without_restrictions(st)
    assert stronger is not None and result.status == "open", result.reason
    first = prover._prove(stronger, int(work * prover.STRONGER_SHARE))
    assert first.status != "proved" and 0 < first.work < work
    assert result.work == first.work + prover._prove(st, work - first.work).work


@pytest.mark.parametrize("ranges", [None, {"T": [0.5, 2.0]}])
def test_a_bound_false_for_every_positive_a_over_t_is_refuted_through_splits_of_that_half_line(ranges) -> None:
    """L alpha_i <= 1 + 2 a/T + 2 (a/T)^2: e^(2 beta) (beta = a/T, one token at a and one at -a as L -> oo) exceeds
    its Taylor polynomial for every beta > 0, with equality at beta = 0. The relaxed coordinate beta ranges over the
    half-line [0, oo] (a = logit_absmax unbounded, whatever T's range), and the counterexample lies only on its finite
    boxes after beta is split: refuted, and the instance certified."""
    from attnbounds.theory.deciding.certify import certify

    st = api.statement("L*alpha_i <= 1 + 2*a/T + 2*(a/T)**2", hypotheses=["softmax", "logits-bounded"],
                       defaults={"a": "logit_absmax"}, ranges=ranges, id="taylor").statements[0]
    halves = [(c.lo, c.hi) for p in prover.relax(st).problems for c in p.coordinates if str(c.symbol) == "beta"]
    assert halves and all(lo == 0.0 and hi == float("inf") for lo, hi in halves), halves
    result = prover.prove(st, work=prover.work_for(1.0))
    assert result.status == "refuted" and result.counterexample is not None, result.reason
    assert certify(st, result.counterexample).status == "violated"


@pytest.mark.parametrize("lo, hi", [(0.0, float("inf")), (float("-inf"), 0.0)])
def test_a_core_on_a_half_line_is_proved_through_splits_of_its_finite_boxes(lo: float, hi: float) -> None:
    """x^4 - x^2 + 1/2 >= 0 on a half-line (its least value 1/4 at x = +-1/sqrt(2)): neither the natural enclosure,
    the slope, the mean-value form nor the curvature decides it on [0, 1] (or [-1, 0]): the finite boxes of the
    half-line coordinate are split until they close, and the tree replays."""
    import sympy as sp

    from attnbounds.theory.deciding.prover import bnb
    from attnbounds.theory.deciding.prover.problem import Coordinate, Problem

    x = sp.Symbol("x", real=True)
    core = x**4 - x**2 + sp.Rational(1, 2)
    problem = Problem("half-line", 0, "test", [Coordinate(x, lo, hi, "parameter", "x")], core, [], False, core, [], {},
                      0, 0, {}, "test", [])
    outcome = bnb.branch_and_bound(problem, 10**7)
    assert outcome.status == "proved", outcome.reason
    tokens = bnb.decode(outcome.tree.encode(), 10**8)
    assert sum(t.startswith("S") for t in tokens) >= 2  # the half-line, then a finite box of it
    ok, why, _ = bnb.replay(problem, tokens)
    assert ok, why


def test_an_alternative_whose_branch_and_bound_fails_leaves_its_group_to_the_others(monkeypatch: Any) -> None:
    """A group is closed by any one of its alternatives: the branch and bound failing on one (an error, counted as not
    closed) goes on to the next. ``alpha_max <= e^(2a/T) / (e^(2a/T) + L - 1)``: its groups pair the undivided core
    (tried first, which proves it) with the quotient; the first alternative of every group is made to fail here, so
    each group goes on to its quotient, and the statement is then not proved (the quotient hides the monotonicity)."""
    st = api.statement("alpha_max <= exp(2*a/T)/(exp(2*a/T) + L - 1)", hypotheses=["softmax", "logits-bounded"],
                       defaults={"a": "logit_absmax"}, id="max").statements[0]
    real, calls = prover.branch_and_bound, []

    def first_fails(problem: Any, *args: Any, **kwargs: Any) -> Any:
        key = (problem.pattern, len(problem.coordinates))  # the alternatives of a group share both
        calls.append((key, problem.unsigned is not None))
        if [k for k, _ in calls].count(key) == 1:
            raise ValueError("the first alternative of its group fails")
        return real(problem, *args, **kwargs)

    monkeypatch.setattr(prover, "branch_and_bound", first_fails)
    result = prover.prove(st, work=prover.work_for(1.0))
    assert result.status in ("proved", "open"), result.reason
    groups = {k for k, _ in calls}
    assert len(groups) >= 2, calls  # more than one group was tried: a failure did not end the search
    for key in groups:  # each failed alternative (the undivided core) was followed by its group's quotient
        assert [q for k, q in calls if k == key] == [False, True], calls
    monkeypatch.undo()
    assert prover.prove(st, work=prover.work_for(1.0)).status == "proved"  # unpatched: the undivided core proves it


@pytest.mark.parametrize("error", [prover.Declined("no relaxation now"), ValueError("cannot be built")],
                         ids=["declined", "error"])
def test_a_replay_goes_on_to_the_stronger_statement_when_the_statement_has_no_relaxation(monkeypatch: Any,
                                                                                         error: Exception) -> None:
    """A proof made through the stronger statement (without logits-bounded, which the relation does not read) replays
    through it even when the statement itself cannot be relaxed (declined, or an error building it): the replay tries
    each in turn, and says why the first failed only when both do."""
    st = api.statement("J_row <= 0.3542/T", hypotheses=["softmax", "logits-bounded"], fixed={"a": 1.0},
                       id="row").statements[0]
    result = prover.prove(st, work=prover.work_for(0.5))
    assert result.status == "proved" and "stronger statement" in result.reason, result.reason
    certificate = json.loads(json.dumps(result.to_json()))
    real = prover.relax

    def fails_on_the_statement(statement: Any, **kwargs: Any) -> Any:
        if statement is st:
            raise error
        return real(statement, **kwargs)

    monkeypatch.setattr(prover, "relax", fails_on_the_statement)
    ok, why = prover.replay(st, certificate)
    assert ok and "stronger statement" in why, why


@pytest.mark.parametrize("limit, at_limit, beyond", [
    (1, "alpha_max <= 1", "alpha_max + alpha_min <= 2"),
    (2, "alpha_max + alpha_min <= 1", "alpha_max - alpha_min + alpha_i <= 2"),
    (2, "J_entry <= 1", "J_entry + alpha_max <= 2"),
    (3, "alpha_max + alpha_min + alpha_i <= 3", "alpha_max + alpha_min + J_entry <= 3"),
])
def test_the_limit_on_distinguished_tokens_is_inclusive(monkeypatch: pytest.MonkeyPatch, limit: int, at_limit: str,
                                                        beyond: str) -> None:
    """With the limit lowered (the statements stay small), ``limit`` distinguished tokens are relaxed and ``limit + 1``
    are declined, the reason naming both numbers."""
    from attnbounds.theory.deciding.prover.space import Declined

    relax_module = importlib.import_module("attnbounds.theory.deciding.prover.relax")  # the package names its function

    monkeypatch.setattr(relax_module, "MAX_ROLES", limit)
    kept = relax_module.relax(api.statement(at_limit, hypotheses=["softmax"], id="roles").statements[0])
    assert max(sum(c.kind == "role" for c in p.coordinates) for p in kept.problems) == limit
    with pytest.raises(Declined, match=rf"^{limit + 1} distinguished tokens \(at most {limit}\)$"):
        relax_module.relax(api.statement(beyond, hypotheses=["softmax"], id="roles").statements[0])


@pytest.mark.parametrize("sign, status", [("+", "proved"), ("-", "refuted")])
def test_a_parameter_both_the_statement_and_its_normaliser_read_is_one_coordinate(sign: str, status: str) -> None:
    """F = exp(M l / T) with the statement reading M too (and eps, sorted after it): one coordinate M over its domain
    serves log F and the relation, every other parameter keeps its own (alpha_max <= e^(2Ma/T) / (e^(2Ma/T) + L - 1)
    is attained, so the bound loosened by eps/10 holds and the one tightened by eps/10 does not)."""
    from attnbounds.theory.deciding.certify import certify
    from attnbounds.theory.mathematics.normalisers import constructors_added
    user = api.statement(f"alpha_max <= exp(2*M*a/T)/(exp(2*M*a/T) + L - 1) {sign} eps/10", id=f"both-read{sign}",
                         normaliser={"name": "mexp", "log_F": "M*l/T", "params": {"M": 2.0}},
                         hypotheses=["logits-bounded"], fixed={"a": 1.0}, ranges={"eps": [0.001, 1.0], "T": [0.5, 2]})
    with constructors_added(user.normalisers):
        st = user.statements[0]
        result = prover.prove(st, work=prover.work_for(2.0))
        assert result.status == status, result.reason
        if status == "proved":
            assert prover.replay(st, json.loads(json.dumps(result.to_json())))[0]
        else:
            assert certify(st, result.counterexample).status == "violated"


def test_a_false_bound_reading_the_largest_absolute_logit_is_relaxed_through_the_logit_model() -> None:
    """``logit_absmax`` over bounded logits is a role that dominates every token's ``l^2``: the relaxation reads it
    at the token of the largest |l| (a constraint, not a free token). A false bound on it (two logits 1 and -1 at
    T = 1/2 give alpha_max = 0.98 > 1.01 / 2) is relaxed, never proved, and refuted only with an instance that
    certifies violated."""
    from attnbounds.theory.deciding.certify import certify

    st = api.statement("alpha_max <= (1 + logit_absmax/100)/L", hypotheses=["softmax", "logits-bounded"],
                       fixed={"a": 1.0}, ranges={"T": [0.5, 2.0]}).statements[0]
    result = prover.prove(st, work=prover.work_for(1.0))
    assert result.status in ("open", "refuted"), result.reason
    if result.status == "refuted":
        assert certify(st, result.counterexample).status == "violated"
    relaxation = prover.relax(st)
    constraints = [c for groups in relaxation.strategies[0] for g in groups for p in g.alternatives
                   for c in p.constraints]
    assert constraints  # the role's dominance over the other tokens


def test_a_bound_tight_where_the_lightest_and_heaviest_token_are_one_is_proved_for_every_F() -> None:
    """``alpha_max + (L - 1) alpha_min <= 1`` over every positive F: in the pattern where one token is both the
    lightest and the heaviest, every token's log F equals it (the bracket between the extremes has width 0) and the
    margin is exactly 0; a bracket of any other width there puts tokens outside the extremes and loses the proof."""
    st = api.statement("alpha_max + alpha_min*(L - 1) <= 1", hypotheses=["F-positive"]).statements[0]
    result = prover.prove(st, work=prover.work_for(2.0))
    assert result.status == "proved", result.reason
    assert prover.replay(st, json.loads(json.dumps(result.to_json())))[0]


@pytest.mark.parametrize("relation, read", [("alpha_max >= alpha_i", True), ("alpha_min <= alpha_i", True),
                                            ("alpha_i*2 >= alpha_max", False), ("alpha_max <= 3*alpha_i", False),
                                            ("alpha_min >= alpha_i/3", False)])
def test_the_relaxation_offers_a_maximum_read_at_another_token_exactly_where_the_margin_grows_with_it(
        relation: str, read: bool) -> None:
    """The strategy that reads ``alpha_max`` (``alpha_min``) at another distinguished token is offered where the
    margin grows (falls) with it, and only there (the first strategy; the exact one stays last)."""
    from attnbounds.theory.deciding.prover.relax import relax

    st = api.statement(relation, hypotheses=["softmax"], id="favourable").statements[0]
    patterns = [g.pattern for per in relax(st).strategies for strat in per for g in strat]
    assert any("maxima read at a distinguished token" in p for p in patterns) == read, patterns


@pytest.mark.parametrize("relation, truth", [
    ("alpha_max <= 3*alpha_i", False),  # e^(2a/T) = e^2 > 3: two logits 1 and -1, token i the lighter
    ("alpha_i*3 >= alpha_max", False),
    ("alpha_max <= 3*alpha_min", False),
    ("alpha_min*3 >= alpha_i", False),  # alpha_min read at token i would give 3 alpha_i >= alpha_i
    ("alpha_max >= alpha_i", True),  # alpha_max read at token i: the margin 0
    ("alpha_min <= alpha_i", True),
    ("alpha_max <= 8*alpha_min", True),  # e^2 = 7.389 < 8: one total for both weights (the common-reference twin)
    ("alpha_min >= alpha_max/7.5", True),
    ("alpha_i <= 8*alpha_min", True),
    ("alpha_max <= 7.38*alpha_min", False),  # just below e^2
])
def test_a_maximum_is_read_at_another_token_only_where_the_margin_grows_with_it(relation: str, truth: bool) -> None:
    """Reading ``alpha_max`` at another distinguished token (token ``i``) lowers it, so the relaxation may do so only
    where the margin grows with ``alpha_max`` (``alpha_min`` only where it falls with it): then a proof with it
    proves the statement, and a bound that the maximum makes false is never proved. With ``|l| <= 1`` and ``T = 1``
    softmax's ``alpha_max / alpha_i`` reaches ``e^2`` (one logit 1, the others -1): 3 is never proved (refuted with
    a certified counterexample, or left open); ``alpha_max >= alpha_i`` is proved through that reading. Ratios of two
    weights (``alpha_max <= 8*alpha_min``) are proved through the common-reference twin: every weight over one
    token's F, so that the margin has one total to divide out and its core is ``8 - F(l_max)/F(l_min)``; until this
    stop each weight had its own total and the branch and bound never closed the box of two distinct tokens."""
    from attnbounds.theory.deciding.certify import certify

    st = api.statement(relation, hypotheses=["softmax", "logits-bounded"], fixed={"a": 1.0, "T": 1.0}).statements[0]
    result = prover.prove(st, work=prover.work_for(1.0))
    assert (result.status == "proved") == truth, result.reason
    if result.status == "refuted":
        assert certify(st, result.counterexample).status == "violated"


def _alternatives(relation: str) -> list[Any]:
    st = api.statement(relation, hypotheses=["softmax", "logits-bounded"], fixed={"a": 1.0, "T": 1.0}).statements[0]
    return [p for per in prover.relax(st).strategies for groups in per for g in groups for p in g.alternatives]


def test_only_a_margin_reading_two_weights_has_a_common_reference_twin() -> None:
    """The twin with every weight over one token's F is built where the margin reads the weights of two tokens or
    more (and tried first on a small share of the work): a single weight has it already."""
    single = _alternatives("alpha_max <= 1/2")
    assert single and not any(p.realisation["common_reference"] for p in single)
    pair = _alternatives("alpha_max <= 8*alpha_min")
    twins = [p for p in pair if p.realisation["common_reference"]]
    assert twins and all(p.realisation["weighted"] >= 2 for p in twins)
    distinct = [p for p in twins if "r1" in p.pattern]  # the maximum and the minimum on two tokens
    # one total divides out: some twin's core reads the two tokens alone, not the others' distribution (w_0, ...)
    assert any("w_0" not in str(p.core) for p in distinct), [str(p.core) for p in distinct]


@pytest.mark.parametrize("strict", [False, True])
def test_an_equality_along_a_constraints_boundary_for_every_length_is_proved_by_eliminating_a_coordinate(
        strict: bool) -> None:
    """alpha_max alpha_min <= 1/(4 (L - 1)) (L >= 2): alpha_min <= (1 - alpha_max)/(L - 1), and alpha_max (1 - alpha_max)
    <= 1/4, so equality holds at alpha_max = 1/2 with the others equal, for every L: on a curve of the relaxed space,
    along the boundary of the constraint that alpha_min is the least weight, where no constant multiplier closes a box.
    Eliminating alpha_min's share through that constraint (and, where max and min are one token, substituting the
    weight the two opposite constraints fix) leaves cores >= 0 with their zeros at the equality: proved, and the tree
    replays; the strict bound, false at that equality, is never proved."""
    from attnbounds.theory.deciding.prover.relax import eliminated, relax

    st = api.statement(f"alpha_max*alpha_min {'<' if strict else '<='} 1/(4*(L - 1))", hypotheses=["softmax"],
                       ranges={"L": [2, 10**9]}, id="product").statements[0]
    result = prover._prove(st, work=prover.work_for(2.0))  # the statement's own relaxation (no stronger statement)
    if strict:
        assert result.status != "proved", result.reason
        return
    assert result.status == "proved", result.reason
    texts = [s for r in result.reports for s in r.problem.stripped]
    assert any("eliminated through constraint" in s for s in texts), texts
    assert any("and its negation" in s for s in texts), texts
    assert all(not r.problem.exact for r in result.reports if any("eliminated" in s for s in r.problem.stripped))
    assert prover.replay(st, json.loads(json.dumps(result.to_json())))[0]
    assert any(eliminated(p) for p in relax(st).problems)


def test_a_parameter_the_core_does_not_read_is_realised_inside_its_range() -> None:
    """J_entry < 0.25/T over T in [0.3, 0.7]: T scales out of the core, whose zero (two tokens of weight 1/2) is an
    equality of the strict bound at every T; the instance is realised with T inside its range (not at T = 1, outside
    it, where no hypothesis holds), and refuted exactly."""
    from attnbounds.theory.deciding.certify import certify

    st = api.statement("J_entry < 0.25/T", hypotheses=["softmax"], ranges={"T": [0.3, 0.7]}, id="quarter").statements[0]
    result = prover.prove(st, work=prover.work_for(1.0))
    assert result.status == "refuted", result.reason
    assert 0.3 <= float(result.counterexample.param("T")[0]) <= 0.7
    assert certify(st, result.counterexample).status == "violated"


@pytest.mark.parametrize("normaliser", ["sparsemax", "entmax15", "relu"])
@pytest.mark.parametrize("relation, true", [
    ("alpha_max >= 1/L", True), ("alpha_max > 1/L", False),   # equal logits: every weight 1/L
    ("alpha_min >= 0", True), ("alpha_min > 0", False),       # a weight exactly 0 (a logit far below the others)
    ("alpha_max <= 1", True), ("L*alpha_min <= 1", True), ("L*alpha_min < 1", False),
])
def test_a_map_reaching_the_whole_simplex_relaxes_as_the_simplex(normaliser: str, relation: str, true: bool) -> None:
    """Sparsemax, entmax-1.5 and the normalised relu reach every point of the closed simplex over unbounded logits
    (sparsemax(p) = p, entmax15(2 sqrt(p)) = p, relu(p) / sum relu(p) = p), weights 0 included: a bound on the weights alone is one over the simplex, which the
    every-F model relaxes (its closure holds the zeros). The true bounds are proved and replay; the false ones, each
    false at a point of the simplex (a tie, a zero weight), are never proved."""
    st = api.statement(relation, normaliser=normaliser, id=f"simplex.{normaliser}").statements[0]
    result = prover.prove(st, work=prover.work_for(1.0))
    if true:
        assert result.status == "proved", result.reason
        assert prover.replay(st, json.loads(json.dumps(result.to_json())))[0]
    else:
        assert result.status != "proved", result.reason


def test_a_map_reaching_the_simplex_is_read_over_the_bounded_simplex_where_its_logits_are_bounded() -> None:
    """With |l| <= a sparsemax's weights are not the whole simplex (at T = 1 and a = 1/10, alpha_max - alpha_min <=
    2a/T, an equality at two logits +-a): they are the bounded simplex, where that bound is PROVED and one below it
    never is; a map with no threshold form (the normalised relu) is declined, not read over the whole simplex (where
    the bound would be false)."""
    from attnbounds.theory.deciding.prover.relax import relax
    from attnbounds.theory.deciding.prover.space import Declined

    def statement(relation: str, normaliser: str):
        return api.statement(relation, normaliser=normaliser, hypotheses=["logits-bounded"],
                             fixed={"a": 0.1, "T": 1.0}, id="bounded").statements[0]

    assert prover.prove(statement("alpha_max - alpha_min <= 2*a/T", "sparsemax"),
                        work=prover.work_for(4.0)).status == "proved"
    assert prover.prove(statement("alpha_max - alpha_min <= 2*a/T - 1/100", "sparsemax"),
                        work=prover.work_for(1.0)).status != "proved"
    relu = statement("alpha_max - alpha_min <= 2*a/T", "relu")
    with pytest.raises(Declined, match="only over unbounded logits"):
        relax(relu)
    assert prover.prove(relu, work=prover.work_for(0.5)).status != "proved"


@pytest.mark.parametrize("relation, true", [("alpha_max*alpha_min <= 1/(4*(L - 1))", True),
                                            ("alpha_max*alpha_min < 1/(4*(L - 1))", False),
                                            ("abar_N >= N/L", True), ("abar_N > N/L", False)])
@pytest.mark.parametrize("hypotheses", [["softmax"], ["softmax", "logits-bounded"]])
def test_a_bound_on_the_weights_alone_is_proved_over_every_positive_F(relation: str, true: bool,
                                                                     hypotheses: list[str]) -> None:
    """A relation reading the weights alone, under softmax (logits bounded or not, a not read): every instance is one
    of every positive F (its weights a point of the open simplex), so the statement over every F, which the
    log-F-values model relaxes with fewer coordinates, is tried first; its proof is the statement's, and replays.
    The strict twins, false at equal logits (a softmax instance at any a), are never proved."""
    extra = {"fixed": {"a": 1.0}} if "logits-bounded" in hypotheses else {}
    top = ["top-N"] if "abar_N" in relation else []
    st = api.statement(relation, hypotheses=hypotheses + top, ranges={"L": [2, 10**9]}, id="weights",
                       **extra).statements[0]
    over_F = prover._over_the_simplex(st)
    assert over_F is not None and any(s is over_F or s == over_F for s, _ in prover._stronger(st))
    assert [h.id for h in over_F.hypotheses if h.id in ("softmax", "logits-bounded")] == []
    alone = prover._prove(over_F, work=prover.work_for(2.0))
    result = prover.prove(st, work=prover.work_for(2.0))
    if not true:
        assert alone.status != "proved" and result.status != "proved", (alone.reason, result.reason)
        return
    assert alone.status == "proved", alone.reason
    assert result.status == "proved", result.reason
    assert prover.replay(st, json.loads(json.dumps(result.to_json())))[0]
    assert prover.replay(st, json.loads(json.dumps(alone.to_json())))[0]  # a proof over every F is the statement's


def test_a_bound_reading_more_than_the_weights_has_no_stronger_statement_over_every_F() -> None:
    """J_row reads the slopes of log F, alpha_max <= 1/(1 + (L - 1) e^(-2a/T)) reads a: neither is a statement on the
    weights alone, so neither is tried over every positive F (where both would be false)."""
    for relation in ("J_row <= 1/(2*T)", "alpha_max <= 1/(1 + (L - 1)*exp(-2*a/T))"):
        st = api.statement(relation, hypotheses=["softmax", "logits-bounded"], id="more", fixed={"a": 1.0}).statements[0]
        assert prover._over_the_simplex(st) is None


@pytest.mark.parametrize("relation, proved", [("alpha_max <= (1 + logit_absmax)*3/(2*L + 1)", True),
                                              ("alpha_max <= (1 + logit_absmax)*3/(2*L + 2)", False)])
def test_an_absolute_value_of_a_compactified_logit_is_no_kink_to_split_at(relation: str, proved: bool) -> None:
    """``|l| = |log(s / (1 - s))|`` under a normaliser with unbounded logits (F = 2 + sigmoid(l), in (2, 3), so
    alpha_max < 3/(2L + 1)): the kink search factored its argument as a polynomial and raised sympy's PolynomialError,
    so the prover crashed; it is no affine factor, and the bound is proved (its twin, false at L = 1, is not)."""
    spec = {"normaliser": {"name": "bsig", "log_F": "log(2 + sigmoid(l/T))"}}
    user = api.statement(relation, id="absmax.compact", **spec)
    with attnbounds.theory.mathematics.normalisers.constructors_added(user.normalisers):
        result = prover.prove(user.statements[0], work=prover.work_for(2.0))
    assert (result.status == "proved") == proved, result.reason


@pytest.mark.parametrize("relation, proved", [
    ("coverage_enum <= 0.999", True),    # 1 - (1 - p)^3 rises with p: 999/1000 at p = 9/10, an equality
    ("coverage_enum >= 0.875", True),    # 7/8 at p = 1/2
    ("coverage_enum < 0.999", False),    # the equality at p = 9/10
    ("coverage_enum <= 0.998", False),   # false near p = 9/10
    ("coverage_enum >= 1 - (1 - p)**3", True),  # the enumeration is the closed form, for every p
])
def test_a_bound_on_the_coverage_of_a_fixed_number_of_heads_is_decided_over_a_range_of_p(relation: str,
                                                                                         proved: bool) -> None:
    """coverage_enum for a fixed whole H is a polynomial in p (the outcomes grouped by how many heads cover): bounds on
    it over a range of p are proved, their false twins never; over a range of H the relaxation is one per whole H."""
    from attnbounds.theory.deciding.prover.relax import relax

    st = api.statement(relation, hypotheses=["independent-heads"], id="heads", fixed={"H": 3},
                       ranges={"p": [0.5, 0.9]}).statements[0]
    result = prover.prove(st, work=prover.work_for(1.0))
    assert (result.status == "proved") == proved, (relation, result.status, result.reason)
    ranged = api.statement(relation, hypotheses=["independent-heads"], id="heads", ranges={"p": [0.5, 0.9], "H": [1, 5]})
    groups = [g.pattern for per in relax(ranged.statements[0]).strategies for strat in per for g in strat]
    assert sorted({g.split(":")[0] for g in groups}) == [f"H = {h}" for h in range(1, 6)], groups


@pytest.mark.parametrize("relation, proved", [
    ("(coverage_enum <= 1 - (1 - p)**H) & (1 - (1 - p)**H <= coverage_enum)", True),  # the multihead reading itself
    ("coverage_enum >= 1 - (1 - p)**(H + 1)", False),                             # false for every p in (0, 1)
    ("coverage_enum <= 1 - (1 - p)**H + (20 - H) - p*(1 - p)/100", False),        # false only at H = 20, the last
    ("coverage_enum <= 1 - (1 - p)**H + (H - 1) - p*(1 - p)/100", False),         # false only at H = 1, the first
])
def test_a_range_of_heads_is_one_relaxation_per_whole_number_of_heads(relation: str, proved: bool) -> None:
    """Over the domain of H (a whole number in [1, 20]) the relaxation is the union of one per H: the multihead
    reading is proved (each H's enumeration is the closed form), and bounds false only at the first or the last H are
    not; the certificate replays."""
    from attnbounds.theory.mathematics import registry

    base = registry.get("multihead")
    st = api.statement(relation, hypotheses=[h.id for h in base.hypotheses], id="heads").statements[0]
    result = prover.prove(st, work=prover.work_for(2.0))
    assert (result.status == "proved") == proved, (relation, result.status, result.reason)
    if proved:
        assert prover.replay(st, json.loads(json.dumps(result.to_json())))[0]


@pytest.mark.parametrize("relation", ["alpha_max + (L - 1)*alpha_min <= 1", "alpha_max < 1.5", "alpha_min <= 1/L",
                                      "coverage_enum + alpha_max <= 2"])
def test_a_statement_reading_weights_with_no_map_fixed_is_declined_not_proved_for_one_model(relation: str) -> None:
    """Only a statement whose quantities read no token (coverage of heads) may stand on a placeholder model of the
    tokens: one reading the weights with no hypothesis on the map ranges over every map (sigmoid attention's weights
    do not sum to 1, so the first is false), and is declined. A first version let every quantity needing nothing
    special (alpha_max) through, and proved the first for softmax."""
    st = api.statement(relation, hypotheses=["independent-heads"] if "coverage" in relation else [],
                       id="nomap", fixed={"H": 2, "p": 0.5} if "coverage" in relation else {}).statements[0]
    result = prover.prove(st, work=prover.work_for(1.0))
    assert result.status == "declined" and "no normaliser" in result.reason, (result.status, result.reason)
