"""User-defined bounds and normalisers: parsing without executing, clear errors, same verdict machinery."""

from pathlib import Path

import numpy as np
import pytest
import sympy as sp

from tests._fakesearch import no_proof, random_search
from attnbounds.theory import normalisers as nm, userbounds
from attnbounds.theory.certify import certify
from attnbounds.theory.errors import AttnBoundsError
from attnbounds.theory.instance import Instance
from attnbounds.theory.serialize import instance_from_json, instance_to_json
from attnbounds.theory.verify import verify

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(autouse=True)
def restore_family():
    saved = dict(nm.FAMILY)
    yield
    nm.FAMILY.clear()
    nm.FAMILY.update(saved)


def _write(tmp_path, text: str, name: str = "mine.toml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_example_file_loads_and_verifies():
    ub = userbounds.load(EXAMPLES / "user_bounds.toml")
    assert [s.id for s in ub.statements] == ["user.softmax-jacobian-half", "user.naive-context-distance",
                                             "user.uniform-within-factor"]
    assert "gauss_tilt" in nm.FAMILY and nm.FAMILY["gauss_tilt"]().positive
    recs = {r.id: r for r in verify(statements=ub.statements, budget_s=1, progress=False, search=random_search,
                                    prover=no_proof)}
    assert recs["user.naive-context-distance"].verdict == "REFUTED"
    assert recs["user.softmax-jacobian-half"].verdict == "VERIFIED"
    assert all(r.data["statement"]["source"] == "user" for r in recs.values())


def test_user_statement_semantics_match_the_paper_reading():
    ub = userbounds.load(EXAMPLES / "user_bounds.toml")
    mine = ub.get("user.softmax-jacobian-half")
    assert mine.bindings == {"J_spectral": "J_spectral"} and mine.kind == "deterministic"
    inst = Instance.from_logits(np.zeros((1, 2)), nm.softmax(1.0))  # the equality case of ||J|| <= 1/(2T)
    assert certify(mine, inst).status in ("holds", "inconclusive")
    # the bound's T must be the normaliser's (domain(T)), for the user's statement as for the paper's reading
    other = inst.with_params(T=1.0 + 1e-12)
    assert certify(mine, other).status == certify("corollary3[spectral,corrected]", other).status == "not-applicable"
    lemma = ub.get("user.uniform-within-factor")
    assert lemma.defaults == {"a": "logit_absmax"} and lemma.bindings == {"alpha_i": "alpha_i"}


def test_user_normaliser_weights_and_roundtrip():
    ub = userbounds.load(EXAMPLES / "user_bounds.toml")
    n = ub.normalisers["gauss_tilt"](T=0.5, b=0.2)
    logits = np.array([[-1.0, 0.3, 2.0]])
    F = np.exp(logits / 0.5 - 0.2 * logits**2)
    assert np.allclose(n.weights(logits), F / F.sum(), rtol=1e-14)
    inst = Instance.from_logits(logits, n, N=1)
    data = instance_to_json(inst)
    assert data["normaliser"]["family"] == "ratio"  # self-contained: readable without the user's file
    assert np.array_equal(instance_from_json(data).normaliser.weights(logits), n.weights(logits))
    with pytest.raises(AttnBoundsError, match="has parameters"):
        ub.normalisers["gauss_tilt"](c=1.0)


def test_python_form():
    ub = userbounds.load(EXAMPLES / "user_bounds.py")
    assert [s.id for s in ub.statements] == ["user.py.row-norm"] and "softer" in nm.FAMILY
    inst = Instance.from_logits(np.array([[0.0, 0.0, 1.0]]), nm.softmax(0.3))
    assert certify(ub.statements[0], inst).status == "holds"


def test_lhs_rhs_aliases_sums_and_parameters(tmp_path):
    p = _write(tmp_path, """
[[statement]]
id = "mine.sum"
lhs = "Sum(X[i], (i, 1, N)) / N"
rhs = "c0 * M"
where = { X = "xi" }
parameters = ["c0"]
defaults = { c0 = 1.0 }
hypotheses = ["simplex", "top-N"]
""")
    st = userbounds.load(p).get("mine.sum")
    assert st.bindings == {"X": "xi"} and st.defaults == {"c0": 1.0}
    inst = Instance.from_logits(np.array([[1.0, 0.5, -1.0]]), nm.softmax(1.0), N=2, M=1.0, delta=0.0)
    c = certify(st, inst)  # xi_i <= P_i M <= M: holds
    assert c.status == "holds", c


@pytest.mark.parametrize("text, message", [
    ('[[statement]]\nid = "x"\nrelation = "dtilde <= 1"\n', "key 'relation': unknown name 'dtilde'"),
    ('[[statement]]\nid = "x"\nrelation = "__import__(\'os\').system(\'true\') <= 1"\n', "unknown name '__import__'"),
    ('[[statement]]\nid = "x"\nrelation = "d_1.real <= 1"\n', "operator '.'"),
    ('[[statement]]\nid = "x"\nrelation = "d_1 + 1"\n', "must be an inequality"),
    ('[[statement]]\nid = "x"\nrelation = "L <= N"\n', "uses no quantity"),
    ('[[statement]]\nid = "x"\nrelation = "d_1 <= 1"\nhypotheses = ["smooth"]\n', "unknown hypothesis 'smooth'"),
    ('[[statement]]\nid = "x"\nrelation = "d_1 <= 1"\nwhere = { D = "nope" }\n', "key 'where.D': unknown quantity"),
    ('[[statement]]\nid = "x"\nrelation = "d_1 <= 1"\ncolour = 1\n', "unknown keys ['colour']"),
    ('[[statement]]\nrelation = "d_1 <= 1"\n', "key 'id'"),
    ('[[statement]]\nid = "lemma1"\nrelation = "d_1 <= 1"\n', "reading of the paper"),
    ('[[statement]]\nid = "x"\nrelation = "d_1 <= 1"\n[[statement]]\nid = "x"\nrelation = "d_1 <= 2"\n', "twice"),
    ('[[normaliser]]\nname = "softmax"\nlog_F = "l"\n', "built-in"),
    ('[[normaliser]]\nname = "mine"\nlog_F = "l/T + q"\n', "key 'log_F': unknown name 'q'"),
    ('[[normaliser]]\nname = "mine"\nlog_F = "l"\nparams = { T = "hot" }\n', "key 'params.T' must be a number"),
    ('title = "x"\n', "unknown top-level keys"),
    ('[[statement]\n', "not valid TOML"),
])
def test_errors_name_the_offending_key(tmp_path, text, message):
    with pytest.raises(AttnBoundsError, match=message.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(")
                       .replace(")", r"\)").replace(".", r"\.")):
        userbounds.load(_write(tmp_path, text))


def test_file_kinds(tmp_path):
    with pytest.raises(AttnBoundsError, match="does not exist"):
        userbounds.load(tmp_path / "none.toml")
    with pytest.raises(AttnBoundsError, match="use a .toml file"):
        userbounds.load(_write(tmp_path, "x", "mine.yaml"))
    with pytest.raises(AttnBoundsError, match="declares no"):
        userbounds.load(_write(tmp_path, ""))


def test_toml_text_is_never_executed(tmp_path):
    marker = tmp_path / "pwned"
    payload = f'__import__("pathlib").Path("{marker}").touch()'
    with pytest.raises(AttnBoundsError):
        userbounds.load(_write(tmp_path, f'[[statement]]\nid = "x"\nrelation = \'{payload} <= d_1\'\n'))
    with pytest.raises(AttnBoundsError):
        userbounds.load(_write(tmp_path, f'[[normaliser]]\nname = "evil"\nlog_F = \'{payload}\'\n'))
    assert not marker.exists()


def test_expectation_kind_is_inferred(tmp_path):
    st = userbounds.load(_write(tmp_path, '[[statement]]\nid = "e"\nrelation = "E_dtilde_R1 <= 2*A_norm"\n')).get("e")
    assert st.kind == "expectation" and set(st.bindings.values()) == {"E_dtilde_R1", "A_norm"}
    assert isinstance(st.relation, sp.Le)
