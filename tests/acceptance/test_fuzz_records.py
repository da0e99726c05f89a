"""Grammar-based fuzzing of records files fed to ``report``, ``table`` (``--erratum``) and ``cite --records``: the
fuzzer of :mod:`tests.acceptance.test_fuzz` extended to what a hostile or careless user hands these commands.

Cases are real records (a short real search: per-L rows, proof steps, certificates, limits, token classes)
mutated where a walk into them lands: a value replaced by one of another kind or an extreme one (lists where
booleans are, numbers where strings are, 1e308, huge integers, control characters, deep nesting), a key removed
or added, a record duplicated or cut, the file's text cut; the content hash is recomputed for most of them (so
the checks behind it are what is tested). Invariant: exit 0 or 2, never a traceback, and ``--out`` holds a whole
report after exit 0 and is untouched after exit 2. The campaign scales with the hypothesis profile like the rest
of the fuzzer (:func:`tests.acceptance.test_fuzz.examples`: ci 15 cases, thorough 200). ``cite --records`` replays the
record first and may also exit 1 (a record that does not replay is not cited).
"""

from __future__ import annotations

import contextlib
import copy
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as hs

from attnbounds.theory.io import records as rec
from tests._cli import run_cli
from tests._records import class_record, rehash
from tests.acceptance.test_fuzz import FUZZ, examples

ODD_STRINGS = ["", "inf", "-inf", "nan", "NaN", "1e308", "\x1b[2J\x07", "\u202eevil", "<script>x</script>", "x" * 5000,
               "LessThan(Symbol('x'), Pow(Integer(10), Integer(1000000000)))", "__import__('os')", "PROVED", "null"]


def odd_values() -> hs.SearchStrategy[Any]:
    leaves = hs.one_of(
        hs.none(), hs.booleans(), hs.integers(), hs.sampled_from([0, -1, 2**63, 10**40, -(10**40)]),
        hs.floats(allow_nan=False, allow_infinity=False), hs.sampled_from([1e308, -1e308, 5e-324, -0.0]),
        hs.text(max_size=12), hs.sampled_from(ODD_STRINGS))
    nested = hs.recursive(leaves, lambda c: hs.one_of(hs.lists(c, max_size=4), hs.dictionaries(hs.text(max_size=6), c,
                                                                                            max_size=3)), max_leaves=10)
    deep = hs.integers(20, 120).map(lambda n: _deep(n))
    return hs.one_of(leaves, nested, deep)


def _deep(n: int) -> Any:
    value: Any = 0
    for k in range(n):
        value = [value] if k % 2 else {"k": value}
    return value


@hs.composite
def mutations(draw: Any, base: list[dict[str, Any]]) -> tuple[str, bool]:
    """A mutated records file's text, and whether its hashes were recomputed."""
    records = copy.deepcopy(base)
    for _ in range(draw(hs.integers(1, 3))):
        node: Any = records[draw(hs.integers(0, len(records) - 1))]
        for _ in range(draw(hs.integers(0, 6))):  # walk in
            keys = list(node) if isinstance(node, dict) else list(range(len(node))) if isinstance(node, list) else []
            keys = [k for k in keys if isinstance(node[k], (dict, list)) and node[k]]
            if not keys:
                break
            node = node[draw(hs.sampled_from(keys))]
        how = draw(hs.sampled_from(["replace", "replace", "replace", "delete", "add"]))
        if isinstance(node, dict) and node:
            key = draw(hs.sampled_from(sorted(node)))
            if how == "delete":
                del node[key]
            elif how == "add":
                node[draw(hs.text(max_size=8))] = draw(odd_values())
            else:
                node[key] = draw(odd_values())
        elif isinstance(node, list) and node:
            index = draw(hs.integers(0, len(node) - 1))
            if how == "delete":
                del node[index]
            else:
                node[index] = draw(odd_values())
    whole = draw(hs.sampled_from(["as is"] * 8 + ["duplicated", "none", "cut"]))
    if whole == "duplicated":
        records = records + records
    elif whole == "none":
        records = []
    hashed = draw(hs.booleans()) or draw(hs.booleans())
    if hashed:
        for r in records:
            if isinstance(r, dict):
                with contextlib.suppress(Exception):  # a record too odd to hash stays as it is
                    rehash(r)
    text = json.dumps(records)
    if whole == "cut":
        text = text[:draw(hs.integers(0, len(text)))]
    return text, hashed


@pytest.fixture(scope="module")
def base() -> list[dict[str, Any]]:
    from attnbounds.theory.running.verify import verify

    real = verify(["theorem1.fixed[R1,g2]", "lemma2[sharp]"], budget_s=0.1, seed=0, progress=False)
    return [r.to_json() for r in (*real, class_record())]


def _run(argv: list[str]) -> tuple[int, str]:
    code, _, err = run_cli(argv)
    return code, err


def test_records_fuzz(base: list[dict[str, Any]]) -> None:
    @settings(max_examples=examples(0.5), **FUZZ)
    @given(case=mutations(base))
    def check(case: tuple[str, bool]) -> None:
        text, hashed = case
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "records.json"
            path.write_text(text)
            first = next((r.get("id") for r in json.loads(text) if isinstance(r, dict)), "x") if _json(text) else "x"
            codes = {}
            for name, argv in (("report", ["report", str(path), "--out", str(Path(folder) / "site"), "--quiet"]),
                               ("table", ["table", str(path)]), ("erratum", ["table", str(path), "--erratum"]),
                               ("cite", ["cite", str(first), "--records", str(path)])):
                code, err = _run(argv)
                assert code in ((0, 1, 2) if name == "cite" else (0, 2)), (name, code, err[-3000:])  # cite replays
                assert "Traceback" not in err, (name, err[-3000:])
                codes[name] = code
            site = Path(folder) / "site"
            if codes["report"] == 0:
                assert (site / "index.html").read_text().endswith("</html>\n")
            else:
                assert not site.exists()
            assert sorted(p.name for p in Path(folder).iterdir()) == ["records.json"] + ["site"] * (codes["report"] == 0)
            event(f"report exit {codes['report']}, table exit {codes['table']}{' (rehashed)' if hashed else ''}")

    check()


def _json(text: str) -> bool:
    try:
        return isinstance(json.loads(text), list)
    except ValueError:
        return False


def test_a_valid_file_loads_and_every_mutation_kind_is_exercised(base: list[dict[str, Any]]) -> None:
    """The unmutated records pass every command (the fuzzer starts from valid input)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "records.json"
        rec.save_records(path, [rec.Record.from_json(r) for r in base])
        for argv in (["report", str(path), "--out", str(Path(folder) / "site"), "--quiet"], ["table", str(path)],
                     ["table", str(path), "--erratum"], ["cite", base[0]["id"], "--records", str(path)]):
            assert _run(argv)[0] == 0, argv
