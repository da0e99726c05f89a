"""The counterexample search: reproducible, finds known-false readings, stays quiet on true ones.

Budgets are small (about a second per search); the verdicts come from the mathematics, not from
this file: the false readings below are false for reasons written in the test names (each is
also certified when ``theory.certify`` is available), and the true ones have proofs.
"""

import dataclasses

import numpy as np
import pytest
import sympy as sp

from attnbounds.theory.mathematics import registry
from attnbounds.theory.mathematics.families import cost
from attnbounds.theory.mathematics.errors import AttnBoundsError
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.normalisers import softmax
from attnbounds.theory.deciding.search import DEFAULT_BUDGET_S, SearchResult, search
from attnbounds.theory.deciding.margins import REAL, relative_margin, relative_margins
from attnbounds.theory.deciding.search import budget, torch_eval
from attnbounds.theory.deciding.search.shrink import round_sig
from attnbounds.theory.deciding.search.tracker import KEEP, Tracker, instance_key
from tests.planted import scaled

pytest.importorskip("torch")

FALSE = {
    # softmax at L = 2 with equal logits has ||J||_2 = ||J||_F = 1/(2T) > 1/(4T)
    "corollary3[spectral]": 1.0,
    # another key can be much longer than the i-th one
    "corollary1[delta=own-key]": 1.0,
    # the '- (1 - abar_N)' term is not homogeneous in x: scaling x down breaks it
    "theorem1.fixed[R1,g2]": 1.0,
}
TRUE = ["theorem1.fixed[R1,g1]", "corollary1[delta=max-key]", "corollary3[entry,corrected]"]


@pytest.fixture(scope="module")
def results():
    cache = {}

    def get(sid, budget_s=1.0, seed=0):
        key = (sid, budget_s, seed)
        if key not in cache:
            cache[key] = search(sid, budget_s=budget_s, seed=seed)
        return cache[key]

    return get


def _signature(res: SearchResult):
    methods = {m: {k: v for k, v in d.items() if k not in ("seconds", "first_violation_s")}
               for m, d in res.by_method.items()}
    return (res.tried, res.best_margin, res.best_ratio, [instance_key(v) for v in res.violations],
            None if res.best is None else instance_key(res.best), methods, res.violation_margins)


@pytest.mark.parametrize("sid", ["theorem1.fixed[R1,g2]", "corollary3[frobenius,corrected]"])
def test_same_seed_same_result(results, sid):
    assert _signature(results(sid)) == _signature(search(sid, budget_s=1.0, seed=0))


def test_different_seeds_search_differently(results):
    a, b = results("corollary3[frobenius,corrected]"), results("corollary3[frobenius,corrected]", seed=1)
    assert instance_key(a.best) != instance_key(b.best) or a.by_method != b.by_method


@pytest.mark.parametrize("sid", sorted(FALSE))
def test_known_false_readings_are_found_violated(results, sid):
    res = results(sid)
    assert res.violations, f"{sid}: no violation found in {res.tried} instances"
    assert res.violation_margins[0] < -0.1
    assert res.violation_margins == sorted(res.violation_margins)
    assert len(res.violations) <= KEEP
    assert all(v.B == 1 for v in res.violations)
    st = registry.get(sid)
    for v in res.violations[:3]:
        assert st.evaluate(v).violated[0]


@pytest.mark.parametrize("sid", sorted(FALSE))
def test_minimal_counterexample_is_small_and_certified(results, sid):
    res = results(sid)
    m = res.minimal
    assert m is not None and m.B == 1 and m.L <= 3
    assert registry.get(sid).evaluate(m).violated[0]
    certify = pytest.importorskip("attnbounds.theory.deciding.certify").certify
    assert certify(registry.get(sid), m).status == "violated"


@pytest.mark.parametrize("sid", TRUE)
def test_true_readings_give_no_real_candidate(results, sid):
    res = results(sid)
    assert res.tried >= 1000
    assert not [r for r in res.violation_margins if r < -REAL], res.violation_margins[:3]
    assert res.best is not None and res.best_margin >= -REAL
    assert res.minimal is None


