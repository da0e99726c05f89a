"""The ``attnbounds`` command: verify / search / cite / list, exit codes 0 (completed), 2 (bad input), 1 (internal)."""

import json
from pathlib import Path

import pytest

import attnbounds.theory.running.verify as verify_mod
from tests._fakesearch import no_proof, random_search
from attnbounds.theory.io import records as rec
from attnbounds.theory.running.cli import main
from attnbounds.theory.mathematics.normalisers import CONSTRUCTORS
from tests._signals import interruptible

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "user_bounds.toml"


@pytest.fixture(autouse=True)
def fake_search(monkeypatch):
    monkeypatch.setattr(verify_mod, "default_search", lambda: random_search)
    monkeypatch.setattr(verify_mod, "default_prover", no_proof)
    saved = dict(CONSTRUCTORS)
    yield
    CONSTRUCTORS.clear()
    CONSTRUCTORS.update(saved)  # a statements file registers its normalisers: undo it for the other tests


def test_verify_writes_valid_records_and_prints_a_table(tmp_path, capsys):
    out = tmp_path / "records.json"
    code = main(["verify", "theorem1.fixed[R1,g2]", "corollary3[spectral,corrected]", "--budget", "1", "--json",
                 str(out), "--quiet"])
    assert code == 0
    text = capsys.readouterr().out
    assert "theorem1.fixed[R1,g2]" in text and "REFUTED" in text and "best lhs/rhs" in text
    data = json.loads(out.read_text())
    assert [d["id"] for d in data] == ["theorem1.fixed[R1,g2]", "corollary3[spectral,corrected]"]
    assert all(rec.validate(d) == [] for d in data)


@pytest.mark.parametrize("argv, message", [
    (["verify", "no-such-reading", "--quiet"], "unknown statement id"),
    (["verify", "multihead", "--budget", "-3", "--quiet"], "budget"),
    (["search", "multihead", "--seed", "-1", "--quiet"], "seed"),
    (["verify", "--statements", "/nonexistent.toml", "--quiet"], "does not exist"),
    (["cite", "multihead", "--records", "/nonexistent.json"], "does not exist"),
])
def test_bad_input_exits_2_with_a_clear_message(argv, message, capsys):
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_argparse_errors_exit_2():
    with pytest.raises(SystemExit) as exc:
        main(["verify", "--budget", "lots"])
    assert exc.value.code == 2


def test_internal_error_exits_1(monkeypatch, capsys):
    def broken(statement, **kw):
        raise RuntimeError("boom")

    monkeypatch.setattr(verify_mod, "default_search", lambda: broken)
    assert main(["search", "multihead", "--quiet"]) == 1
    assert "internal error" in capsys.readouterr().err
    assert main(["verify", "multihead", "--quiet"]) == 1  # an ERROR record: written, reported, non-zero
    assert "ERROR in multihead" in capsys.readouterr().err


