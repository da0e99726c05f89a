"""Statements: every id exists, generated evaluators agree with sympy at 50 digits, hypotheses bite."""

import zlib

import numpy as np
import pytest
import sympy as sp

from attnbounds.theory.mathematics import families, normalisers as nz, registry
from attnbounds.theory.mathematics.errors import AttnBoundsError
from attnbounds.theory.mathematics.instance import Instance

REQUIRED = [
    "lemma1", "corollary1[delta=own-key]", "corollary1[delta=max-key]",
    "theorem1.fixed[R1,g1]", "theorem1.fixed[R1,g2]", "theorem1.fixed[R2,g1]", "theorem1.fixed[R2,g2]",
    "corollary2.i[R1]", "corollary2.i[R2]", "corollary2.ii[R1]", "corollary2.ii[R2]",
    "theorem2.lower[full]", "theorem2.lower[relaxed]", "theorem2.upper[full]", "theorem2.upper[relaxed]",
    "corollary3[spectral]", "corollary3[frobenius]", "corollary3[row]", "corollary3[entry]", "corollary3[fd]",
    "multihead",
]


@pytest.mark.parametrize("sid", REQUIRED)
def test_required_ids_exist(sid):
    s = registry.get(sid)
    assert s.id == sid and s.citation.arxiv == "arXiv:2508.17821" and s.latex


def test_reading_families_exist():
    ids = registry.ids()
    assert any(i.startswith("theorem1.random[") for i in ids)
    assert any(i.startswith("lemma2[") for i in ids)


def test_unknown_id_suggests_close_matches():
    with pytest.raises(AttnBoundsError, match="did you mean.*theorem1.fixed"):
        registry.get("theorem1.fixed[R1,g3]")


@pytest.mark.parametrize("sid", registry.ids())
def test_generated_evaluator_agrees_with_sympy_at_50_digits(sid):
    s = registry.get(sid)
    rng = np.random.default_rng(zlib.crc32(sid.encode()))
    checked = 0
    for _ in range(3):
        spec = families.random_spec(rng, s, B=3, max_L=6).with_(mc_draws=50)
        inst = families.build(s, spec)
        ev = s.evaluate(inst)
        for b in range(inst.B):
            if not ev.applicable[b] or not np.isfinite(ev.margin[b]):
                continue
            lhs, rhs, margin = s.evaluate_sympy(inst, b, digits=50)
            # float64 error of a formula is relative to the size of the terms it combines, not of the result
            terms = sum(float(np.nanmax(np.abs(v[b]))) for v in s.env(s.prepare(inst), "mid").values())
            scale = max(abs(float(lhs)), abs(float(rhs))) + terms * inst.L
            assert abs(float(margin) - ev.margin[b]) <= 1e-12 * scale, (spec, b)
            checked += 1
    assert checked > 0


def test_for_all_tokens_takes_the_worst_token():
    s = registry.get("corollary1[delta=own-key]")
    q = np.array([[1.0, 0.0]])
    k = np.array([[[0.0, 0.0], [5.0, 0.0]]])  # key 0 has Delta_0 = 0 but weight ~ e^-5
    ev = s.evaluate(Instance.from_qk(q, k, nz.softmax(1.0)))
    a0 = 1 / (1 + np.exp(5.0))
    assert ev.margin[0] == pytest.approx(a0 - 0.5)


def test_sum_over_selected_tokens():
    s = registry.get("theorem2.lower[relaxed]")
    inst = Instance.from_weights(np.array([[0.5, 0.3, 0.2]]), x=np.eye(3)[None], N=2, M=1.0, delta=0.0, r=1.0,
                                 dim=3, mc_draws=20)
    ev = s.evaluate(inst)
    # xi for the two selected tokens: the other selected weight times M (no cross terms), 0.3 and 0.5
    assert ev.rhs[0] == pytest.approx(s.evaluate(inst).rhs[0])
    assert ev.lhs[0] == pytest.approx(1 - (0.3 + 0.5) / (1.0 * 2))


def test_hypotheses_make_instances_not_applicable():
    lg = np.random.default_rng(0).normal(size=(2, 5))
    assert not registry.get("lemma1").evaluate(Instance.from_logits(lg, nz.scalable_softmax())).applicable.any()
    assert not registry.get("lemma1").evaluate(Instance.from_logits(lg + 9, nz.Sparsemax())).applicable.any()
    assert not registry.get("lemma1").evaluate(Instance.from_logits(lg, nz.softmax(), a=0.01)).applicable.any()
    assert registry.get("lemma1").evaluate(Instance.from_logits(lg, nz.softmax())).applicable.all()
    assert not registry.get("corollary3[spectral]").evaluate(Instance.from_logits(lg, nz.softplus_shift())).applicable.any()
    x = np.random.default_rng(1).normal(size=(2, 5, 3))
    bad_sel = np.zeros((2, 5), dtype=bool)
    bad_sel[:, np.argmin(lg[0])] = True
    bad_sel[1] = False
    bad_sel[1, np.argmin(lg[1])] = True
    ev = registry.get("theorem1.fixed[R1,g1]").evaluate(Instance.from_logits(lg, nz.softmax(), x=x, selection=bad_sel))
    assert not ev.applicable.any() and np.isnan(ev.margin).all()
    assert ev.failed_hypotheses[0] == ("top-N",)
    inst = Instance.from_logits(lg, nz.softmax(), x=x, N=2, M=1.0, delta=3.0, r=1.0, mc_draws=10)
    assert not registry.get("theorem2.upper[full]").evaluate(inst).applicable.any()


