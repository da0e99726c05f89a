"""Exact JSON round trip of instances: every float, the normaliser, the selection, params and arrays."""

import json

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, strategies as hs

from attnbounds.theory.mathematics import normalisers as nm
from attnbounds.theory.mathematics.errors import AttnBoundsError
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.io.serialize import float_from_json, float_to_json, instance_from_json, instance_to_json


def _roundtrip(inst: Instance) -> Instance:
    return instance_from_json(json.loads(json.dumps(instance_to_json(inst), allow_nan=False)))


def _same(a: Instance, b: Instance) -> None:
    for name in ("alpha", "logits", "x", "q", "k", "selection"):
        va, vb = getattr(a, name), getattr(b, name)
        assert (va is None) == (vb is None), name
        if va is not None:
            assert va.dtype == vb.dtype and np.array_equal(va, vb), name
            if va.dtype == np.float64:  # bit for bit, signed zeros included
                assert np.array_equal(va.view(np.uint64), vb.view(np.uint64)), name
    assert a.N == b.N
    assert sorted(a.params) == sorted(b.params)
    for k in a.params:
        assert np.array_equal(a.params[k], b.params[k])
    assert sorted(a.arrays) == sorted(b.arrays)
    for k in a.arrays:
        assert np.array_equal(a.arrays[k], b.arrays[k])
    assert repr(a.normaliser) == repr(b.normaliser)
    if a.normaliser is not None and a.logits is not None:
        assert np.array_equal(a.normaliser.weights(a.logits), b.normaliser.weights(b.logits))


@pytest.mark.parametrize("name", ["softmax", "softplus", "exp_poly", "shifted_sigmoid", "ssmax", "relu",
                                  "sparsemax", "entmax15", "sigmoid", "softpick", "sa_softmax"])
def test_every_family_roundtrips(name):
    rng = np.random.default_rng(3)
    logits = rng.standard_normal((3, 5)) + (2.0 if name == "relu" else 0.0)
    inst = Instance.from_logits(logits, nm.make(name), x=rng.standard_normal((3, 5, 2)), N=2, M=1.5, r=0.25,
                                arrays={"v": rng.standard_normal((3, 5))})
    _same(inst, _roundtrip(inst))


def test_per_instance_temperature_qk_and_selection_roundtrip():
    rng = np.random.default_rng(4)
    sel = np.zeros((2, 4), dtype=bool)
    sel[:, [0, 3]] = True
    inst = Instance.from_qk(rng.standard_normal((2, 3)), rng.standard_normal((2, 4, 3)), nm.softmax(np.array([0.5, 3.0])),
                            x=rng.standard_normal((2, 4, 2)), selection=sel, delta=np.array([0.1, 0.2]))
    back = _roundtrip(inst)
    _same(inst, back)
    assert back.selection.dtype == bool and back.N == 2


def test_custom_ratio_normaliser_roundtrips_by_log_F():
    b = sp.Symbol("b")
    n = nm.RatioNormaliser("cubic", nm.l_sym**3 / 7 - b * nm.l_sym + nm.softplus(nm.l_sym), {"b": 0.3})
    inst = Instance.from_logits(np.array([[0.1, -0.7, 2.0]]), n, N=1)
    data = instance_to_json(inst)
    assert data["normaliser"]["family"] == "ratio" and "l**3" in data["normaliser"]["log_F"]
    _same(inst, _roundtrip(inst))


def test_weights_given_instance_and_float_text():
    inst = Instance.from_weights([[0.5, 0.25, 0.25]], x=np.array([[[1.0], [-0.0], [1e-310]]]), N=1)
    data = instance_to_json(inst)
    assert data["normaliser"] is None and data["alpha"]["values"] == [[0.5, 0.25, 0.25]]
    assert data["x"]["hex"][0][2][0] == float.hex(1e-310)
    _same(inst, _roundtrip(inst))


@given(hs.lists(hs.floats(allow_nan=False, allow_infinity=False, width=64), min_size=1, max_size=8))
def test_float_encoding_is_exact(values):
    arr = np.array(values)
    back = float_from_json(json.loads(json.dumps(float_to_json(arr))), "v")
    assert np.array_equal(arr.view(np.uint64), back.view(np.uint64))


def test_hand_written_values_are_accepted_and_disagreement_is_named():
    assert float_from_json({"values": [0.1, 2]}, "v").tolist() == [0.1, 2.0]
    with pytest.raises(AttnBoundsError, match="x: 'hex' and 'values' disagree"):
        float_from_json({"hex": [float.hex(0.1)], "values": [0.2]}, "x")


@pytest.mark.parametrize("mutate, match", [
    (lambda d: d.update(format="other"), "not an attnbounds instance"),
    (lambda d: d.update(extra=1), "unknown keys"),
    (lambda d: d.update(normaliser={"family": "nope", "params": {}}), "unknown normaliser"),
    (lambda d: d.update(normaliser={"family": "ratio", "name": "evil", "log_F": "__import__('os')", "params": {}}),
     "unknown name '__import__'"),
    (lambda d: d.update(alpha=None), "'alpha'"),
])
def test_bad_documents_raise_naming_the_problem(mutate, match):
    data = instance_to_json(Instance.from_logits(np.zeros((1, 3)), nm.softmax(1.0), N=1))
    mutate(data)
    with pytest.raises(AttnBoundsError, match=match):
        instance_from_json(data)