def test_tightness_equality_of_theorem1_fixed_g1_is_reached(results):
    # equality when every x_i is the same vector (d_1 = 0): the search must get there
    res = results("theorem1.fixed[R1,g1]")
    assert abs(res.best_margin) < 1e-9


def test_scaled_mutant_keeps_everything_but_the_relation():
    st = registry.get("lemma1")
    m = scaled(st, 0.97)
    assert m.id == "lemma1{rhs*0.97}" and m.hypotheses == st.hypotheses and m.bindings == st.bindings
    assert len(m.relation.args) == 2 and all(isinstance(c, sp.LessThan) for c in m.relation.args)
    with pytest.raises(AttnBoundsError, match="factor"):
        scaled(st, 0)


def test_result_fields_and_methods(results):
    res = results("corollary3[spectral]")
    assert dataclasses.is_dataclass(res) and res.statement_id == "corollary3[spectral]"
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.tried = 0
    assert res.seed == 0 and res.budget_s == 1.0 and res.wall_s > 0
    assert {"random", "gradient", "targeted", "shrink"} <= set(res.by_method)
    for info in res.by_method.values():
        assert {"tried", "applicable", "best_margin", "best_ratio", "seconds"} <= set(info)
    assert res.tried == sum(info["tried"] for info in res.by_method.values())


def test_tightest_instance_per_octave_of_L(results):
    """``by_L``: one row [L, ratio, relative margin] per octave of L, inside the method's L range, the method's best
    among them, and the same rows when the work is split in pieces and merged in order."""
    res = results("theorem1.fixed[R1,g2]")
    for method, info in res.by_method.items():
        rows = info.get("by_L", [])
        if not info.get("applicable"):
            continue
        assert rows, method
        octaves = [int(L).bit_length() for L, _, _ in rows]
        assert octaves == sorted(set(octaves)), (method, rows)
        lo, hi = info["L_range"]
        assert all(lo <= L <= hi for L, _, _ in rows)
        assert min(rel for _, _, rel in rows) == info["best_margin"]
    whole, first, second = Tracker(registry.get("lemma1")), Tracker(registry.get("lemma1")), Tracker(registry.get("lemma1"))
    batches = [Instance.from_logits(np.random.default_rng(k).normal(size=(4, L)), softmax(1.0)) for k, L in
               enumerate([2, 3, 5, 9, 17, 3, 6])]
    for k, inst in enumerate(batches):
        whole.evaluate(inst, "random")
        (first if k < 4 else second).evaluate(inst, "random")
    first.merge(second)
    assert first.stats["random"].to_dict()["by_L"] == whole.stats["random"].to_dict()["by_L"]
    assert [int(L).bit_length() for L, _, _ in whole.stats["random"].to_dict()["by_L"]] == [2, 3, 4, 5]


@pytest.mark.parametrize("bad, match", [({"budget_s": 0}, "budget_s"), ({"budget_s": float("nan")}, "budget_s"),
                                        ({"budget_s": 1e308}, "at most a day"), ({"budget_s": 86400.5}, "at most a day"),
                                        ({"seed": -1}, "seed"), ({"seed": 1.5}, "seed")])
def test_bad_input_raises(bad, match):
    kwargs = {"budget_s": 1.0, "seed": 0, **bad}
    with pytest.raises(AttnBoundsError, match=match):
        search("lemma1", **kwargs)
    with pytest.raises(AttnBoundsError, match="unknown statement"):
        search("no-such-reading", budget_s=1.0, seed=0)


