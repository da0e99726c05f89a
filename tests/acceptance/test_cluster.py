"""Running on Dask (:mod:`attnbounds.theory.deciding.parallel`): the same records whichever scheduler ran them.

A real ``LocalCluster`` of worker processes runs in the default run (readings as tasks, and one reading's
search pieces as tasks, with a user's own normaliser that only the driver registered); a scheduler and
workers started as subprocesses (``dask scheduler``, ``dask worker``), including a worker killed mid-run,
run under ``-m slow``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from attnbounds.theory.deciding import parallel
from attnbounds.theory.io import userbounds
from attnbounds.theory.mathematics.errors import InvalidArgument
from attnbounds.theory.running.verify import verify
from tests._signals import interruptible

pytest.importorskip("distributed")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "user_bounds.toml"
READINGS = ["lemma1", "corollary3[spectral]"]


def _hashes(records) -> dict[str, str]:
    return {r.id: r.content_hash for r in records}


@pytest.mark.parametrize("text, message", [("processes:0", "processes:N"), ("processes:x", "processes:N"),
                                           ("threads:2", "unknown scheduler"), ("http://x", "unknown scheduler")])
def test_bad_schedulers_are_refused_naming_what_is_allowed(text, message):
    with pytest.raises(InvalidArgument, match=message):
        parallel.parse(text)


def test_the_scheduler_defaults_to_the_environment(monkeypatch):
    monkeypatch.setenv("ATTNBOUNDS_SCHEDULER", "processes:1")  # (more than the machine's cores would be capped)
    assert parallel.parse(None) == ("processes", 1)
    monkeypatch.delenv("ATTNBOUNDS_SCHEDULER")
    assert parallel.parse(None) == ("none", None)


@pytest.mark.slow  # 50-70 s: a LocalCluster of its own; the scheduler checks below stay in the default run
def test_local_cluster_gives_the_same_records_as_in_process():
    """Two readings on two workers (a task each); then one reading alone, whose search pieces are the tasks."""
    here = verify(READINGS, budget_s=0.5, seed=3, progress=False)
    there = verify(READINGS, budget_s=0.5, seed=3, progress=False, scheduler="processes:2")
    assert _hashes(here) == _hashes(there)
    assert {r.data["timing"]["scheduler"] for r in there} == {"processes:2"}
    assert {r.data["timing"]["scheduler"] for r in here} == {"none"}
    one = verify(["corollary3[row]"], budget_s=0.5, seed=3, progress=False, scheduler="processes:2")
    assert _hashes(one) == _hashes(verify(["corollary3[row]"], budget_s=0.5, seed=3, progress=False))


def _families_seen(name: str) -> bool:
    from attnbounds.theory.mathematics.normalisers import CONSTRUCTORS

    return name in CONSTRUCTORS


@pytest.mark.slow  # 10-45 s: a LocalCluster of its own
def test_a_users_normaliser_travels_to_the_workers():
    """The statements file registers its normaliser in the driver only; workers get it with each task."""
    from attnbounds.theory.mathematics.normalisers import CONSTRUCTORS

    bounds = userbounds.load_statements(EXAMPLE)
    try:
        with parallel.runner("processes:2") as run:
            assert run.map(_families_seen, ["gauss_tilt"] * 4) == [True] * 4
        ids = [bounds.statements[1].id, bounds.statements[0].id]  # any normaliser; softmax only
        here = verify(ids, budget_s=0.5, seed=1, progress=False, statements=bounds.statements)
        there = verify(ids, budget_s=0.5, seed=1, progress=False, statements=bounds.statements, scheduler="processes:2")
        # one statement alone: its pieces are the tasks, the statement (not a reading of the paper) travels by value
        alone = verify(ids[:1], budget_s=0.5, seed=1, progress=False, statements=bounds.statements,
                       scheduler="processes:2")
    finally:
        for name in bounds.normalisers:
            CONSTRUCTORS.pop(name, None)
    assert _hashes(here) == _hashes(there)
    assert _hashes(alone) == {ids[0]: _hashes(here)[ids[0]]}


def _refused(tmp_path: Path, address: str) -> subprocess.CompletedProcess:
    """``verify --scheduler address``: it must end by itself (the 120 s bound is far above the 5 s connect and 3 s
    handshake timeouts plus start-up, 7 to 10 s on a loaded 2-core machine: it catches a hang, not slowness)."""
    return subprocess.run([sys.executable, "-m", "attnbounds.theory.running.cli", "verify", "lemma1", "--budget", "0.2", "--quiet",
                           "--scheduler", address, "--json", str(tmp_path / "r.json")],
                          capture_output=True, text=True, timeout=120)


def test_an_unreachable_scheduler_is_exit_2(tmp_path):
    run = _refused(tmp_path, "tcp://127.0.0.1:9")
    assert run.returncode == 2, run.stderr
    assert "cannot reach the Dask scheduler 'tcp://127.0.0.1:9'" in run.stderr
    assert "Traceback" not in run.stderr
    assert not (tmp_path / "r.json").exists()


def test_a_listener_that_accepts_and_never_answers_is_exit_2(tmp_path):
    """Dask's own connect waits for the handshake's answer without a limit: the handshake has one."""
    import socket
    import threading

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])  # accepted, never answered
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        run = _refused(tmp_path, f"tcp://127.0.0.1:{listener.getsockname()[1]}")
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        listener.close()
    assert run.returncode == 2, run.stderr
    assert "did not answer Dask's handshake within 8 s" in run.stderr and "Traceback" not in run.stderr
    assert held and not (tmp_path / "r.json").exists()


def _start(cmd: list[str], log: Path) -> subprocess.Popen:
    return subprocess.Popen(cmd, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)


@pytest.fixture
def tcp_cluster(tmp_path):
    """``dask scheduler --port 0`` and two ``dask worker --nthreads 1`` as subprocesses: (address, workers)."""
    dask = shutil.which("dask") or str(Path(sys.executable).with_name("dask"))
    file = tmp_path / "scheduler.json"
    procs = [_start([dask, "scheduler", "--port", "0", "--no-dashboard", "--scheduler-file", str(file)],
                    tmp_path / "scheduler.log")]
    try:
        for _ in range(300):
            if file.exists() and file.stat().st_size:
                break
            time.sleep(0.1)
        address = json.loads(file.read_text())["address"]
        workers = [_start([dask, "worker", address, "--nthreads", "1", "--nworkers", "1", "--no-dashboard"],
                          tmp_path / f"worker{k}.log") for k in range(2)]
        procs += workers
        from distributed import Client

        with Client(address, timeout=30) as client:
            client.wait_for_workers(2, timeout=60)
        yield address, workers
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)


@pytest.mark.slow
def test_a_tcp_cluster_gives_the_same_records_even_when_a_worker_dies(tcp_cluster, tmp_path):
    address, workers = tcp_cluster
    here = _hashes(verify(READINGS + ["corollary3[row]"], budget_s=1.0, seed=5, progress=False))
    env = {**os.environ, "ATTNBOUNDS_CACHE": str(tmp_path / "cache")}
    out = tmp_path / "records.json"
    run = subprocess.Popen([sys.executable, "-m", "attnbounds.theory.running.cli", "verify", *READINGS, "corollary3[row]",
                            "--budget", "1", "--seed", "5", "--quiet", "--scheduler", address, "--json", str(out)],
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(6)  # the readings are running on both workers
    os.killpg(workers[0].pid, signal.SIGKILL)  # its tasks are retried on the other worker
    stdout, stderr = run.communicate(timeout=600)
    assert run.returncode == 0, stderr
    records = json.loads(out.read_text())
    assert {r["id"]: r["content_hash"] for r in records} == here
    assert {r["timing"]["scheduler"] for r in records} == {address}


@pytest.mark.slow
def test_one_readings_pieces_survive_a_dead_worker(tcp_cluster):
    """One reading alone: its search pieces (and the parts they share, held by a worker) are the tasks."""
    address, workers = tcp_cluster
    here = _hashes(verify(["corollary3[row]"], budget_s=4.0, seed=2, progress=False))
    killer = subprocess.Popen([sys.executable, "-c", f"import os, signal, time; time.sleep(2.5); "
                               f"os.killpg({workers[1].pid}, signal.SIGKILL)"])
    try:
        there = _hashes(verify(["corollary3[row]"], budget_s=4.0, seed=2, progress=False, scheduler=address))
        killed_during = killer.poll() is not None  # the killer had done its work before the run ended
    finally:
        killer.wait(timeout=30)
    assert workers[1].poll() is not None and killed_during  # it died during the run
    assert there == here


@pytest.mark.slow  # 10-45 s: a LocalCluster of its own
def test_records_do_not_depend_on_the_process(tmp_path):
    """Every worker is a fresh process with its own string-hash seed: nothing a record holds may depend on the
    order of a set of names (autograd sums a variable's gradients in the order the graph was built)."""
    script = ("import sys\nfrom attnbounds.theory.running.verify import verify\n"
              "for r in verify(['corollary2.ii[R2,corrected]', 'theorem1.fixed[R2,g2]'], budget_s=0.3, progress=False):\n"
              "    print(r.id, r.content_hash)\n")
    outs = []
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "ATTNBOUNDS_CACHE": str(tmp_path / "cache")}
        run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr
        outs.append(run.stdout)
    assert outs[0] == outs[1] == outs[2]


