"""Grammar-based fuzzing of what a hostile user controls: statements files (TOML keys, values, expressions,
raw bytes), Python statements, torch normalisers that misbehave (failures by row length, temperature or call count,
in-place writes, outputs off the autograd graph, formulas that disagree beyond the load check, wrong output types,
blocking calls) and the command line (commands, options, paths, numbers).

Every case must end within :data:`TIME_LIMIT` seconds, with exit 0 or 2 (or a refusal by
:class:`AttnBoundsError`), no traceback, and no file touched but the output path. Every statement the
loader accepts must read the same in float (what the search sees) and in interval arithmetic (what the
certifier sees) on real instances. The campaign scales with the hypothesis profile (:func:`examples`):
``ci`` (the default run) draws 30 cases per test, ``thorough`` (``ATTNBOUNDS_PROFILE=thorough``) 400, and
``-m slow`` adds the real search on accepted statements.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import shutil
import stat
import tempfile
import threading
import time
import unicodedata
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest
import sympy as sp
import torch
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as hs

import attnbounds
import attnbounds.theory.running.verify as verify_mod
from tests._fakesearch import no_proof, random_search, scripted
from attnbounds.theory.io import userbounds
from attnbounds.theory.mathematics import families, registry
from attnbounds.theory.deciding.certify import certify
from attnbounds.theory.running.cli import main
from attnbounds.theory.mathematics.errors import AttnBoundsError
from attnbounds.theory.mathematics.normalisers import CONSTRUCTORS
from attnbounds.theory.mathematics.quantities import QUANTITIES

#: seconds one case may take (loading a file; one command with the stand-in search): they take well under a second,
#: and a statement's load-time limit is 10 s; the bound catches hangs, far above what a loaded machine needs
TIME_LIMIT = 120.0
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "user_bounds.toml"


def examples(factor: float = 1.0) -> int:
    """Cases per fuzz test: ``factor`` times the hypothesis profile's budget (ci: 30, thorough: 400)."""
    return max(1, int(factor * settings().max_examples))


FUZZ = dict(deadline=None, suppress_health_check=list(HealthCheck))

# -- the grammar of statements files -----------------------------------------------------------------------------
PER_INSTANCE = sorted(n for n, q in QUANTITIES.items() if q.shape == "B")
PER_TOKEN = sorted(n for n, q in QUANTITIES.items() if q.shape == "BL")
PER_SELECTED = sorted(n for n, q in QUANTITIES.items() if q.shape == "BN")
PARAMETERS = list(userbounds.PARAMETERS)
HYPOTHESES = sorted(userbounds.hypothesis_catalogue())
JUNK_NAMES = ["i", "foo", "__import__", "lambda", "os", "exec", "x.real", "d_1.conjugate()", "'text'", "[1]", "I",
              "oo", "zoo", "nan", "sin", "Integer", "Symbol", "eval", "1j", "`", "$", ";", "\\", "xi[i]"]
SPECIAL_NUMBERS = ["0", "1", "-1", "2", "0.5", "1e300", "1e-300", "1e308", "1e309", "1e-400", "10**10**10", "9**9**9",
                   "2**1024", "2**-1074", "Rational(1, 3)", "Rational(1, 0)", "0**-1", "(-1)**0.5", "-0.0", "1_000",
                   "Rational(1, 10**300)**1024", "(3/2)**1000", "Rational(1, 3)**600", "exp(709)", "exp(-1000)"]


def _number(hostile: bool) -> hs.SearchStrategy[str]:
    plain = hs.one_of(hs.integers(-20, 20).map(str), hs.sampled_from(["0.5", "1.5", "1e-3", "100", "Rational(1, 3)"]))
    if not hostile:
        return plain
    return hs.one_of(plain, hs.sampled_from(SPECIAL_NUMBERS), hs.floats(allow_nan=False, allow_infinity=False).map(repr))


def _atom(hostile: bool, extra: tuple[str, ...] = ()) -> hs.SearchStrategy[str]:
    clean = [hs.sampled_from(PER_INSTANCE), hs.sampled_from(PER_TOKEN), hs.sampled_from(["T", "L", "N", "pi", "E"]),
             _number(hostile)]
    if extra:
        clean.append(hs.sampled_from(extra))
    if hostile:
        clean += [hs.sampled_from(PARAMETERS), hs.sampled_from(JUNK_NAMES)]
    return hs.one_of(*clean)