def test_budget_buys_a_fixed_amount_of_work_proportional_to_seconds():
    st = registry.get("theorem1.fixed[R1,g1]")
    small, big = budget.plan(st, 1.0, gradient=True), budget.plan(st, 10.0, gradient=True)
    assert small == budget.plan(st, 1.0, gradient=True)
    assert big.random_batches == pytest.approx(10 * small.random_batches, rel=0.1)
    assert budget.plan(st, 1.0, gradient=False).gradient_starts == 0
    assert cost(registry.get("theorem2.lower[full]")).name == "sphere"
    assert cost(registry.get("corollary2.i[R1]")).name == "subsets"
    assert cost(registry.get("corollary3[spectral]")).name == "softmax-jacobian"  # softmax: closed forms
    assert cost(registry.get("lemma2[two-term]")).name == "jacobian"
    assert DEFAULT_BUDGET_S > 0


def test_relative_margin_reads_rounding_at_equality_as_zero():
    # N = L: dtilde = 0 and the bound (1 - abar) d_1 + M (abar (L - N) - (1 - abar)) is 0 up to rounding
    st = registry.get("theorem1.fixed[R1,g1]")
    logits = np.array([[0.3, -1.2, 2.0]])
    inst = Instance.from_logits(logits, softmax(0.7), x=np.ones((1, 3, 2)), N=3)
    ev = st.evaluate(inst)
    assert abs(relative_margins(st, inst, ev)[0]) < 1e-15
    # a real violation reads as a large negative relative margin
    g2 = registry.get("theorem1.fixed[R1,g2]")
    small = Instance.from_logits(np.zeros((1, 2)), softmax(1.0), x=np.full((1, 2, 1), 1e-3), N=1)
    assert relative_margins(g2, small, g2.evaluate(small))[0] < -0.1


def test_round_sig():
    assert round_sig(0.012345, 2) == pytest.approx(0.012)
    assert round_sig(-987.6, 1) == -1000.0
    np.testing.assert_array_equal(round_sig(np.array([0.0, 1.26, -0.0049]), 2), [0.0, 1.3, -0.0049])


@pytest.mark.parametrize("sid", ["theorem1.fixed[R1,g1]", "theorem1.fixed[R2,g2,corrected]", "corollary1[delta=max-key]",
                                 "lemma1", "lemma2[sharp]", "corollary3[spectral,corrected]", "corollary3[fd]",
                                 "theorem1.random[R1,scaled,weighted,gap-bound]", "corollary2.i[R2,corrected]"])
def test_torch_evaluator_agrees_with_the_float_evaluator(sid):
    """The gradient search steers with a torch copy of the evaluator; it must compute the same gap."""
    import torch

    from attnbounds.theory.deciding.search import gradient, random_search

    st = registry.get(sid)
    assert torch_eval.supports(st)
    pl = budget.plan(st, 1.0, gradient=True)
    rng = np.random.default_rng(7)
    checked = 0
    for _ in range(6):
        spec = random_search.draw_spec(rng, st, dataclasses.replace(pl, batch=8, max_L=6))
        inst = random_search.build_batch(st, spec.with_(T=1.0 if spec.T < 1e-2 else spec.T, logit_scale=1.0),
                                         Tracker(st), "random")
        if inst is None:
            continue
        ev = st.evaluate(inst)
        if not ev.applicable.any():
            continue
        prob = gradient._Problem(st, inst)
        with torch.no_grad():
            g = torch_eval.gap(st, prob.state()).numpy()
        prepared = st.prepare(inst)
        expected = np.full(inst.B, -np.inf)
        for lhs, rhs, cols in st.sides(st.env(prepared, "mid"), prepared):
            g_float = -relative_margin(lhs, rhs)
            if cols is not None:
                g_float = np.where(cols, g_float, -np.inf)
            expected = np.maximum(expected, g_float.max(-1))
        ok = ev.applicable & np.isfinite(expected) & (np.abs(ev.lhs) + np.abs(ev.rhs) > 1e-12)
        np.testing.assert_allclose(g[ok], expected[ok], atol=1e-7)
        checked += int(ok.sum())
    assert checked > 0