@pytest.mark.parametrize("kwargs, match", [
    (dict(N=0), "N must be an integer in \\[1, 5\\]"),
    (dict(N=6), "N must be an integer in \\[1, 5\\]"),
    (dict(N=2.5), "N must be an integer"),
    (dict(x=np.zeros((2, 4, 3))), "x must have shape"),
    (dict(x=np.full((2, 5, 3), np.nan)), "x must be finite"),
    (dict(M=np.ones(3)), "parameter M must be a scalar or have shape"),
])
def test_bad_instance_input_names_the_value(kwargs, match):
    with pytest.raises(AttnBoundsError, match=match):
        Instance.from_logits(np.zeros((2, 5)), nz.softmax(), **kwargs)


def test_missing_parameter_is_named():
    inst = Instance.from_logits(np.zeros((1, 3)), nz.softmax(), x=np.ones((1, 3, 2)), N=1)
    with pytest.raises(AttnBoundsError, match="parameter 'M'"):
        registry.get("theorem2.lower[full]").evaluate(inst)


def test_weights_must_be_on_the_simplex():
    with pytest.raises(AttnBoundsError, match="sum to 1"):
        Instance.from_weights(np.array([[0.5, 0.6]]))
    with pytest.raises(AttnBoundsError, match=">= 0"):
        Instance.from_weights(np.array([[1.5, -0.5]]))


def test_statement_is_a_value():
    s = registry.get("corollary3[spectral]")
    moved = s.subs(T=sp.Symbol("T") * sp.Rational(103, 100))
    assert moved != s and moved.id.startswith("corollary3[spectral]{")
    assert registry.get("corollary3[spectral]") == s
    assert "J_norm" in s.formula and "\\frac" in s.latex


def test_a_reading_travels_by_id_and_any_other_statement_by_value():
    """What a cluster ships with each piece of work: a registered reading is looked up by id on the worker (its
    evaluators stay built there); a variant travels as its fields, without generated code, and evaluates alike."""
    import dataclasses
    import pickle

    import cloudpickle

    st = registry.get("lemma1")
    inst = Instance.from_logits(np.array([[2.0, 0.5, -1.0]]), nz.softmax(1.0), x=np.eye(3)[None], N=1)
    st.evaluate(st.prepare(inst))  # builds the cached evaluators
    for dumps in (pickle.dumps, cloudpickle.dumps):
        assert pickle.loads(dumps(st)) is st
        assert len(dumps(st)) < 200
    variant = dataclasses.replace(st, id="lemma1 (a copy)")
    variant.evaluate(variant.prepare(inst))
    blob = cloudpickle.dumps(variant)
    back = pickle.loads(blob)
    assert back == variant and back is not variant and not registry.is_builtin(back)
    assert b"_compiled" not in blob
    a, b = variant.evaluate(variant.prepare(inst)), back.evaluate(back.prepare(inst))
    assert np.array_equal(a.margin, b.margin, equal_nan=True)


def test_a_search_piece_sends_back_its_records_not_the_statement():
    import pickle

    from attnbounds.theory.deciding.search.tracker import Tracker

    st = registry.get("lemma1")
    tracker = Tracker(st)
    tracker.evaluate(Instance.from_logits(np.array([[2.0, 0.5, -1.0]]), nz.softmax(1.0), x=np.eye(3)[None], N=1),
                     "random")
    back = pickle.loads(pickle.dumps(tracker))
    assert back.statement is None and back.tried == tracker.tried == 1


@pytest.mark.parametrize("first", [True, False], ids=["undefined first", "undefined second"])
def test_an_undefined_conjunct_leaves_the_conjunction_undefined(tmp_path, first):
    """A conjunct with no value (the float root of a negative number) makes the conjunction's margin NaN whatever
    its place, and the certificate does not call it held: a later conjunct's margin once replaced it in float,
    and arb read the root as 0 (found by the thorough fuzz profile)."""
    from attnbounds.theory.deciding.certify import certify
    from attnbounds.theory.io import userbounds

    undefined, defined = "sqrt(alpha_max - 2) <= 1", "alpha_max <= 1"
    relation = f"({undefined}) & ({defined})" if first else f"({defined}) & ({undefined})"
    path = tmp_path / "mine.toml"
    path.write_text(f'[[statement]]\nid = "mine"\nrelation = "{relation}"\nhypotheses = ["simplex"]\n')
    statement = userbounds.load_statements(path).statements[0]
    inst = Instance.from_weights(np.array([[0.5, 0.3, 0.2], [1.0, 0.0, 0.0]]))
    ev = statement.evaluate(inst)
    assert np.isnan(ev.margin).all(), ev.margin
    for b in range(inst.B):
        assert certify(statement, inst, b).status not in ("holds", "violated")


def test_statements_are_equal_and_hash_by_id_and_relation():
    """Equality is the id and the relation; the hash reads both, so statements sharing an id (every statement given
    to ``attnbounds.check`` has the same one) do not pile up in one bucket of a cache keyed by statements."""
    from attnbounds.theory.running import api

    a, a2 = (api.statement("alpha_i <= 1 + 1/L").statements[0] for _ in range(2))
    b = api.statement("alpha_i <= 2 + 1/L").statements[0]
    assert a.id == b.id and a is not a2
    assert a == a2 and hash(a) == hash(a2) and a != b and hash(a) != hash(b)
    assert len({a, a2, b}) == 2
    assert "_identity_key" in b.__dict__ and "_identity_key" not in b.__getstate__()  # a cache, never shipped