def test_search_prints_details(capsys):
    assert main(["search", "corollary3[frobenius]", "--budget", "1", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "searched" in out and "random" in out and "certificate" in out and '"format": "attnbounds.instance"' in out


def test_cite_from_records_and_by_running(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["verify", "corollary3[frobenius]", "--budget", "1", "--json", str(out), "--quiet"]) == 0
    record = rec.load_records(out)[0]
    capsys.readouterr()
    assert main(["cite", "corollary3[frobenius]", "--records", str(out)]) == 0
    text = capsys.readouterr().out
    assert record.content_hash in text and "@article{mudarisov2025limitations" in text and "CITATION.cff" in text
    assert main(["cite", "corollary3[frobenius]", "--budget", "1", "--quiet"]) == 0
    assert record.content_hash in capsys.readouterr().out  # same seed and budget: the same record
    assert main(["cite", "multihead", "--records", str(out)]) == 2


def test_list_still_works(capsys):
    assert main(["list", "--short"]) == 0
    assert "theorem1.fixed[R1,g1]" in capsys.readouterr().out


def test_user_statements_from_the_example_file(capsys):
    assert main(["verify", "--statements", str(EXAMPLE), "--budget", "1", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "user.naive-context-distance" in out and "REFUTED" in out and "user.softmax-jacobian-half" in out


# -- hardening: files, budgets, caches, interrupts -------------------------------------------------------------------
import os  # noqa: E402
import signal  # noqa: E402
import stat  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNBOUNDS_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _refuses_before_searching(argv, monkeypatch, capsys, message):
    def never(statement, **kw):
        raise AssertionError("the search ran although the output path is unusable")

    monkeypatch.setattr(verify_mod, "default_search", lambda: never)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err, err


@pytest.mark.parametrize("make, message", [
    (lambda d: "/dev/null", "is a character device"),
    (lambda d: (os.mkfifo(d / "fifo"), d / "fifo")[1], "is a FIFO"),
    (lambda d: ((d / "folder").mkdir(), d / "folder")[1], "is a directory"),
    (lambda d: ((d / "file").write_text("x"), d / "file" / "r.json")[1], "is a file, not a folder"),
    (lambda d: ((d / "file").write_text("x"), d / "file" / "sub" / "r.json")[1], "is a file, not a folder"),
    (lambda d: (os.symlink("/dev/null", d / "link"), d / "link")[1], "(-> '/dev/null') is a character device"),
    (lambda d: (os.symlink(d, d / "loop"), d / "loop")[1], "is a directory"),
    (lambda d: "", "expected a file path"),
    (lambda d: "/proc/version", "cannot create files in '/proc'"),
    (lambda d: d / ("x" * 300 + ".json"), "File name too long"),
])
def test_json_targets_that_are_not_regular_files_are_refused_before_the_search(tmp_path, monkeypatch, capsys, cache,
                                                                               make, message):
    target = make(tmp_path)
    _refuses_before_searching(["verify", "multihead", "--quiet", "--json", str(target)], monkeypatch, capsys, message)
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)  # never replaced by a regular file


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_unwritable_json_targets_are_refused_before_the_search(tmp_path, monkeypatch, capsys, cache):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    readonly = tmp_path / "readonly.json"
    readonly.write_text("[]")
    readonly.chmod(0o400)
    try:
        _refuses_before_searching(["verify", "multihead", "--quiet", "--json", str(locked / "r.json")], monkeypatch,
                                  capsys, "cannot create files in")
        _refuses_before_searching(["verify", "multihead", "--quiet", "--json", str(readonly)], monkeypatch, capsys,
                                  "is read-only")
    finally:
        locked.chmod(0o700)


def test_json_through_a_symlink_replaces_the_file_it_points_to(tmp_path, cache, capsys):
    real = tmp_path / "runs" / "latest.json"
    real.parent.mkdir()
    real.write_text("old")
    link = tmp_path / "records.json"
    link.symlink_to(real)
    dangling = tmp_path / "new.json"
    dangling.symlink_to(tmp_path / "fresh" / "made.json")
    assert main(["verify", "multihead", "--budget", "1", "--quiet", "--json", str(link)]) == 0
    assert main(["verify", "multihead", "--budget", "1", "--quiet", "--json", str(dangling)]) == 0
    assert link.is_symlink() and dangling.is_symlink()  # links stay links
    assert [r.id for r in rec.load_records(real)] == ["multihead"] == [r.id for r in rec.load_records(tmp_path / "fresh" / "made.json")]
    assert sorted(p.name for p in real.parent.iterdir()) == ["latest.json"]  # no temporary file left behind


def test_concurrent_writers_each_leave_a_whole_file(tmp_path):
    from attnbounds.theory.io import atomic
    from concurrent.futures import ThreadPoolExecutor

    target = tmp_path / "shared.json"
    payloads = [[k] * 20000 for k in range(8)]
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda p: atomic.write_json(target, p), payloads))
    assert json.loads(target.read_text()) in payloads  # one writer's output, whole
    assert [p.name for p in tmp_path.iterdir()] == ["shared.json"]


@pytest.mark.parametrize("argv, message", [
    (["verify", "multihead", "--budget", "1e308", "--quiet"], "at most a day"),
    (["verify", "multihead", "--budget", "1e300", "--quiet"], "at most a day"),
    (["verify", "multihead", "--budget", "inf", "--quiet"], "at most a day"),
    (["search", "multihead", "--budget", "nan", "--quiet"], "at most a day"),
    (["cite", "multihead", "--budget", "90000", "--quiet"], "at most a day"),
    (["verify", "--statements", "", "--quiet"], "expected a path"),
])
def test_budgets_and_paths_out_of_range_exit_2_at_once(argv, message, capsys, cache, monkeypatch):
    _refuses_before_searching(argv, monkeypatch, capsys, message)  # at once: before any search starts


def test_unreadable_input_files_exit_2_without_a_traceback(tmp_path, capsys, cache):
    binary = tmp_path / "b.toml"
    binary.write_bytes(bytes(range(256)))
    records = tmp_path / "r.json"
    records.write_bytes(b'[{"id": "caf\xe9"}]')
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100000 + "]" * 100000)
    os.mkfifo(tmp_path / "fifo.json")
    cases = [(["verify", "--statements", str(binary), "--quiet"], "not UTF-8 text"),
             (["verify", "--statements", str(tmp_path), "--quiet"], "is a directory"),
             (["cite", "multihead", "--records", str(records)], "not UTF-8 text"),
             (["cite", "multihead", "--records", str(deep)], "nests JSON too deeply"),
             (["cite", "multihead", "--records", str(tmp_path / "fifo.json")], "is a FIFO"),
             (["table", str(tmp_path)], "is a directory")]
    for argv, message in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, (argv, err)


