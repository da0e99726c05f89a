"""A verdict about a user's torch normaliser rests on the function itself (issue 19, item 1).

- With a declared ``log_F``, the function is re-evaluated on a spread over the statement's ranges and on the
  search's candidates and tightest instances; where it disagrees with ``log_F``, the formula is refused for the run
  and the statement is judged as a callable alone (never certified from the formula).
- The function gets copies of its inputs; outputs off the autograd graph are refused for Jacobian statements;
  failures during the search (exceptions, NaN, wrong types, calls over the time limit) are counted, named, and a
  would-be VERIFIED becomes UNDECIDED; wrong output types are refused by name when the function is loaded.

The functions here differ from the issue's examples on purpose (a temperature floor instead of clipped logits,
sharper weights beyond 300 tokens instead of beyond 100, an in-place shift instead of ``logits /= T``, ...).
Every verdict comes from the real search and certifier at small budgets."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

import attnbounds
from attnbounds.theory.mathematics import callables
from attnbounds.theory.running import api
from attnbounds.theory.mathematics.errors import InvalidArgument
from attnbounds.theory.mathematics.normalisers import constructors_added

pytestmark = pytest.mark.usefixtures("restore_family")

FLOOR = dict(hypotheses=["logits-bounded"], defaults={"a": "logit_absmax"})


def floored(logits, T):
    """Softmax whose temperature never goes below 0.05: it agrees with log F = l/T wherever the load check looks."""
    return torch.softmax(logits / torch.clamp(torch.as_tensor(T, dtype=logits.dtype), min=0.05), dim=-1)


def sharper_when_long(logits, T):
    """Softmax, except that rows longer than 300 tokens get softmax(2 l / T)."""
    return torch.softmax((2.0 if logits.shape[-1] > 300 else 1.0) * logits / T, dim=-1)


# -- a declared log_F is held to the function ---------------------------------------------------------------------
def test_a_bound_true_of_the_function_but_false_of_its_log_F_is_not_certified_refuted():
    # Lemma 1's softmax floor with the temperature the function really uses: true of it, false of exp(l/T) at T < 0.05
    r = attnbounds.check("alpha_i*L >= exp(-2*a/Max(T, 0.05))", budget=1,
                         normaliser={"name": "floored", "torch": floored, "log_F": "l/T"}, **FLOOR)
    assert not (r.verdict == "REFUTED" and r.certified), r.reason
    refused = r.data["log_F_refused"]
    assert refused["normaliser"] == "floored" and "disagree" in refused["reason"] and "T = " in refused["reason"]
    assert r.data["certified"] is False and "log_F refused for this run" in r.reason


def test_a_bound_false_of_the_function_but_true_of_its_log_F_is_not_verified():
    # softmax's ceiling exp(2a/T)/L: true of exp(l/T), false of the sharper weights this function gives long rows
    r = attnbounds.check("alpha_i*L <= exp(2*a/T)", budget=1, ranges={"L": [2, 2048]},
                         normaliser={"name": "sharp", "torch": sharper_when_long, "log_F": "l/T"}, **FLOOR)
    assert r.verdict == "REFUTED" and not r.certified, r.reason
    assert "L = " in r.data["log_F_refused"]["reason"]
    assert r.counterexample["L"] > 300 and r.counterexample["float"]["margin"] < 0


def test_a_function_that_agrees_with_its_log_F_is_certified_and_says_what_was_compared():
    def ssmax(logits, T):
        return torch.softmax(0.4 * np.log(logits.shape[-1]) * logits / T, dim=-1)

    r = attnbounds.check("alpha_i*L >= exp(-2*a/T)", budget=1, ranges={"L": [2, 4096]},
                         normaliser={"name": "ssmax_h", "torch": ssmax, "log_F": "s*log(L)*l/T", "params": {"s": 0.4}},
                         **FLOOR)
    assert r.verdict == "REFUTED" and r.certified
    check = r.data["callable_check"]
    assert check["normaliser"] == "ssmax_h" and check["instances"] > 100 and check["longest_L"] >= 4096
    assert "log_F_refused" not in r.data


def test_the_spread_reaches_long_rows_large_logits_and_extreme_temperatures():
    seen = {"L": set(), "T": set(), "absmax": 0.0}

    def recording(logits, T):
        seen["L"].add(logits.shape[-1])
        seen["T"].update(np.atleast_1d(np.asarray(T, dtype=float)).ravel().tolist())
        seen["absmax"] = max(seen["absmax"], float(logits.detach().abs().max()))
        return torch.softmax(logits / T, dim=-1)

    user = api.statement("alpha_i <= 1", normaliser={"name": "rec", "torch": recording, "log_F": "l/T"})
    with constructors_added(user.normalisers):
        callables.Confirmer.of(user.statements[0]).spread(0)
    assert max(seen["L"]) >= 10**5 and 4096 in seen["L"] and 1 in seen["L"]
    assert min(seen["T"]) <= 1e-4 and max(seen["T"]) >= 1e3 and seen["absmax"] >= 999


# -- the function's inputs are its own copies ----------------------------------------------------------------------
def test_in_place_writes_neither_corrupt_the_search_nor_read_as_position_dependence():
    def shifted_in_place(logits, T):
        logits -= logits.max(dim=-1, keepdim=True).values  # a common stabilisation, written in place
        return torch.softmax(logits / T, dim=-1)

    def scaled_in_place(logits, T):
        return torch.softmax(logits.div_(T), dim=-1)

    # Lemma 1's softmax floor holds for both; corrupted logits would have shrunk a = max |l| and "refuted" it
    for fn in (shifted_in_place, scaled_in_place):
        r = attnbounds.check("alpha_i*L >= exp(-2*a/T)", normaliser=fn, budget=0.5, **FLOOR)
        assert r.verdict == "VERIFIED", (fn.__name__, r.reason)


# -- autograd ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("how", ["detach", "no_grad", "numpy"])
def test_outputs_off_the_autograd_graph_are_refused_for_jacobian_statements_only(how):
    def off_graph(logits, T):
        if how == "no_grad":
            with torch.no_grad():
                return torch.softmax(logits / T, dim=-1)
        if how == "numpy":
            z = (logits / T).detach().numpy()
            e = np.exp(z - z.max(-1, keepdims=True))
            return torch.from_numpy(e / e.sum(-1, keepdims=True))
        return torch.softmax(logits / T, dim=-1).detach()

    with pytest.raises(InvalidArgument, match=r"reads J_row, the Jacobian .* by autograd, but its autograd Jacobian "
                                              r"\(largest entry 0\) differs from finite differences"):
        attnbounds.check("J_row <= 1/T", normaliser=off_graph, budget=0.3)
    assert attnbounds.check("alpha_i <= 1", normaliser=off_graph, budget=0.3).verdict == "VERIFIED"


# -- failures during the search ------------------------------------------------------------------------------------
def test_failures_on_part_of_the_range_make_a_verified_undecided_and_are_named():
    def fails_for_odd_long_rows(logits, T):
        if logits.shape[-1] > 50 and logits.shape[-1] % 2:
            raise RuntimeError("odd rows are not supported")
        return torch.softmax(logits / T, dim=-1)

    def nan_at_low_temperature(logits, T):
        w = torch.softmax(logits / T, dim=-1)
        return torch.where(torch.as_tensor(T) < 1e-2, w * float("nan"), w)

    for fn, text in ((fails_for_odd_long_rows, "raised RuntimeError: odd rows are not supported"),
                     (nan_at_low_temperature, "returned non-finite weights")):
        r = attnbounds.check("alpha_i <= 1", normaliser=fn, budget=0.5)
        assert r.verdict == "UNDECIDED", (fn.__name__, r.reason)
        assert "failed" in r.reason and text in r.reason
        failures = sum(i.get("callable_failures", 0) for i in r.data["search"]["by_method"].values())
        assert failures > 0


def test_a_clear_violation_stays_refuted_with_the_failures_named():
    def fails_beyond_64(logits, T):
        if logits.shape[-1] > 64:
            raise ValueError("too long")
        return torch.softmax(logits / T, dim=-1)

    r = attnbounds.check("alpha_max <= 0.9", normaliser=fails_beyond_64, budget=0.5)
    assert r.verdict == "REFUTED" and not r.certified
    assert "raised ValueError: too long" in r.reason


@pytest.mark.parametrize("output, name", [
    (lambda w: w.tolist(), "returned list"),
    (lambda w: w.numpy().astype(np.complex128), "dtype complex128"),
    (lambda w: w.to(torch.float32), "returned torch.float32 weights"),
    (lambda w: (w > 0.1).to(torch.int64), "returned torch.int64 weights"),
    (lambda w: None, "returned NoneType"),
    (lambda w: torch.empty(w.shape, dtype=torch.float64, device="meta"), "device 'meta'"),
    (lambda w: w.to(torch.complex128), "returned complex weights"),
    (lambda w: w[..., :-1] if w.shape[-1] > 1 else w[..., :0], "returned weights of shape"),
])
def test_wrong_output_types_are_refused_by_name_when_loaded(output, name):
    def fn(logits, T):
        return output(torch.softmax(logits / T, dim=-1))

    with pytest.raises(InvalidArgument, match=name.replace("(", r"\(")):
        attnbounds.check("alpha_i <= 1", normaliser=fn, budget=0.3)


def test_a_wrong_type_on_long_rows_only_is_a_failure_of_the_search():
    def float32_when_long(logits, T):
        w = torch.softmax(logits / T, dim=-1)
        return w.to(torch.float32) if logits.shape[-1] > 500 else w

    r = attnbounds.check("alpha_i <= 1", normaliser=float32_when_long, budget=0.5)
    assert r.verdict == "UNDECIDED" and "float32" in r.reason


# -- nothing hangs -------------------------------------------------------------------------------------------------
def test_a_function_that_blocks_is_stopped_by_the_time_limit_and_named(monkeypatch):
    monkeypatch.setattr(callables, "CALL_SECONDS", 0.5)
    calls = {"n": 0}
    never = threading.Event()

    def blocks_after_a_while(logits, T):
        calls["n"] += 1
        if calls["n"] > 60:
            never.wait()  # a lock that is never released
        return torch.softmax(logits / T, dim=-1)

    r = attnbounds.check("alpha_i <= 1", normaliser=blocks_after_a_while, budget=1)
    assert r.verdict == "UNDECIDED" and "time limit of 0.5 s" in r.reason
    never.set()


def test_a_function_that_blocks_when_loaded_is_refused(monkeypatch):
    monkeypatch.setattr(callables, "CALL_SECONDS", 0.3)
    never = threading.Event()
    with pytest.raises(InvalidArgument, match="ran over its time limit of 0.3 s per call"):
        attnbounds.check("alpha_i <= 1", normaliser=lambda lg, T: never.wait() or lg, budget=0.3)
    never.set()


def test_a_declared_function_that_fails_on_part_of_the_range_is_never_verified():
    def fails_when_cold(logits, T):
        if bool((torch.as_tensor(T) < 1e-3).any()):
            raise ArithmeticError("too cold")
        return torch.softmax(logits / T, dim=-1)

    r = attnbounds.check("alpha_i <= 1", budget=0.3, normaliser={"name": "cold", "torch": fails_when_cold, "log_F": "l/T"})
    assert "too cold" in r.data["log_F_refused"]["reason"]
    assert r.verdict == "UNDECIDED" and not r.certified, r.reason


# -- re-evaluation compares the classes that hold tokens -----------------------------------------------------------
def _torch_softmax(logits, T):
    return torch.softmax(logits / T, dim=-1)


def _entmax15(logits, T):
    entmax = pytest.importorskip("entmax")
    return entmax.entmax15(logits / T, dim=-1)


def _with_an_empty_class(n):
    """A class instance whose weights hold a copy in a column of no tokens: the second row of a batch split at the top-N
    boundary (the first row's top class is split in two, so every row gains a column; the second row's is empty)."""
    from attnbounds.theory.mathematics.instance import Instance

    batch = Instance.from_logits(np.array([[3.0, 1.0, 0.5], [3.0, 1.0, 0.5]]), n, counts=[[1, 2, 3], [2, 2, 2]], N=2)
    one = batch.take(1)
    empty = np.asarray(one.counts)[0] == 0
    assert empty.any() and np.any(one.alpha[0][empty] != 0), (one.counts, one.alpha)  # what the test is about
    return one


@pytest.mark.parametrize("fn", [_torch_softmax, _entmax15], ids=["torch softmax", "entmax15"])
def test_a_deterministic_callable_gives_the_same_weights_again_on_its_classes(fn):
    n = callables.CallableNormaliser(fn.__name__.strip("_"), fn, 1.0)
    one = _with_an_empty_class(n)
    again = n.weights(one.logits, one.counts)
    assert callables.other_weights(again, one.alpha, one.counts) is None
    # a real difference on a class holding tokens is still found, and named by its size
    changed = again.copy()
    changed[0, 0] += 0.25
    assert callables.other_weights(changed, one.alpha, one.counts) == pytest.approx(0.25)
    assert callables.other_weights(again[:, :-1], one.alpha, one.counts) == float("inf")


@pytest.mark.parametrize("fn, bound", [(_torch_softmax, "0.3"), (_entmax15, "0.4")], ids=["torch softmax", "entmax15"])
def test_a_deterministic_callable_is_not_blamed_for_a_class_of_no_tokens(fn, bound):
    from attnbounds.theory.running.verify import verify
    from tests._fakesearch import no_proof, scripted

    user = api.statement(f"alpha_max <= {bound}", normaliser=fn)
    proto = next(h.names.proto for h in user.statements[0].hypotheses if h.names is not None)
    assert isinstance(proto, callables.CallableNormaliser)
    cand = _with_an_empty_class(proto)  # the statement's own normaliser: the candidate is applicable
    record = verify(None, budget_s=0.1, progress=False, statements=user.statements,
                    search=scripted([cand], best=cand, ratio=1.25, margin=-0.1), prover=no_proof)[0]
    assert "other weights on the same logits" not in record.reason, record.reason
    assert record.verdict == "REFUTED" and not record.certified, record.reason