def _classes() -> Instance:
    return Instance.from_logits(np.array([[2.0, 0.0, -1.0, 0.5, 1.0]]), nm.softmax(1.0), counts=[[1, 100, 7, 3, 1]], N=2)


def test_a_token_class_instance_says_its_length_under_L_and_its_classes_under_classes():
    inst = _classes()
    data = instance_to_json(inst)
    assert data["L"] == 112 == inst.L and data["classes"] == inst.K == 5 and sum(data["counts"][0]) == 112
    back = _roundtrip(inst)
    _same(inst, back)
    assert back.L == 112 and np.array_equal(back.counts, inst.counts)
    dense = instance_to_json(Instance.from_logits(np.zeros((1, 4)), nm.softmax(1.0), N=1))
    assert dense["L"] == 4 and "classes" not in dense and "counts" not in dense


def test_files_written_before_classes_existed_still_load():
    inst = _classes()
    old = instance_to_json(inst)
    old["L"] = old.pop("classes")  # the old format: the number of columns under L
    back = instance_from_json(old)
    _same(inst, back)
    assert back.L == 112


@pytest.mark.parametrize("mutate, match", [
    (lambda d: d.update(L=5), "L = 5 disagrees with its counts, which sum to 112"),
    (lambda d: d.update(classes=4), "B, classes = 1, 4 disagree with alpha"),
    (lambda d: d.update(counts=[[10**30, 1, 1, 1, 1]]), "more tokens than an int64"),
])
def test_a_token_class_instance_with_inconsistent_sizes_is_refused(mutate, match):
    data = instance_to_json(_classes())
    mutate(data)
    with pytest.raises(AttnBoundsError, match=match):
        instance_from_json(data)


def test_classes_without_counts_are_refused():
    data = instance_to_json(Instance.from_logits(np.zeros((1, 3)), nm.softmax(1.0), N=1))
    data["classes"] = 3
    with pytest.raises(AttnBoundsError, match="'classes' without 'counts'"):
        instance_from_json(data)


def _exact() -> Instance:
    from fractions import Fraction

    inst = Instance.from_logits(np.array([[0.1, -0.1, 0.0]]), nm.softmax(0.7), counts=[[1, 5, 2]], N=3)
    return inst.with_exact_logits([[Fraction(1, 10), Fraction(-1, 10), 0]])


def test_exact_logits_roundtrip_and_travel_with_the_instance():
    from fractions import Fraction

    inst = _exact()
    data = json.loads(json.dumps(instance_to_json(inst)))
    assert data["exact_logits"] == [["1/10", "-1/10", "0"]]
    back = instance_from_json(data)
    assert back.exact_logits.tolist() == [[Fraction(1, 10), Fraction(-1, 10), Fraction(0)]]
    assert back.logits.tolist() == [[0.1, -0.1, 0.0]] and np.array_equal(back.alpha, inst.alpha)
    for moved in (back.take(0), back.with_params(T=0.7), back.expand()):
        assert {float(v) for v in moved.exact_logits.ravel()} == {0.1, -0.1, 0.0}
        assert all(float(e) == f for e, f in zip(moved.exact_logits.ravel(), moved.logits.ravel()))
    assert "exact_logits" not in instance_to_json(Instance.from_logits(np.zeros((1, 2)), nm.softmax(1.0)))


@pytest.mark.parametrize("text, match", [
    ("1/0", "fraction 'p/q'"), ("1/00", "fraction 'p/q'"), ("1e-1", "fraction 'p/q'"),
    ("__import__('os')", "fraction 'p/q'"), (0.1, "as text"), ("1" * 5000, "fraction 'p/q'"),
    ("1/11", "does not round to the stored logit"),
])
def test_bad_exact_logits_are_refused_naming_the_entry(text, match):
    data = instance_to_json(_exact())
    data["exact_logits"][0][0] = text
    with pytest.raises(AttnBoundsError, match=r"exact_logits\[0\]\[0\].*" + match):
        instance_from_json(data)


def test_exact_logits_of_the_wrong_shape_or_kind_are_refused():
    from fractions import Fraction

    data = instance_to_json(_exact())
    data["exact_logits"] = [["1/10", "-1/10"]]
    with pytest.raises(AttnBoundsError, match="logits' shape"):
        instance_from_json(data)
    inst = Instance.from_logits(np.zeros((1, 2)), nm.softmax(1.0))
    with pytest.raises(AttnBoundsError, match="shape"):
        inst.with_exact_logits([[Fraction(1, 3)]])
    with pytest.raises(AttnBoundsError, match="Fraction or an int"):
        inst.with_exact_logits([[0.5, Fraction(1, 3)]])
    with pytest.raises(AttnBoundsError, match="from_logits"):
        Instance.from_qk(np.ones((1, 1)), np.ones((1, 2, 1)), nm.softmax(1.0)).with_exact_logits([[1, 1]])
