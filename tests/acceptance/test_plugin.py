"""The attnbounds pytest plugin seen from a user's project: the verdict table (the same with xdist ``-n 2`` as
without), ``--attnbounds-budget`` / ``--attnbounds-seed`` (exported to ``$ATTNBOUNDS_BUDGET`` / ``$ATTNBOUNDS_SEED``
on the controller and the workers, validated, restored afterwards), the ``attnbounds_settings`` fixture, and
the README's example of property tests with ``attnbounds.strategies``. Runs happen in pytester's temporary
folders, outside the repository (its conftest does not apply)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

README = Path(__file__).resolve().parents[2] / "README.md"
#: the inner runs' options: no cache folder, no pytest-benchmark (it warns when it sees xdist loaded)
ARGS = ("-p", "no:cacheprovider", "-p", "no:benchmark")

#: a user's test file: four readings reported through ReadingStats, one failing, one refuted (strict xfail);
#: every test writes what it sees of the budget and seed next to itself
USER_TESTS = '''
import json, os
import pytest
from attnbounds.pytest_plugin import ReadingStats

def _seen(request, settings):
    name = request.node.name.replace("[", "_").replace("]", "_").replace(",", "_")
    with open(os.path.join(os.path.dirname(__file__), "seen-" + name + ".json"), "w") as fh:
        json.dump({"worker": os.environ.get("PYTEST_XDIST_WORKER"),
                   "env": [os.environ.get("ATTNBOUNDS_BUDGET"), os.environ.get("ATTNBOUNDS_SEED")],
                   "fixture": [settings.budget_s, settings.seed, settings.source]}, fh)

@pytest.mark.parametrize("sid", ["lemma1", "multihead", "corollary3[row]", "user.bound"])
def test_reading(sid, request, attnbounds_settings):
    stats = ReadingStats(sid, examples=3, instances=10, worst_ratio=0.5, worst_rel_margin=0.25)
    stats.violated = int(sid == "corollary3[row]")
    request.node.user_properties.append(stats.as_property())
    _seen(request, attnbounds_settings)
    assert sid != "corollary3[row]"

@pytest.mark.parametrize("part", [1, 2])
def test_two_tests_one_reading(part, request):
    stats = ReadingStats("corollary3[spectral,corrected]", examples=part, instances=part, worst_ratio=0.1 * part)
    request.node.user_properties.append(stats.as_property())

@pytest.mark.xfail(strict=True)
def test_refuted(request):
    stats = ReadingStats("theorem1.fixed[R1,g2]", instances=1, violated=1, replay="violated", counterexample="cx.json")
    request.node.user_properties.append(stats.as_property())
    assert False
'''

EXPECTED = {"lemma1": "SURVIVED", "multihead": "SURVIVED", "corollary3[row]": "VIOLATED", "user.bound": "SURVIVED",
            "corollary3[spectral,corrected]": "SURVIVED", "theorem1.fixed[R1,g2]": "REFUTED"}


def _table(lines: list[str]) -> list[str]:
    """The verdict table's lines (header to the counts line)."""
    start = next(k for k, line in enumerate(lines) if "attnbounds verdicts" in line)
    end = next(k for k in range(start, len(lines)) if re.match(r"^\d+ [A-Z-]+(, \d+ [A-Z-]+)*$", lines[k]))
    return lines[start + 1:end + 1]


def _verdicts(table: list[str]) -> dict[str, str]:
    return {line.split()[0]: line.split()[1] for line in table[2:-1]}


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ATTNBOUNDS_BUDGET", raising=False)
    monkeypatch.delenv("ATTNBOUNDS_SEED", raising=False)


def test_table_is_the_same_under_xdist_and_options_reach_the_workers(pytester: pytest.Pytester, clean_env: None) -> None:
    pytester.makepyfile(test_user=USER_TESTS)
    serial = pytester.runpytest(*ARGS, "--attnbounds-budget", "2.5", "--attnbounds-seed", "7")
    serial.assert_outcomes(passed=5, failed=1, xfailed=1)
    assert "ATTNBOUNDS_BUDGET" not in os.environ and "ATTNBOUNDS_SEED" not in os.environ  # restored after the run
    for seen in pytester.path.glob("seen-*.json"):
        seen.unlink()
    parallel = pytester.runpytest_subprocess(*ARGS, "-p", "xdist", "-n", "2",
                                             "--attnbounds-budget", "2.5", "--attnbounds-seed", "7")
    parallel.assert_outcomes(passed=5, failed=1, xfailed=1)
    one, two = _table(serial.outlines), _table(parallel.outlines)
    assert one == two
    assert _verdicts(one) == EXPECTED
    merged = next(line for line in one if line.startswith("corollary3[spectral,corrected]"))
    assert merged.split()[2:6] == ["0.2", "inf", "3", "3"]  # two tests' rows merged: max ratio, summed counts
    assert one[-1] == "1 REFUTED, 4 SURVIVED, 1 VIOLATED"
    assert "theorem1.fixed[R1,g2]: cx.json: replayed as violated" in parallel.outlines
    import json

    seen = [json.loads(p.read_text()) for p in sorted(pytester.path.glob("seen-*.json"))]
    assert len(seen) == 4 and {s.pop("worker") for s in seen} <= {"gw0", "gw1"}  # they ran on the xdist workers
    assert all(s == {"env": ["2.5", "7"], "fixture": [2.5, 7, {"budget_s": "option", "seed": "option"}]} for s in seen)