def test_an_unusable_cache_exits_2(tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where the cache folder should be")
    for root in (blocker, blocker / "below"):
        monkeypatch.setenv("ATTNBOUNDS_CACHE", str(root))
        assert main(["verify", "multihead", "--budget", "1", "--quiet"]) == 2
        assert "$ATTNBOUNDS_CACHE" in capsys.readouterr().err
        assert main(["empirical", "--model", "tiny", "--out", str(tmp_path / "out"), "--quick"]) == 2
        err = capsys.readouterr().err
        assert "$ATTNBOUNDS_CACHE" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def _clean_env(cache: Path) -> dict:
    return {**os.environ, "ATTNBOUNDS_CACHE": str(cache), "PYTHONPATH": str(Path(__file__).resolve().parents[2])}


def test_verify_leaves_no_hypothesis_folder_where_it_runs(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    run = subprocess.run([sys.executable, "-m", "attnbounds.theory.running.cli", "verify", "theorem1.fixed[R1,g2]", "--budget",
                          "0.1", "--quiet"], cwd=work, env=_clean_env(tmp_path / "cache"), capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert list(work.iterdir()) == []  # hypothesis keeps its files in the cache
    assert (tmp_path / "cache" / "hypothesis").is_dir()


@pytest.mark.parametrize("delay", [0.3, 1.0, 2.5])
def test_ctrl_c_at_any_time_exits_130_without_a_traceback(tmp_path, delay):
    """Start-up (heavy imports, parsing, loading) included; only Python's own first milliseconds are Python's.
    (-SIGINT: Python re-raises the signal at exit when an import it ran saw the interrupt; shells show 130.)"""
    proc = subprocess.Popen([sys.executable, "-m", "attnbounds.theory.running.cli", "verify", "--statements", str(EXAMPLE),
                             "--budget", "5", "--quiet", "--json", str(tmp_path / "r.json")], cwd=tmp_path,
                            env=_clean_env(tmp_path / "cache"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=interruptible)
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode in (130, -signal.SIGINT) and "interrupted" in err, (proc.returncode, err)
    assert "Traceback" not in err and "terminate" not in err, err
    assert set(tmp_path.iterdir()) <= {tmp_path / "cache"}  # no records, no partial file, nothing else


def test_verify_uses_the_machines_cores_by_itself_for_many_readings(monkeypatch) -> None:
    """The main command (``attnbounds verify --json records.json``, no other flag) starts one worker per core when it
    runs 8 or more readings on a machine of several cores; a given scheduler or $ATTNBOUNDS_SCHEDULER wins."""
    from attnbounds.theory.mathematics import memory
    from attnbounds.theory.running.cli import AUTO_READINGS, default_scheduler

    monkeypatch.delenv("ATTNBOUNDS_SCHEDULER", raising=False)
    monkeypatch.setattr(memory, "cores", lambda: 2)
    assert default_scheduler(None, 54) == "processes:2"
    assert default_scheduler(None, AUTO_READINGS - 1) is None
    assert default_scheduler("none", 54) == "none"
    monkeypatch.setattr(memory, "cores", lambda: 1)
    assert default_scheduler(None, 54) is None
    monkeypatch.setattr(memory, "cores", lambda: 2)
    monkeypatch.setenv("ATTNBOUNDS_SCHEDULER", "none")
    assert default_scheduler(None, 54) is None  # parallel.parse reads the environment