def _sum(children: hs.SearchStrategy[str], hostile: bool) -> hs.SearchStrategy[str]:
    body = hs.one_of(hs.sampled_from(PER_SELECTED).map(lambda q: f"{q}[i]"), children,
                     hs.tuples(hs.sampled_from(PER_SELECTED), children).map(lambda t: f"({t[0]}[i] * {t[1]})"))
    wrong = ["(i, 0, N)", "(i, 1, L)", "(i, 1, 3)", "(j, 1, N)", "(i, N, 1)"] if hostile else []
    return hs.tuples(body, hs.sampled_from(["(i, 1, N)"] * 6 + wrong)).map(lambda t: f"Sum({t[0]}, {t[1]})")


def _extender(hostile: bool) -> Any:
    functions = ["exp", "log", "sqrt", "Abs", "abs", "Min", "Max", "min", "max"] + (["Rational"] if hostile else [])

    def extend(children: hs.SearchStrategy[str]) -> hs.SearchStrategy[str]:
        return hs.one_of(
            hs.tuples(children, hs.sampled_from(["+", "-", "*", "/", "**"]), children).map(
                lambda t: f"({t[0]} {t[1]} {t[2]})"),
            hs.tuples(hs.sampled_from(functions), hs.lists(children, min_size=0 if hostile else 1, max_size=3)).map(
                lambda t: f"{t[0]}({', '.join(t[1])})" if t[0] in ("Min", "Max", "min", "max") or not t[1]
                else f"{t[0]}({t[1][0]})"),
            children.map(lambda c: f"-{c}"),
            _sum(children, hostile),
        )

    return extend


def expressions(hostile: bool, extra: tuple[str, ...] = ()) -> hs.SearchStrategy[str]:
    return hs.recursive(_atom(hostile, extra), _extender(hostile), max_leaves=8)


def relations(hostile: bool, extra: tuple[str, ...] = ()) -> hs.SearchStrategy[str]:
    e = expressions(hostile, extra)
    ops = ["<=", ">="] + (["<", "==", "!="] if hostile else [])
    single = hs.tuples(e, hs.sampled_from(ops), e).map(" ".join)
    out = hs.one_of(single, single, hs.lists(single, min_size=2, max_size=3).map(lambda rs: " & ".join(f"({r})" for r in rs)))
    return hs.one_of(out, e, hs.text(max_size=30)) if hostile else out


def any_relation() -> hs.SearchStrategy[str]:
    """Three in four drawn from the clean grammar (they mostly parse), the rest hostile."""
    return hs.one_of(relations(False), relations(False), relations(False), relations(True))


def _value() -> hs.SearchStrategy[Any]:
    """TOML values of every type (for keys that expect another one)."""
    return hs.one_of(hs.text(max_size=12), hs.integers(-2**63, 2**63 - 1), hs.floats(), hs.booleans(),
                     hs.lists(hs.integers(), max_size=2), hs.dictionaries(hs.sampled_from(["a", "b"]), hs.integers(),
                                                                          max_size=2))


