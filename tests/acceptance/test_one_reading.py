"""One reading of a name and of a relation, in every input form (issue 19, item 2).

- Names Python would read as other names (not in Unicode NFKC form: full-width letters, ligatures, modifier and
  other compatibility letters) are refused in TOML, in ``attnbounds.check`` keyword arguments, in the keys of
  ``defaults``, ``fixed``, ``ranges``, ``where`` and a normaliser's ``params``, and in Python statements.
- Strict relations (``<``, ``>``) are decided as strict everywhere: an equality case (a margin certified to be
  exactly 0) refutes them, a bound that holds strictly is not refuted.
"""

from __future__ import annotations

import sympy as sp
import pytest

import attnbounds
from attnbounds.theory.io import userbounds
from attnbounds.theory.mathematics.errors import InvalidArgument
from attnbounds.theory.mathematics.statement import Citation, Statement

pytestmark = pytest.mark.usefixtures("restore_family")

#: look-alikes of plain names (Python's parser folds each into the plain one): modifier letters, mathematical
#: alphanumerics, a ligature, a full-width capital
LOOKALIKES = ["ᵀ", "𝐓", "ﬃ", "Ｌ", "ｒ"]
NFKC = r"not in Unicode NFKC form: Python reads it as"


@pytest.mark.parametrize("name", LOOKALIKES)
def test_lookalike_names_are_refused_in_every_keyword(name):
    cases = [dict(relation=f"alpha_i <= {name}", defaults={name: 2.0}),
             dict(relation="alpha_i <= 1", defaults={name: 2.0}),
             dict(relation=f"alpha_i <= 1 + 0*{name}"),
             dict(relation="alpha_i <= 1", fixed={name: 0.5}),
             dict(relation="alpha_i <= 1", ranges={name: [0.5, 1.0]}),
             dict(relation="alpha_i <= 1", normaliser={"name": "mine", "log_F": f"l/T + 0*{name}", "params": {name: 1.0}})]
    for kwargs in cases:
        relation = kwargs.pop("relation")
        with pytest.raises(InvalidArgument, match=NFKC):
            attnbounds.check(relation, budget=0.2, **kwargs)


def test_lookalike_names_are_refused_in_toml_and_in_python_statements(tmp_path):
    f = tmp_path / "b.toml"
    f.write_text('[[statement]]\nid = "mine"\nrelation = "d_ｍax <= 1"\nwhere = { "d_ｍax" = "alpha_max" }\n',
                 encoding="utf-8")
    with pytest.raises(InvalidArgument, match=NFKC):
        userbounds.load_statements(f)
    f.write_text('[[normaliser]]\nname = "ﬂat"\nlog_F = "l/T"\n', encoding="utf-8")
    with pytest.raises(InvalidArgument, match=NFKC):
        userbounds.load_statements(f)
    with pytest.raises(InvalidArgument, match=NFKC):
        Statement("py", "py", sp.Le(sp.Symbol("alpha_i"), sp.Symbol("ᴸ")), Citation("mine"), bindings={"alpha_i": "alpha_i"})


def test_plain_non_ascii_names_still_work():
    r = attnbounds.check("alpha_i <= κ", defaults={"κ": 1.0}, budget=0.3)
    assert r.verdict == "VERIFIED"


# -- strict relations ----------------------------------------------------------------------------------------------
def test_a_strict_bound_false_exactly_at_its_equality_case_is_refuted_with_a_certified_counterexample():
    # one token under softmax has weight exactly 1: alpha_max < 1 is false there (alpha_max <= 1 holds everywhere)
    r = attnbounds.check("alpha_max < 1", hypotheses=["softmax"], budget=0.5)
    assert r.verdict == "REFUTED" and r.certified, r.reason
    cert = r.counterexample["certificate"]
    assert cert["status"] == "violated" and cert["margin_lo"] == cert["margin_hi"] == 0.0
    weak = attnbounds.check("alpha_max <= 1", hypotheses=["softmax"], budget=0.5)  # true for every L: proved
    assert weak.verdict == "PROVED" and weak.data["relaxation"]["status"] == "proved", weak.reason
    # the same with the relation written the other way round, and with fixed parameters (an exact enumeration)
    r = attnbounds.check("1 > alpha_max", hypotheses=["softmax"], budget=0.5)
    assert r.verdict == "REFUTED" and r.certified
    r = attnbounds.check("coverage_enum > 1 - (1 - p)**H", fixed={"H": 4}, budget=0.5)
    assert r.verdict == "REFUTED" and r.counterexample["certificate"]["status"] == "violated"


def test_a_strict_bound_that_holds_strictly_is_not_refuted_even_where_float_rounds_to_equality():
    # softmax weights are positive, but they underflow to 0.0 in float64 for large logit gaps: float says 0 > 0 fails,
    # interval arithmetic says it holds, and the prover proves it (a weight's 0 is an open end: no instance has it)
    r = attnbounds.check("alpha_i*L > 0", hypotheses=["softmax"], budget=0.5)
    assert r.verdict == "PROVED" and r.data["relaxation"]["status"] == "proved", r.reason
    assert attnbounds.check("alpha_max < 1.5", budget=0.5).verdict == "VERIFIED"


def test_strict_closed_claims_and_toml_relations(tmp_path):
    assert attnbounds.check("1 - 0.5**3 < 0.875", budget=0.2).verdict == "REFUTED"
    assert attnbounds.check("1 - 0.5**3 <= 0.875", budget=0.2).verdict == "PROVED"
    assert attnbounds.check("1 - 0.5**3 > 0.87", budget=0.2).verdict == "PROVED"
    f = tmp_path / "strict.toml"
    f.write_text('[[statement]]\nid = "mine.strict"\nrelation = "alpha_max < 1"\nhypotheses = ["softmax"]\n')
    user = userbounds.load_statements(f)
    assert user.statements[0].strict == (True,)
    rec = attnbounds.verify(statements=user.statements, budget_s=0.5, progress=False)[0]
    assert rec.verdict == "REFUTED"
