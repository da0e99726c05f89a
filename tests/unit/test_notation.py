"""How relations, formulas in prose and numbers are written for people: chains, absolute values and equalities as
the paper writes them (``notation``), ASCII formulas in text as MathML that no input can turn into markup
(``prose``), numbers at a readable precision, the paper's statements and sibling readings (``paper``)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as hs

from attnbounds.theory.io import paper, prose
from attnbounds.theory.mathematics import notation, registry
from attnbounds.theory.io.report import MATHML_TAGS

x, y, z, c = sp.symbols("x y z c")


@pytest.mark.parametrize("relation, text", [
    (sp.And(sp.Le(y, z), sp.Le(x, y)), "x <= y <= z"),  # sympy's order of the conjuncts does not matter
    (sp.And(sp.Le(x, y), sp.Le(y, z), sp.Lt(z, c)), "x <= y <= z < c"),
    (sp.And(sp.Le(x, y), sp.Le(y, x)), "x = y"),
    (sp.And(sp.Le(x - y, c), sp.Le(y - x, c)), "|x - y| <= c"),
    (sp.Ge(x * y, sp.exp(-z)), "x*y >= exp(-z)"),  # a single >= as written
    (sp.And(sp.Le(x, y), sp.Le(z, c)), "x <= y and z <= c"),  # nothing to join: both, in order
    (sp.Le(x**2, sp.Min(1, y)), "x^2 <= min(1, y)"),
])
def test_relations_read_as_the_paper_writes_them(relation: sp.Basic, text: str) -> None:
    assert notation.text(relation) == text


def test_every_readings_mathml_is_kept_by_the_reports_whitelist() -> None:
    from attnbounds.theory.io.report import mathml

    for st_ in registry.all_statements():
        root = ET.fromstring(mathml(sp.srepr(st_.relation)))
        assert {e.tag for e in root.iter()} <= MATHML_TAGS, st_.id
        assert "\u2264" in ET.tostring(root, encoding="unicode") or "=" in ET.tostring(root, encoding="unicode")


@pytest.mark.parametrize("value, shown", [
    (37037, "37\u2009037"), (112, "112"), (1.5323036060398776e-05, "1.532e-05"), (1.0, "1"), ("inf", "\u221e"),
    ("-inf", "\u2212\u221e"), ("nan", "nan"), (None, "n/a"), (True, "true"), (10**15, "1.000e+15"),
])
def test_numbers_are_shown_to_four_digits(value: object, shown: str) -> None:
    assert notation.short(value) == shown


def test_prose_turns_formulas_into_mathml_and_leaves_words_alone() -> None:
    html = prose.html_of("Vanishing attention: C1/L <= alpha_i <= C2/L with a top-N set on [-a, a]")
    assert html.startswith("Vanishing attention: <math")
    assert " with a top-N set on <math" in html and html.count("<math") == 2
    assert "\u03b1" in html and "\u2264" in html  # alpha and <=


@settings(max_examples=200, deadline=None)
@given(hs.lists(hs.sampled_from(list("<>&\"'/=!|_^{}()[]-+*ab1 \x1b\u202e") + ["alpha", "script", "in", "not", "sqrt",
                                                                             "C1", " with ", "&lt;", "<!--"]),
                max_size=30).map("".join))
def test_prose_never_lets_markup_through(text: str) -> None:
    """Whatever the text, the HTML is text and MathML elements only, and every character of the input is still there."""
    html = prose.html_of(text)
    wrapped = ET.fromstring(f"<div>{html}</div>")
    assert {e.tag for e in wrapped.iter()} <= MATHML_TAGS | {"div"}
    assert all(not k.startswith("on") for e in wrapped.iter() for k in e.attrib)


def test_siblings_pair_printed_and_corrected_readings() -> None:
    assert paper.sibling("theorem1.fixed[R1,g2]") == "theorem1.fixed[R1,g2,corrected]"
    assert paper.sibling("theorem1.fixed[R1,g2,corrected]") == "theorem1.fixed[R1,g2]"
    assert paper.sibling("lemma1") is None
    ids = set(registry.ids())
    for sid in ids:  # every corrected form corrects a printed reading that is registered
        if paper.is_corrected(sid):
            assert paper.sibling(sid) in ids, sid
    assert {paper.result_of(i) for i in ids} == set(paper.PRINTED)  # the paper's statement of every result


def test_the_erratum_sorts_readings_by_verdict() -> None:
    rows = [("corollary1[delta=own-key]", "REFUTED", "paper"), ("corollary1[delta=max-key]", "PROVED", "paper"),
            ("corollary1[delta=own-key,corrected]", "PROVED", "paper"), ("user.mine", "VERIFIED", "user")]
    (entry,) = paper.erratum(rows)
    assert (entry.result, entry.holds, entry.fails, entry.corrected) == (
        "corollary1", [rows[1][:2]], [rows[0][:2]], [rows[2][:2]])
    assert entry.summary == "1 printed reading holds; 1 printed reading is refuted; 1 corrected form is proved."