@hs.composite
def statement_tables(draw: Any, k: int) -> dict[str, Any]:
    """A ``[[statement]]`` table: well-formed (three in four) or hostile in its keys, types and expressions."""
    if draw(hs.sampled_from([True, True, True, False])):
        table: dict[str, Any] = {"id": f"fuzz.{k}", "relation": draw(relations(False))}
        if draw(hs.booleans()):
            table["hypotheses"] = draw(hs.lists(hs.sampled_from(HYPOTHESES), unique=True, max_size=2))
        if draw(hs.sampled_from([False, False, False, True])):
            table["defaults"] = {"c0": draw(hs.sampled_from([0.5, 2, "abar_N", "T"]))}
            table["relation"] = f"({table['relation']}) & (c0 >= 0)" if draw(hs.booleans()) else table["relation"]
        return table
    aliases = draw(hs.dictionaries(hs.sampled_from(["D", "X", "exp", "i", "T", "1x", "d_1"]),
                                   hs.one_of(hs.sampled_from(sorted(QUANTITIES)), _value()), max_size=2))
    defaults = draw(hs.dictionaries(hs.sampled_from(["a", "c0", "T", "N", "i", "sqrt", "alpha_i"]),
                                    hs.one_of(hs.floats(), hs.integers(), hs.sampled_from(sorted(QUANTITIES)), _value()),
                                    max_size=2))
    declared = draw(hs.lists(hs.sampled_from(["c0", "c1", "lambda", "i", "exp", "b"]), max_size=2))
    extra = tuple(n for n in (*aliases, *defaults, *declared) if isinstance(n, str))
    table = {"id": draw(hs.one_of(hs.just(f"fuzz.{k}"), hs.text(max_size=8), _value()))}
    form = draw(hs.sampled_from(["relation", "relation", "relation", "lhs-rhs", "both", "none"]))
    if form in ("relation", "both"):
        table["relation"] = draw(hs.one_of(relations(True, extra), relations(False, extra), _value()))
    if form in ("lhs-rhs", "both"):
        table["lhs"], table["rhs"] = draw(expressions(True, extra)), draw(expressions(False, extra))
    optional = {
        "hypotheses": hs.one_of(hs.lists(hs.sampled_from([*HYPOTHESES, "nope"]), max_size=3), _value()),
        "where": hs.just(aliases), "defaults": hs.just(defaults), "parameters": hs.one_of(hs.just(declared), _value()),
        "kind": hs.one_of(hs.sampled_from(["deterministic", "expectation", "probable"]), _value()),
        "title": hs.one_of(hs.text(max_size=20), _value()), "citation": hs.text(max_size=20),
        "notes": hs.text(max_size=20), "expectation_over": hs.text(max_size=10), "colour": _value(),
    }
    for key in draw(hs.lists(hs.sampled_from(sorted(optional)), unique=True, max_size=5)):
        table[key] = draw(optional[key])
    return table


@hs.composite
def normaliser_tables(draw: Any) -> dict[str, Any]:
    params = draw(hs.dictionaries(hs.sampled_from(["T", "b", "c", "l", "sigmoid", "exp"]),
                                  hs.one_of(hs.floats(), hs.integers(-5, 5), _value()), max_size=2))
    names = ["l", "L", "softplus(l)", "sigmoid(l)", *[p for p in params if isinstance(p, str)]]
    table = {"name": draw(hs.one_of(hs.sampled_from(["mine", "softmax", "x-y", "tilt"]), _value())),
             "log_F": draw(hs.one_of(hs.recursive(hs.one_of(hs.sampled_from(names), _number(True)), _extender(True),
                                                  max_leaves=6), _value())),
             "params": params}
    return {k: v for k, v in table.items() if draw(hs.booleans()) or k != "params"}