def test_gradient_phase_is_cut_to_a_quarter_only_once_a_clear_violation_is_in_hand(results):
    """A false reading whose random phase already violates by more than CLEAR_VIOLATION: the ascent runs
    ceil(pieces / VIOLATED_SHARE) pieces and says so; a true reading keeps every planned start."""
    from attnbounds.theory.deciding.search import core

    false, true = results("theorem1.fixed[R1,g2]"), results("corollary3[frobenius,corrected]")
    cut = false.by_method["gradient"].get("stopped", "")
    assert "the random phase had found a violation by more than 0.001" in cut, false.by_method["gradient"]
    kept, planned = (int(w) for w in cut.split(" pieces")[0].split(" of "))
    assert 1 <= kept == -(-planned // core.VIOLATED_SHARE) < planned
    assert "stopped" not in true.by_method["gradient"]
    assert true.by_method["gradient"]["tried"] > false.by_method["gradient"]["tried"]


def test_the_most_extreme_tie_is_kept_whichever_piece_saw_it():
    """A float margin of exactly 0 (sides not both 0) hides its sign where float saturates: the tracker keeps the tie
    at the largest |l| / T, and merging pieces keeps the more extreme one; an instance that does not tie is never
    kept. ``alpha_max <= 1`` under softmax ties at L = 1 whatever the logit, and holds strictly at unequal logits."""
    from attnbounds.theory.running import api

    st = api.statement("alpha_max <= 1", hypotheses=["softmax"], id="tie").statements[0]
    first, second, untied = Tracker(st), Tracker(st), Tracker(st)
    for logit, T in ((3.0, 1.0), (-40.0, 2.0), (7.0, 0.5)):  # |l| / T = 3, 20, 14
        first.evaluate(Instance.from_logits(np.array([[logit]]), softmax(T)), "random")
    assert float(first.extreme_tie.inst.logits[0, 0]) == -40.0
    second.evaluate(Instance.from_logits(np.array([[900.0]]), softmax(30.0)), "random")  # 30
    second.evaluate(Instance.from_logits(np.array([[1.0, 2.0]]), softmax(1.0)), "random")
    first.merge(second)
    assert float(first.extreme_tie.inst.logits[0, 0]) == 900.0
    untied.evaluate(Instance.from_logits(np.array([[1.0, 2.0, 3.0]]), softmax(1.0)), "random")
    assert untied.extreme_tie is None
    untied.evaluate(Instance.from_logits(np.array([[1.0, 2.0, 300.0]]), softmax(1e-3)), "random")  # 1 in float: a tie
    assert float(untied.extreme_tie.inst.logits[0, 2]) == 300.0


def test_the_targeted_phase_starts_at_the_corners_of_the_logit_box():
    """A statement fixing ``a`` has its logit box's corners evaluated before any draw (one logit at +a, the others at
    -a, and the reverse, at the three shortest lengths of its range): sparsemax's largest weight is 3/4 exactly at two
    logits +-1/4, where ``alpha_max <= 0.75`` is tight (ratio 1) and the strict bound fails; a statement without a
    fixed ``a`` has no corners."""
    from attnbounds.theory.deciding.search import targeted
    from attnbounds.theory.running import api

    st = api.statement("alpha_max <= 0.75", normaliser="sparsemax", hypotheses=["logits-bounded"], id="corner",
                       fixed={"T": 1.0, "a": 0.25}, ranges={"L": [2, 1000]}).statements[0]
    tracker = Tracker(st)
    targeted.corners(st, tracker)
    assert tracker.stats["targeted"].tried == 2 * targeted.CORNER_LENGTHS
    assert tracker.best is not None and tracker.best.ratio == 1.0 and tracker.best.inst.L == 2
    assert sorted(np.abs(tracker.best.inst.logits[0]).tolist()) == [0.25, 0.25]
    free = Tracker(registry.get("lemma1"))
    targeted.corners(registry.get("lemma1"), free)
    assert "targeted" not in free.stats