def _settings_test(budget_s: float | None, seed: int | None, env_seed: str | None) -> str:
    return f"""
import os
def test_settings(attnbounds_settings):
    assert (attnbounds_settings.budget_s, attnbounds_settings.seed) == ({budget_s!r}, {seed!r})
    assert os.environ.get("ATTNBOUNDS_SEED") == {env_seed!r}
"""


def test_settings_come_from_the_option_then_the_environment_then_none(pytester: pytest.Pytester, clean_env: None,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(test_settings=_settings_test(None, None, None))
    pytester.runpytest(*ARGS).assert_outcomes(passed=1)
    monkeypatch.setenv("ATTNBOUNDS_BUDGET", "0.5")
    monkeypatch.setenv("ATTNBOUNDS_SEED", "3")
    pytester.makepyfile(test_settings=_settings_test(0.5, 3, "3"))
    pytester.runpytest(*ARGS).assert_outcomes(passed=1)
    pytester.makepyfile(test_settings=_settings_test(0.5, 11, "11"))  # the option wins over the variable
    pytester.runpytest(*ARGS, "--attnbounds-seed", "11").assert_outcomes(passed=1)
    assert os.environ["ATTNBOUNDS_SEED"] == "3"  # and the variable is put back afterwards


@pytest.mark.parametrize("args, named", [
    (["--attnbounds-budget", "0"], "--attnbounds-budget"), (["--attnbounds-budget", "-1"], "--attnbounds-budget"),
    (["--attnbounds-budget", "nan"], "--attnbounds-budget"), (["--attnbounds-budget", "inf"], "--attnbounds-budget"),
    (["--attnbounds-budget", "86400.5"], "--attnbounds-budget"), (["--attnbounds-budget", "lots"], "--attnbounds-budget"),
    (["--attnbounds-seed", "-1"], "--attnbounds-seed"), (["--attnbounds-seed", "1.5"], "--attnbounds-seed"),
    (["--attnbounds-seed", "x"], "--attnbounds-seed"),
])
def test_bad_values_are_usage_errors_naming_the_option(pytester: pytest.Pytester, clean_env: None,
                                                       args: list[str], named: str) -> None:
    pytester.makepyfile(test_nothing="def test_nothing():\n    pass\n")
    result = pytester.runpytest(*ARGS, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert named in result.stderr.str()
    assert "ATTNBOUNDS_BUDGET" not in os.environ and "ATTNBOUNDS_SEED" not in os.environ


@pytest.mark.parametrize("env, value", [("ATTNBOUNDS_BUDGET", "0"), ("ATTNBOUNDS_BUDGET", "1e9"),
                                        ("ATTNBOUNDS_SEED", "-2"), ("ATTNBOUNDS_SEED", "seven")])
def test_a_bad_environment_variable_is_a_usage_error_naming_it(pytester: pytest.Pytester, clean_env: None,
                                                               monkeypatch: pytest.MonkeyPatch, env: str, value: str) -> None:
    monkeypatch.setenv(env, value)
    pytester.makepyfile(test_nothing="def test_nothing():\n    pass\n")
    result = pytester.runpytest(*ARGS)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"${env}" in result.stderr.str()


def test_good_values_at_the_limits_are_accepted(pytester: pytest.Pytester, clean_env: None) -> None:
    pytester.makepyfile(test_limits='''
def test_limits(attnbounds_settings):
    assert attnbounds_settings.budget_s == 86400.0 and attnbounds_settings.seed == 0
''')
    pytester.runpytest(*ARGS, "--attnbounds-budget", "86400", "--attnbounds-seed", "0") \
        .assert_outcomes(passed=1)


def _readme_example() -> str:
    text = README.read_text(encoding="utf-8")
    section = text.split("## Using attnbounds in your own tests", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 1, "the section has one python example"
    return blocks[0]


def test_readme_example_runs_and_passes(pytester: pytest.Pytester, clean_env: None) -> None:
    pytester.makepyfile(test_readme_example=_readme_example())
    result = pytester.runpytest(*ARGS)
    result.assert_outcomes(passed=1)


def test_readme_example_catches_a_broken_softmax(pytester: pytest.Pytester, clean_env: None) -> None:
    broken = _readme_example().replace("w / w.sum(axis=-1, keepdims=True)", "w / (w.sum(axis=-1, keepdims=True) + 1e-3)")
    assert broken != _readme_example()
    pytester.makepyfile(test_readme_example=broken)
    pytester.runpytest(*ARGS).assert_outcomes(failed=1)
