"""``attnbounds.profile`` and ``attnbounds profile`` (issue 34, items 2 and 3).

The default run profiles softmax on two rows at a small budget (Lemma 1's best constant of ``L*alpha_max <= C`` is
e^{2a/T}, derived in ``test_tighten.py``: the bracket must contain it, PROVED above and REFUTED below, and the escape
row must say "falls like 1/L" on the same records), checks the value's forms (text, Markdown, HTML, JSON read back by
the report), the plot, the errors for bad input, a torch function (float only, labelled) and the report and the
erratum with a profile. The comparison over the built-in alternatives runs under ``-m slow``.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import re
from pathlib import Path

import pytest

import attnbounds
from attnbounds.theory.io import profiles as io_profiles
from attnbounds.theory.mathematics.errors import InvalidArgument
from attnbounds.theory.running import profile as prof
from tests._cli import run_cli

FAST = dict(budget=0.3, seed=0, rtol=1e-3, max_checks=5)


@functools.lru_cache(maxsize=None)
def softmax_profile() -> prof.Profile:
    return attnbounds.profile("softmax", a=1.0, T=1.0, rows=["vanish.max", "vanish.escape"], **FAST)


@pytest.mark.slow  # 25-40 s of profiling
def test_softmax_vanishing_rows_contain_lemma1_constant() -> None:
    p = softmax_profile()
    assert [r.key for r in p.rows] == ["vanish.max", "vanish.escape"]
    row = p.row("vanish.max")
    truth = math.exp(2.0)
    assert row.verdict == "PROVED" and row.proved_side == "upper"
    assert row.upper is not None and row.upper >= truth
    assert row.lower is None or row.lower < truth
    roles = {r.role: r for r in row.records}
    assert roles["proved"].verdict == "PROVED" and roles["proved"].id.endswith(f"{{C={row.upper_exact}}}")
    assert roles["proved"].content_hash.startswith("sha256:")
    escape = p.row("vanish.escape")
    assert escape.verdict == "PROVED" and escape.finding.startswith("no: falls like 1/L")
    assert [r.id for r in escape.records] == [r.id for r in row.records]  # the same records, not a new claim
    assert p.curve is not None and p.curve.L[-1] == 10**9
    rate = p.curve.rate()
    assert rate is not None and abs(rate - 1.0) < 1e-3  # e^2 / (e^2 + L - 1) ~ 1/L


def test_sigmoid_attention_escapes_for_every_L_past_a_certified_length() -> None:
    """sigmoid(1) = 0.731 is the weight of a token at +a whatever L: ``alpha_max <= 0.365`` is REFUTED by a
    counterexample whose margin is certified < 0 for every L >= L0 along a growth of its classes. The record's range
    of L ends at 10^9 (for the search), where its own limit analysis stops; the row analyses the same counterexample
    against the relation over every L, so it says "yes" (it said "not settled" since the analysis began stopping at a
    statement's range)."""
    p = attnbounds.profile("sigmoid", a=1.0, T=1.0, rows=["vanish.escape"], **FAST)
    row = p.row("vanish.escape")
    assert row.verdict == "REFUTED" and row.finding.startswith("yes: alpha_max > "), row.finding
    assert "for every L >= " in row.finding


@pytest.mark.slow  # 30 s of profiling
def test_profile_is_a_value_with_its_forms(tmp_path: Path) -> None:
    p = softmax_profile()
    with pytest.raises(Exception):
        p.a = 2.0  # type: ignore[misc]  # frozen
    text = str(p)
    assert "L*alpha_max <= C" in text and "a = 1, T = 1" in text and "record: PROVED" in text
    assert "| row | verdict |" in p._repr_markdown_()
    assert "<table>" in p._repr_html_() and "&lt;" in p._repr_html_()
    data = json.loads(json.dumps(p.to_json()))
    assert data["kind"] == "attnbounds.profile" and data["rows"][0]["detail"]["proved"]["verdict"] == "PROVED"
    back = io_profiles.normalise(data)
    assert back["profiles"][0]["normaliser"] == "softmax"
    table = io_profiles.table_markdown(back["profiles"])
    assert "| row | softmax |" in table and "P\\]" in table
    pytest.importorskip("matplotlib")
    out = tmp_path / "curve.png"
    assert "written" in p.write_plot(out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("kwargs, needle", [
    ({"normaliser": "nosuch"}, "softmax"),  # the known names are listed
    ({"normaliser": "softmax", "a": 0.0}, "a must be"),
    ({"normaliser": "softmax", "a": -1.0}, "a must be"),
    ({"normaliser": "softmax", "a": float("nan")}, "a must be"),
    ({"normaliser": "softmax", "a": "1"}, "a must be"),
    ({"normaliser": "softmax", "T": 0.0}, "T must be"),
    ({"normaliser": "softmax", "T": float("inf")}, "T must be"),
    ({"normaliser": "softmax", "rows": ["vanish.nope"]}, "vanish.max"),
    ({"normaliser": "softmax", "budget": -1.0}, "budget"),
    ({"normaliser": "softmax", "max_checks": 0}, "max_checks"),
    ({"normaliser": "ssmax", "params": {"zz": 1.0}}, "zz"),
    ({"normaliser": "softmax", "params": {"T": 2.0}}, "T=..."),
    ({"normaliser": 42}, "built-in name"),
])
def test_bad_input_is_refused_with_what_is_allowed(kwargs: dict, needle: str) -> None:
    with pytest.raises(InvalidArgument, match=None) as info:
        attnbounds.profile(**kwargs)
    assert needle in str(info.value)


def test_unknown_name_lists_the_known_ones_on_the_command_line() -> None:
    code, out, err = run_cli(["profile", "nosuch", "--quiet"])
    assert code == 2 and "unknown normaliser 'nosuch'" in err and "sparsemax" in err
    code, out, err = run_cli(["profile", "softmax", "-a", "-1", "--quiet"])
    assert code == 2 and "a must be" in err
    code, out, err = run_cli(["profile", "softmax", "ssmax", "--quiet"])  # two names without --compare
    assert code == 2 and "--compare" in err


def test_compare_reads_the_registry_and_names_what_is_missing() -> None:
    present, missing = prof.default_compare()
    from attnbounds.theory.mathematics.normalisers import BUILTIN_NAMES

    assert present[:5] == ["softmax", "ssmax", "sparsemax", "entmax15", "sigmoid"]
    assert all(n in BUILTIN_NAMES for n in present)
    for label, names in prof.COMPARE:
        if not any(n in BUILTIN_NAMES for n in names):
            assert any(m.startswith(label) for m in missing)


def test_torch_function_is_float_only_and_labelled() -> None:
    torch = pytest.importorskip("torch")

    def my_softmax(logits: "torch.Tensor", T: float) -> "torch.Tensor":
        return torch.softmax(logits / T, dim=-1)

    p = attnbounds.profile(my_softmax, rows=["vanish.max"], budget=0.2, max_checks=2)
    assert not p.certified and "torch function" in p.normaliser and "FLOAT ONLY" in str(p)
    row = p.row("vanish.max")
    assert not row.certified and row.verdict != "PROVED"
    assert all(not r.certified for r in row.records if r.verdict == "REFUTED")
    assert p.curve is not None and p.curve.L[-1] == prof.CALLABLE_CURVE_L


def _profile_file(tmp_path: Path) -> Path:
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(softmax_profile().to_json()))
    return path


@pytest.mark.slow  # 28 s: it computes the profile the report shows
def test_report_and_erratum_show_a_profile(tmp_path: Path) -> None:
    from attnbounds.theory.io import records as rec
    from attnbounds.theory.io.report import write_report
    from tests._records import quick_records

    records = quick_records(["lemma1"])
    records_path = tmp_path / "records.json"
    rec.write_json(records_path, [r.to_json() for r in records])
    data = io_profiles.load(_profile_file(tmp_path))
    page = write_report(records, tmp_path / "site", name="records.json", profile=data).read_text()
    assert 'id="profile"' in page and io_profiles.anchor("softmax", "vanish.max") in page
    assert "Scalable-Softmax" in page and "not profiled" in page  # the claims, ssmax not in this file
    code, out, err = run_cli(["table", str(records_path), "--erratum", "--profile", str(_profile_file(tmp_path))])
    assert code == 0, err
    assert "the paper's explanation of the alternatives" in out and "| row | softmax |" in out
    code, out, err = run_cli(["table", str(records_path), "--profile", str(_profile_file(tmp_path))])
    assert code == 2 and "--erratum" in err
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    with pytest.raises(InvalidArgument, match="not a profile"):
        io_profiles.load(bad)


@pytest.mark.slow
def test_compare_over_the_built_in_alternatives(tmp_path: Path) -> None:
    """The whole comparison at the default budget: every row certified or saying why not, within 10 minutes."""
    out = tmp_path / "profile.json"
    code, stdout, err = run_cli(["profile", "--compare", "--json", str(out), "--quiet"])
    assert code == 0, err
    data = json.loads(out.read_text())
    assert data["seconds"] < 600
    for p in data["profiles"]:
        for r in p["rows"]:
            has_side = r["lower"] is not None or r["upper"] is not None
            assert has_side or r["reason"], (p["normaliser"], r["key"])
            if r["verdict"] == "PROVED":
                assert any(x["verdict"] == "PROVED" for x in r["records"]), (p["normaliser"], r["key"])
    softmax = next(p for p in data["profiles"] if p["normaliser"] == "softmax")
    row = next(r for r in softmax["rows"] if r["key"] == "vanish.max")
    assert row["lower"] < math.exp(2) <= row["upper"]
    assert "| row | softmax | ssmax | sparsemax |" in stdout


@pytest.mark.slow  # 25-40 s of profiling
def test_a_statements_files_normaliser(tmp_path: Path) -> None:
    """A ``[[normaliser]]`` of a statements file: its log F and parameters, the profile's T replacing the file's."""
    path = tmp_path / "mine.toml"
    path.write_text('[[normaliser]]\nname = "tilt"\nlog_F = "l/T - b*l**2"\nparams = { T = 2.0, b = 0.05 }\n')
    p = attnbounds.profile("tilt", statements=str(path), T=1.0, rows=["vanish.min"], budget=0.2, max_checks=1)
    assert p.normaliser == "tilt" and p.certified and p.params == {"b": 0.05} and "b*l**2" in p.description
    assert p.rows[0].key == "vanish.min" and p.rows[0].checks == 1
    with pytest.raises(InvalidArgument, match="tilt"):
        attnbounds.profile("other", statements=str(path))
    from attnbounds.theory.mathematics.normalisers import CONSTRUCTORS

    assert "tilt" not in CONSTRUCTORS  # the file's normaliser is added for the call only, never left registered


def _cells(line: str) -> int:
    """Cells of a Markdown table line: bars not escaped by a backslash (``\\|`` is a bar inside a cell; ``\\\\|`` an
    escaped backslash and then a bar that ends the cell)."""
    return len(re.findall(r"(?<!\\)(?:\\\\)*\|", line)) - 1


@pytest.mark.slow  # 22 s: the softmax profile it formats (the other tests that build it are slow too)
def test_markdown_tables_keep_a_bar_inside_its_cell() -> None:
    """A title with bars (J_entry's "max |d alpha_i/d l_j|") stays in its cell: every row has the header's cells."""
    p = softmax_profile()
    barred = dataclasses.replace(p, rows=tuple(dataclasses.replace(r, title=f"max |{r.title}|") for r in p.rows))
    for text in (barred.markdown(), io_profiles.table_markdown([barred.to_json()])):
        table = [line for line in text.splitlines() if line.startswith("|")]
        assert table and all(_cells(line) == _cells(table[0]) for line in table), table