def _pair(shared, item):
    return shared, item


def test_pieces_with_a_shared_part_come_back_in_order():
    """A small batch carries the shared part with each piece, a large one as one future; either order of starting."""
    shared = {"plan": [1, 2, 3]}
    with parallel.runner("processes:2") as run:
        for n in (3, 40):
            for last_first in (False, True):
                got = run.start(_pair, list(range(n)), shared=shared, last_first=last_first).results()
                assert got == [(shared, k) for k in range(n)]
    assert parallel.Runner().map(_pair, [1, 2], shared=shared) == [(shared, 1), (shared, 2)]


@pytest.mark.slow  # 10-45 s: a LocalCluster of its own
def test_ctrl_c_during_one_readings_pieces_exits_130_and_leaves_no_worker(tmp_path):
    """Ctrl-C while one reading's pieces run on a LocalCluster: exit 130, no output, every worker process gone."""
    import psutil

    env = {**os.environ, "ATTNBOUNDS_CACHE": str(tmp_path / "cache")}
    out = tmp_path / "r.json"
    proc = subprocess.Popen([sys.executable, "-m", "attnbounds.theory.running.cli", "verify", "corollary3[row]", "--budget", "20",
                             "--quiet", "--scheduler", "processes:2", "--json", str(out)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=interruptible)
    children: list = []
    for _ in range(300):  # until both worker processes run
        time.sleep(0.1)
        children = psutil.Process(proc.pid).children(recursive=True)
        if len(children) >= 2:
            break
    time.sleep(3.0)  # pieces are running (the workers import for about a second)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode in (130, -signal.SIGINT) and "interrupted" in err, (proc.returncode, err)
    assert "Traceback" not in err, err
    assert not out.exists()
    gone, alive = psutil.wait_procs(children, timeout=15)
    assert not alive, [p.cmdline() for p in alive]