@hs.composite
def documents(draw: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {}
    n = draw(hs.sampled_from([1, 1, 1, 2, 2, 3, 0]))
    if n:
        doc["statement"] = [draw(statement_tables(k)) for k in range(n)]
    if draw(hs.sampled_from([False, False, False, True])):
        doc["normaliser"] = [draw(normaliser_tables()) for _ in range(draw(hs.integers(1, 2)))]
    if draw(hs.sampled_from([False] * 9 + [True])):
        doc[draw(hs.sampled_from(["title", "statement", "normaliser"]))] = draw(_value())
    return doc


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "nan" if v != v else ("inf" if v == float("inf") else "-inf" if v == -float("inf") else repr(v))
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return "{" + ", ".join(f"{json.dumps(str(k))} = {_toml_value(x)}" for k, x in v.items()) + "}"


def to_toml(doc: dict[str, Any]) -> str:
    """TOML text of a document: arrays of tables as ``[[name]]`` blocks, anything else inline."""
    lines = []
    for key, value in doc.items():
        if isinstance(value, list) and value and all(isinstance(t, dict) for t in value):
            for table in value:
                lines.append(f"[[{key}]]")
                lines += [f"{json.dumps(str(k))} = {_toml_value(v)}" for k, v in table.items()]
        else:
            lines.insert(0, f"{json.dumps(key)} = {_toml_value(value)}")
    return "\n".join(lines) + "\n"


@hs.composite
def statements_files(draw: Any) -> bytes:
    """Mostly well-formed TOML from the grammar; sometimes mutated, truncated or raw bytes."""
    text = to_toml(draw(documents())).encode("utf-8")
    how = draw(hs.sampled_from(["as is"] * 12 + ["mutated", "truncated", "bytes"]))
    if how == "mutated":
        at = draw(hs.integers(0, len(text)))
        text = text[:at] + draw(hs.binary(min_size=1, max_size=8)) + text[at:]
    elif how == "truncated":
        text = text[:draw(hs.integers(0, len(text)))]
    elif how == "bytes":
        text = draw(hs.binary(max_size=200))
    return text


def clean_files() -> hs.SearchStrategy[bytes]:
    """One statement from the clean grammar (it mostly loads), with or without hypotheses."""
    return hs.tuples(relations(False), hs.lists(hs.sampled_from(HYPOTHESES), unique=True, max_size=2)).map(
        lambda t: to_toml({"statement": [{"id": "fuzz", "relation": t[0], "hypotheses": t[1]}]}).encode())


# -- properties --------------------------------------------------------------------------------------------------
#: what a certificate says when the certifier cannot read the formula itself (not a quantity or precision limit)
FORMULA_UNSUPPORTED = ("cannot evaluate", "no value for symbol", "not a value per selected token", "Sum must run")


def agree_on_real_instances(statement: Any, seed: int = 0) -> int:
    """Float evaluation and certification read ``statement`` alike on a few small real instances; returns how
    many instances were compared."""
    rng = np.random.default_rng(seed)
    estimates = any(QUANTITIES[q].estimate for q in statement.bindings.values())
    compared = 0
    for _ in range(2):
        try:
            inst = families.build(statement, families.random_spec(rng, statement, B=2, max_L=5).with_(mc_draws=100))
            ev = statement.evaluate(inst)
        except AttnBoundsError:  # a parameter no family provides, weights undefined on the draw, ...
            continue
        for b in np.flatnonzero(ev.applicable & np.isfinite(ev.margin)):
            cert = certify(statement, inst, int(b))
            notes = " ".join(cert.notes)
            assert not any(s in notes for s in FORMULA_UNSUPPORTED), f"{statement}: the certifier cannot read it: {notes}"
            if estimates or cert.status not in ("holds", "violated") or not np.isfinite(cert.scale):
                continue
            tol = 1e-6 * max(cert.scale, abs(ev.lhs[b]), abs(ev.rhs[b]))
            assert cert.margin_lo - tol <= ev.margin[b] <= cert.margin_hi + tol, (
                f"{statement}: float margin {ev.margin[b]!r}, certified [{cert.margin_lo!r}, {cert.margin_hi!r}]")
            compared += 1
    return compared


@contextlib.contextmanager
def family_restored() -> Iterator[None]:
    saved = dict(CONSTRUCTORS)
    try:
        yield
    finally:
        CONSTRUCTORS.clear()
        CONSTRUCTORS.update(saved)


@settings(max_examples=examples(), **FUZZ)
@given(content=statements_files())
def test_statements_files_are_accepted_or_refused_quickly_and_read_alike(content: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder, family_restored():
        path = Path(folder) / "mine.toml"
        path.write_bytes(content)
        start = time.perf_counter()
        try:
            loaded = userbounds.load_statements(path)
        except AttnBoundsError as exc:
            assert str(exc) and "Traceback" not in str(exc)
            loaded = None
        assert time.perf_counter() - start < TIME_LIMIT
        assert sorted(os.listdir(folder)) == ["mine.toml"]
        event("refused" if loaded is None else f"accepted {len(loaded.statements)} statement(s)")
        for statement in [] if loaded is None else loaded.statements:
            event(f"compared on {agree_on_real_instances(statement)} instance(s)")


@settings(max_examples=examples(), **FUZZ)
@given(relation=any_relation())
@example(
    relation='(-sqrt((N - A_norm)) <= A_norm) & (-15 <= -exp(Sum((C_other[i] * L), (i, 1, N))))',
)  # a NaN first conjunct (sqrt of a negative) once hid behind the second's margin; arb read the root as 0
def test_accepted_relations_read_alike_in_float_and_in_balls(relation: str) -> None:
    """The expression grammar alone, through the loader's relation key (most cases parse)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "mine.toml"
        path.write_text(to_toml({"statement": [{"id": "fuzz", "relation": relation, "hypotheses": ["simplex"]}]}))
        start = time.perf_counter()
        try:
            statement = userbounds.load_statements(path, register=False).statements[0]
        except AttnBoundsError:
            statement = None
        assert time.perf_counter() - start < TIME_LIMIT
        event("refused" if statement is None else "accepted")
        if statement is not None:
            event(f"compared on {agree_on_real_instances(statement)} instance(s)")


# -- the command line ---------------------------------------------------------------------------------------------
def _workspace(root: Path) -> None:
    """Files a command line may name: good and bad statements and records files, a folder, a FIFO, links."""
    shutil.copy(EXAMPLE, root / "good.toml")
    (root / "binary.toml").write_bytes(bytes(range(256)))
    (root / "folder").mkdir()
    (root / "afile").write_text("x")
    os.mkfifo(root / "fifo")
    os.symlink("/dev/null", root / "devnull-link")
    os.symlink(root / "afile", root / "file-link")
    (root / "garbage.json").write_text("[{\"id\": 3}]")
    (root / "doc.md").write_text("# doc\n<!-- verdict table: generated by `attnbounds table RECORDS --readme README.md`;"
                                 " do not edit -->\n<!-- end of verdict table -->\n")


def _snapshot(root: Path) -> dict[str, tuple]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            info = os.lstat(p)
            out[str(p.relative_to(root))] = (stat.S_IFMT(info.st_mode), info.st_size, info.st_mtime_ns)
    return out


PATHS = ["good.toml", "binary.toml", "folder", "afile", "fifo", "devnull-link", "file-link", "garbage.json",
         "records.json", "missing.toml", "folder/new.json", "afile/below.json", "new/deep/out.json", "/dev/null", "",
         "doc.md", "gen.toml", "-", "--quiet"]
IDS = ["lemma1", "multihead", "corollary3[spectral]", "user.naive-context-distance", "fuzz.0", "nope", "[", ""]


@hs.composite
def command_lines(draw: Any) -> list[str]:
    command = draw(hs.sampled_from(["verify", "verify", "search", "cite", "list", "table", "prove", "empirical",
                                    "bogus", ""]))
    if command in ("prove", "empirical"):  # their own parsers; only cases that end before real work
        return [command, draw(hs.sampled_from(["--help", "--bogus", "--out"]))]
    argv = [command] if command else []
    numbers = hs.one_of(_number(True), hs.sampled_from(["nan", "inf", "-inf", "1e308", "86400", "86401", "abc", "0x10"]))
    options = {
        "--budget": numbers, "--seed": hs.one_of(hs.integers(-5, 2**70).map(str), numbers),
        "--statements": hs.sampled_from(PATHS), "--json": hs.sampled_from(PATHS), "--records": hs.sampled_from(PATHS),
        "--readme": hs.sampled_from(PATHS), "--quiet": hs.none(), "--short": hs.none(), "--bogus": hs.none(),
    }
    if command in ("verify", "search", "cite") and draw(hs.booleans()):
        argv += ["--budget", "0.5"]  # the stand-in search ignores it; other cases draw their own
    for key in draw(hs.lists(hs.sampled_from(sorted(options)), unique=True, max_size=4)):
        value = draw(options[key])
        argv += [key] if value is None else [key, value]
    if command in ("search", "cite", "table"):
        argv.insert(1, draw(hs.sampled_from(IDS if command != "table" else PATHS)))
    elif command in ("verify", "list"):
        argv[1:1] = draw(hs.lists(hs.sampled_from(IDS), max_size=2))
    return argv


def _stand_in_search(statement: Any, **kwargs: Any) -> Any:
    """The small random search on the user's statements (so their certificates are exercised), nothing on the
    paper's (their verdicts are not what this fuzzes)."""
    if statement.id in registry.ids():
        return scripted([])(statement, **kwargs)
    return random_search(statement, rounds=1, B=8, **kwargs)


@settings(max_examples=examples(0.3), **FUZZ)  # 3-5 s a case: 0.3 of the profile's budget (thorough: 120)
@given(argv=command_lines(), generated=statements_files())
def test_command_lines_end_in_time_with_0_or_2_and_touch_only_their_output(argv: list[str], generated: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder, family_restored(), pytest.MonkeyPatch.context() as mp:
        root = Path(os.path.realpath(folder)) / "ws"
        root.mkdir()
        _workspace(root)
        (root / "gen.toml").write_bytes(generated)
        mp.setattr(verify_mod, "default_search", lambda: _stand_in_search)
        mp.setattr(verify_mod, "default_prover", no_proof)
        mp.setenv("ATTNBOUNDS_CACHE", str(Path(folder) / "cache"))
        mp.chdir(root)
        records = root / "records.json"
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            assert main(["verify", "multihead", "--quiet", "--json", str(records)]) == 0
        before = _snapshot(root)
        out, err = io.StringIO(), io.StringIO()
        start = time.perf_counter()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exc:  # argparse: --help (0) and usage errors (2)
                code = exc.code
        elapsed = time.perf_counter() - start
        event(f"{argv[0] if argv else 'no command'}: exit {code}")
        assert code in (0, 2), (argv, code, err.getvalue()[-2000:])
        assert "Traceback" not in err.getvalue(), (argv, err.getvalue()[-2000:])
        assert elapsed < TIME_LIMIT, (argv, elapsed)
        allowed: set[str] = set()  # the outputs named, and the folders made for them
        for k, option in enumerate(argv[:-1]):
            target = Path(os.path.realpath(root / argv[k + 1]))
            if option in ("--json", "--readme") and argv[k + 1] and root in target.parents:
                rel = target.relative_to(root)
                allowed |= {str(rel), *(str(a) for a in rel.parents if str(a) != ".")}
        after = _snapshot(root)
        changed = {p for p in set(before) | set(after) if before.get(p) != after.get(p)}
        assert changed <= allowed, (argv, changed - allowed)
        assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


@pytest.mark.slow
@settings(max_examples=examples(0.2), **FUZZ)
@given(content=hs.one_of(clean_files(), clean_files(), statements_files()))
def test_accepted_statements_survive_the_real_search(content: bytes) -> None:
    """The real search (random, gradient through torch, hypothesis, shrinking) on accepted statements: any internal
    error it meets makes the verdict UNDECIDED (never VERIFIED), and nothing crashes the record."""
    from attnbounds.theory.running.verify import verify_statement

    with tempfile.TemporaryDirectory() as folder, family_restored():
        path = Path(folder) / "mine.toml"
        path.write_bytes(content)
        try:
            loaded = userbounds.load_statements(path)
        except AttnBoundsError:
            event("refused")
            return
        for statement in loaded.statements:
            record = verify_statement(statement, budget_s=0.05, source="user", prover=no_proof)
            event(record.verdict)
            assert record.verdict != "ERROR", record.reason
            errors = any(isinstance(i, dict) and i.get("errors") for i in record.data["search"]["by_method"].values())
            assert not (errors and record.verdict == "VERIFIED"), record.reason


# -- Python statements ---------------------------------------------------------------------------------------------
#: names a Python statement may bind or use, among them look-alikes that Python's parser folds into plain names
PY_NAMES = ["alpha_i", "alpha_max", "L", "T", "N", "c0", "ᵀ", "𝐋", "ａlpha_i", "ﬁ"]


@hs.composite
def python_statements(draw: Any) -> str:
    """A trusted ``.py`` statements file building one :class:`Statement` in Python: a relation from the grammar
    (strict ones included) over symbols that may be look-alikes, bindings and defaults that may not match."""
    relation = draw(relations(False)).replace("<=", draw(hs.sampled_from(["<=", "<"])))
    relation = relation.replace(">=", draw(hs.sampled_from([">=", ">"])))
    bound = draw(hs.lists(hs.sampled_from([*PER_INSTANCE, *PER_TOKEN]), unique=True, min_size=1, max_size=3))
    aliases = draw(hs.dictionaries(hs.sampled_from(PY_NAMES), hs.sampled_from(sorted(QUANTITIES)), max_size=1))
    defaults = draw(hs.dictionaries(hs.sampled_from(["c0", "ᵀ", "T"]), hs.sampled_from([0.5, 2.0]), max_size=1))
    if aliases:
        relation = f"({relation}) & ({next(iter(aliases))} >= 0)"
    bindings = {**{q: q for q in bound}, **aliases}
    return (
        "import sympy as sp\n"
        "from attnbounds.theory.mathematics.statement import Citation, Statement\n"
        f"names = {{n: sp.Symbol(n, real=True) for n in {sorted({*QUANTITIES, *PY_NAMES, *defaults})!r}}}\n"
        f"relation = sp.sympify({relation!r}, locals=names)\n"
        f"STATEMENTS = [Statement('fuzz.py', 'fuzz', relation, Citation('fuzz'), bindings={bindings!r}, "
        f"defaults={defaults!r})]\n")


@settings(max_examples=examples(0.5), **FUZZ)
@given(source=python_statements())
def test_python_statements_are_accepted_or_refused_and_read_alike(source: str) -> None:
    """A Python statement is checked as a TOML one is: look-alike names refused, strict relations kept strict,
    accepted statements read alike in float and in balls; never a traceback."""
    with tempfile.TemporaryDirectory() as folder, family_restored():
        path = Path(folder) / "mine.py"
        path.write_text(source, encoding="utf-8")
        try:
            loaded = userbounds.load_statements(path)
        except AttnBoundsError as exc:
            assert str(exc) and "Traceback" not in str(exc)
            event("refused")
            return
        statement = loaded.statements[0]
        names = {str(s) for s in statement.relation.free_symbols} | set(statement.bindings) | set(statement.defaults)
        assert all(unicodedata.normalize("NFKC", n) == n for n in names), names
        written = list(statement.relation.args) if isinstance(statement.relation, sp.And) else [statement.relation]
        assert statement.strict == tuple(isinstance(r, (sp.StrictLessThan, sp.StrictGreaterThan)) for r in written)
        event(f"accepted ({'strict' if any(statement.strict) else 'not strict'}), compared on "
              f"{agree_on_real_instances(statement)} instance(s)")


# -- callables -----------------------------------------------------------------------------------------------------
@dataclasses.dataclass
class Misbehaving:
    """A torch normaliser that misbehaves in one drawn way: softmax of ``scale * l / T`` (``clip``: logits clipped
    at +-clip first), written in place or not, its output off the autograd graph or not, and failing (raising,
    NaN, float32, a list, blocking) beyond a row length, below a temperature or after some calls."""

    scale: float = 1.0
    clip: float | None = None
    inplace: str | None = None
    off_graph: bool = False
    failure: str | None = None
    when: tuple[str, float] = ("L>", 64)
    calls: int = 0
    failed: int = 0  # calls that failed on purpose (after loading: loading refuses a function that fails)

    def hit(self, logits: Any, T: Any) -> bool:
        kind, at = self.when
        if kind == "L>":
            return logits.shape[-1] > at
        if kind == "T<":
            return bool((torch.as_tensor(T) < at).any())
        return self.calls > at

    def __call__(self, logits: Any, T: Any) -> Any:
        self.calls += 1
        x = logits  # the in-place variants write into the tensor they are given (the map stays the same)
        if self.clip:
            x = x.clamp_(-self.clip, self.clip) if self.inplace else x.clamp(-self.clip, self.clip)
        z = x.div_(T).mul_(self.scale) if self.inplace == "div_" else x * self.scale / T
        w = torch.softmax(z, dim=-1)
        if self.inplace == "scribble":
            logits.add_(1000.0)  # after use: only a caller that shares the tensor would notice
        if self.off_graph:
            w = w.detach()
        if self.failure and self.hit(z, T):
            self.failed += 1
            if self.failure == "raise":
                raise RuntimeError("misbehaving on purpose")
            if self.failure == "block":
                BLOCKED.wait()
            return {"nan": w * float("nan"), "float32": w.to(torch.float32), "list": w.tolist()}[self.failure]
        return w


BLOCKED = threading.Event()


def _relations() -> list[tuple[str, dict[str, Any], Any]]:
    """(relation, keywords, truth(m) -> True/False/None for a clean Misbehaving m, numpy margin from weights)."""
    floor = dict(hypotheses=["logits-bounded"], defaults={"a": "logit_absmax"})
    return [
        ("alpha_i <= 1", {}, lambda m: True, lambda w, lg, T: 1 - w.max()),
        ("alpha_max <= 0.9", {}, lambda m: False, lambda w, lg, T: 0.9 - w.max()),
        ("alpha_i*L >= exp(-2*a/T)", floor, lambda m: m.scale <= 1 and not m.clip or None,
         lambda w, lg, T: (w * w.size - np.exp(-2 * np.abs(lg).max() / T)).min()),
        ("alpha_i*L >= exp(-2*Min(a, 8)*2/T)", floor, lambda m: (m.clip == 8 and m.scale <= 2) or None,
         lambda w, lg, T: (w * w.size - np.exp(-4 * min(np.abs(lg).max(), 8) / T)).min()),
        ("alpha_max < 1", {}, lambda m: None, lambda w, lg, T: 1 - w.max()),
        ("J_row <= 1/T", {}, lambda m: True if m.scale <= 1 and not m.clip else None, None),
    ]


@hs.composite
def misbehaving(draw: Any) -> tuple[Misbehaving, str | None]:
    m = Misbehaving(scale=draw(hs.sampled_from([1.0, 1.0, 0.5, 2.0])), clip=draw(hs.sampled_from([None, None, 8.0])),
                    inplace=draw(hs.sampled_from([None, "div_", "scribble"])), off_graph=draw(hs.booleans()),
                    failure=draw(hs.sampled_from([None, None, "raise", "nan", "float32", "list", "block"])),
                    when=draw(hs.sampled_from([("L>", 64), ("L>", 300), ("T<", 1e-3), ("calls", 120)])))
    log_F = draw(hs.sampled_from([None, None, f"{m.scale}*l/T", "l/T"]))  # "l/T" mismatches scale 2 and clipping
    return m, log_F


@settings(max_examples=examples(0.3), **FUZZ)
@given(case=misbehaving(), which=hs.integers(0, len(_relations()) - 1), seed=hs.integers(0, 3))
def test_misbehaving_callables_end_in_a_verdict_about_themselves(case: tuple[Misbehaving, str | None], which: int,
                                                                 seed: int) -> None:
    """Accepted or refused (InvalidArgument) when loaded, never a traceback or an ERROR record; a REFUTED holds
    against the function itself, recomputed here; a failure the search must meet is never VERIFIED; a bound true
    of the function is never REFUTED; an autograd Jacobian of an output off the graph is refused."""
    from attnbounds.theory.mathematics import callables
    from attnbounds.theory.io.serialize import float_from_json

    fn, log_F = case
    relation, kwargs, truth, margin_of = _relations()[which]
    normaliser: Any = fn if log_F is None else {"name": "mis", "torch": fn, "log_F": log_F}
    with family_restored(), pytest.MonkeyPatch.context() as mp:
        mp.setattr(callables, "CALL_SECONDS", 0.2)
        try:
            record = attnbounds.check(relation, normaliser=normaliser, budget=0.2, seed=seed, **kwargs)
        except AttnBoundsError as exc:
            assert "Traceback" not in str(exc)
            event("refused when loaded")
            return
    event(f"{record.verdict}{'' if record.certified else ' (float only)'}")
    assert record.verdict != "ERROR", record.reason
    # without log_F the Jacobian is autograd's (refused off the graph); with it, the formula's (the weights agree)
    assert not (fn.off_graph and log_F is None and relation.startswith("J_")), "a Jacobian off the graph was accepted"
    clean = fn.failure is None
    if fn.failed:  # the function failed during the run (loading would have refused a failure it met)
        assert record.verdict != "VERIFIED", ("a failure met during the run was not named", record.reason)
    if clean and truth(fn) is True:
        assert record.verdict != "REFUTED", record.reason
    if record.verdict == "REFUTED" and margin_of is not None and record.counterexample is not None:
        inst = record.counterexample["instance"]
        logits = float_from_json(inst["logits"], "logits")[0]
        counts = inst.get("counts")
        dense = np.repeat(logits, counts[0]) if counts else logits
        T = float(np.asarray(float_from_json(inst["normaliser"]["params"]["T"], "T")).ravel()[0])
        fn.failure = None  # the function's own values there (its failures are not what is recomputed)
        with torch.no_grad():
            w = fn(torch.as_tensor(dense[None].copy()), T)[0].numpy()
        margin = margin_of(w, dense, T)
        scale = max(1.0, float(np.abs(w).max()))
        assert margin < 1e-9 * scale or (margin <= 0 and "<" in relation.replace("<=", "")), (
            f"REFUTED, but the function itself gives margin {margin!r} at the counterexample", record.reason)
