"""Running independent pieces of work in-process or on a Dask cluster, with identical results.

``runner(scheduler)`` gives a :class:`Runner` whose ``map(fn, items)`` returns ``[fn(x) for x in items]``
in order, whatever ran them:

- ``None`` / ``"none"`` (the default, or ``$ATTNBOUNDS_SCHEDULER``): in this process, one item after another;
- ``"processes:N"``: a ``dask.distributed.LocalCluster`` of N worker processes on this machine;
- ``"tcp://HOST:PORT"``: an existing scheduler (``dask scheduler`` and ``dask worker HOST:PORT``).

The work is always cut into the same pieces with seeds derived from (seed, reading, piece index), and
merged in a fixed order, so a record does not depend on the scheduler. With Dask, a lost worker's pieces
are retried (``retries``), an unreachable scheduler is an :class:`InvalidArgument` within
:data:`CONNECT_TIMEOUT_S`, Ctrl-C cancels the outstanding futures, and a progress bar counts completed pieces.
"""

from __future__ import annotations

import contextlib
import functools
import os
import uuid
import warnings
from typing import Any, Callable, Iterator, Sequence

from attnbounds.theory.mathematics.errors import InvalidArgument

#: seconds to wait for a scheduler before giving up, and for its answer to the handshake once connected (a refusal
#: takes about 7 and 10 s end to end)
CONNECT_TIMEOUT_S = 5
HANDSHAKE_S = 3
#: how often a piece is retried when its worker dies
RETRIES = 3
#: a batch of at most this many pieces per worker carries its shared part in every piece (a shared future would
#: draw every piece to the worker that holds it)
SMALL_BATCH = 2
#: Dask settings for the workers this module starts: the statistical profiler interrupts the task thread every
#: 10 ms and the event loop ticks every 20 ms (about 5 % of a pure-Python task); one thread of BLAS and OpenMP per
#: worker, as Dask does by default. (Its nannies' MALLOC_TRIM_THRESHOLD_ is countered in every task by
#: :func:`attnbounds.theory.mathematics.memory.tune_allocator`.)
WORKER_CONFIG = {"distributed.worker.profile.enabled": False, "distributed.admin.tick.interval": "1s",
                 "distributed.nanny.pre-spawn-environ": {"OMP_NUM_THREADS": 1, "MKL_NUM_THREADS": 1,
                                                         "OPENBLAS_NUM_THREADS": 1}}


def parse(scheduler: str | None) -> tuple[str, Any]:
    """``("none", None)``, ``("processes", N)`` or ``("tcp", address)`` from a scheduler string (or the environment)."""
    text = scheduler if scheduler is not None else os.environ.get("ATTNBOUNDS_SCHEDULER", "none")
    text = text.strip()
    if text in ("", "none"):
        return "none", None
    if text.startswith("processes:"):
        try:
            n = int(text.split(":", 1)[1])
        except ValueError:
            n = 0
        if not 1 <= n <= 1024:
            raise InvalidArgument(f"scheduler {text!r}: want processes:N with N a number of workers in [1, 1024]")
        return "processes", capped_workers(n)
    if text.startswith("tcp://"):
        return "tcp", text
    raise InvalidArgument(f"unknown scheduler {text!r}; allowed: none, processes:N, tcp://HOST:PORT")


#: the memory one local worker process needs at least (the numerical stack loaded, a search's temporaries)
WORKER_BYTES = 1 << 29


def capped_workers(n: int) -> int:
    """``n`` local worker processes, at most one per core and one per :data:`WORKER_BYTES` of the machine's memory
    (with a warning naming the cap: the records do not depend on the number of workers)."""
    from attnbounds.theory.mathematics.memory import cores, total_bytes

    memory = total_bytes()
    cap = min(cores(), max(1, memory // WORKER_BYTES) if memory is not None else cores())
    if n > cap:
        warnings.warn(f"processes:{n} capped at {cap} worker processes: this machine has {cores()} core(s) and "
                      f"{'an unknown amount of' if memory is None else f'{memory / 2**30:.1f} GiB of'} memory "
                      f"({WORKER_BYTES / 2**30:g} GiB per worker); the records are the same with any number of workers",
                      stacklevel=2)
    return min(n, cap)


class Batch:
    """Pieces of work started by :meth:`Runner.start`; :meth:`results` waits for them and returns them in order."""

    def __init__(self, fn: Callable[..., Any], items: Sequence[Any], shared: Any, label: str):
        self.fn, self.items, self.shared, self.label = fn, list(items), shared, label

    def results(self, *, progress: bool = False) -> list[Any]:
        """``[fn(item)]`` (``[fn(shared, item)]`` with ``shared``), in the items' order. In-process the work runs
        here, now: batches started together run one after another in the order their results are asked for."""
        bar = _bar(progress, len(self.items), self.label)
        out = []
        for item in self.items:
            out.append(self.fn(item) if self.shared is _NOTHING else self.fn(self.shared, item))
            if bar is not None:
                bar.update(1)
        if bar is not None:
            bar.close()
        return out


#: no ``shared`` argument
_NOTHING: Any = object()


class Runner:
    """Maps a function over items in order (in-process); :class:`DaskRunner` on a cluster.

    :meth:`start` hands out a batch of pieces without waiting, so that independent batches (and the work that
    follows them here) overlap on a cluster; :meth:`map` starts one and waits for it. ``shared`` is what every
    piece of a batch reads (the statement, the plan): it travels to each worker once, not with every piece.
    """

    name = "none"
    workers = 1

    def start(self, fn: Callable[..., Any], items: Sequence[Any], *, shared: Any = _NOTHING, label: str = "",
              last_first: bool = False, background: bool = False) -> Batch:
        """``last_first``: later items cost more (a cluster starts them first, so no long piece is left for the
        end); ``background``: a cluster runs these pieces only when no other piece is waiting (work that fills the
        gaps while the next batch is being prepared). In-process neither changes anything."""
        return Batch(fn, items, shared, label)

    def map(self, fn: Callable[..., Any], items: Sequence[Any], *, shared: Any = _NOTHING, label: str = "",
            progress: bool = False) -> list[Any]:
        return self.start(fn, items, shared=shared, label=label).results(progress=progress)

    def close(self) -> None:
        pass


class _DaskBatch(Batch):
    """The pieces as Dask futures, submitted at once; gathered in the items' order."""

    def __init__(self, client: Any, workers: int, fn: Callable[..., Any], items: Sequence[Any], shared: Any, label: str,
                 last_first: bool = False, background: bool = False):
        super().__init__(fn, items, shared, label)
        self.client = client
        self.futures: list[Any] = []
        self.shared_future: Any = None
        task = _InContext(fn, _context())
        batch = uuid.uuid4().hex[:12]
        name = (label or getattr(fn, "__name__", "task")).replace(" ", "_")
        order = list(range(len(self.items)))[::-1 if last_first else 1]  # Dask starts a batch in submission order
        keys = [f"{name}-{k}-{batch}" for k in order]  # what the dashboard shows
        args: list[list[Any]] = [[self.items[k] for k in order]]
        try:
            if shared is not _NOTHING and len(order) <= SMALL_BATCH * workers:  # with each piece: spread evenly
                args.append([shared] * len(order))
            elif shared is not _NOTHING:  # computed once on one worker (recomputed if it dies), fetched once per worker
                self.shared_future = client.submit(_identity, shared, key=f"{name}-shared-{batch}", pure=False,
                                                   retries=RETRIES)
                args.append([self.shared_future] * len(order))
            futures = client.map(task, *args, key=keys, pure=False, retries=RETRIES, priority=-1 if background else 0)
            self.futures = futures[::-1] if last_first else futures
        except BaseException:
            self.cancel()
            raise

    def results(self, *, progress: bool = False) -> list[Any]:
        from distributed import as_completed

        bar = _bar(progress, len(self.futures), self.label)
        try:
            for future in as_completed(self.futures):
                future.result()  # raise the first error at once
                if bar is not None:
                    bar.update(1)
            return self.client.gather(self.futures)
        except BaseException:
            self.cancel()
            raise
        finally:
            if bar is not None:
                bar.close()
            self.shared_future = None  # the workers may drop it

    def cancel(self) -> None:
        futures = [*self.futures, *([self.shared_future] if self.shared_future is not None else [])]
        if futures:
            self.client.cancel(futures)


def _identity(x: Any) -> Any:
    return x


class DaskRunner(Runner):
    """Pieces as Dask futures (``client.map``, ``as_completed``); results gathered in the items' order."""

    def __init__(self, client: Any, cluster: Any, name: str):
        self.client, self.cluster, self.name = client, cluster, name
        self.workers = max(1, len(client.scheduler_info().get("workers", {})))

    def start(self, fn: Callable[..., Any], items: Sequence[Any], *, shared: Any = _NOTHING, label: str = "",
              last_first: bool = False, background: bool = False) -> Batch:
        return _DaskBatch(self.client, self.workers, fn, items, shared, label, last_first, background)

    def close(self) -> None:
        self.client.close()
        if self.cluster is not None:
            self.cluster.close()


def _context() -> dict[str, Any]:
    """What a worker needs besides the task's arguments: the user's normaliser families (a statements file
    registers them in this process only) and the ``ATTNBOUNDS_*`` settings (memory limit, cache, ...)."""
    from attnbounds.theory.mathematics.normalisers import BUILTIN_NAMES, CONSTRUCTORS

    families = {name: make for name, make in CONSTRUCTORS.items() if name not in BUILTIN_NAMES}
    env = {k: v for k, v in os.environ.items() if k.startswith("ATTNBOUNDS_") and k != "ATTNBOUNDS_SCHEDULER"}
    return {"families": families, "env": env}


class _InContext:
    """``fn`` run on a worker after installing the driver's :func:`_context`; inside a task every nested
    runner is in-process (a worker never starts a cluster of its own)."""

    def __init__(self, fn: Callable[..., Any], context: dict[str, Any]):
        self.fn, self.context = fn, context

    def __call__(self, item: Any, *shared: Any) -> Any:
        from attnbounds.theory.mathematics.normalisers import CONSTRUCTORS

        _worker_setup()
        CONSTRUCTORS.update(self.context["families"])
        os.environ.update(self.context["env"])
        os.environ["ATTNBOUNDS_SCHEDULER"] = "none"
        return self.fn(*shared, item)


@functools.cache
def _worker_setup() -> None:
    """Once per worker process: glibc's allocator thresholds; and hypothesis warns when the global `random` state
    changes while it draws: on a worker the event loop's thread moves it (Dask's jittered callbacks), not the
    strategies, whose generators are all seeded."""
    from attnbounds.theory.mathematics.memory import tune_allocator

    tune_allocator()
    warnings.filterwarnings("ignore", message="Do not use the `random` module inside strategies")


def _bar(progress: bool, total: int, label: str) -> Any:
    if not progress or total <= 1:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=label or "tasks", unit="task", leave=False)


def _handshake(address: str) -> None:
    """Connect to ``address`` and exchange Dask's handshake within :data:`CONNECT_TIMEOUT_S` (Dask's own connect
    waits for the handshake's answer without a limit: a listener that accepts and never answers would hang the
    run). In a thread with its own event loop, so that a caller's running loop (Jupyter) does not matter."""
    import asyncio
    import threading

    from distributed.comm.core import connect

    outcome: list[BaseException | None] = []

    async def probe() -> None:  # connect() gives up on an unreachable address after CONNECT_TIMEOUT_S (an OSError)
        comm = await asyncio.wait_for(connect(address, timeout=CONNECT_TIMEOUT_S), CONNECT_TIMEOUT_S + HANDSHAKE_S)
        await comm.close()

    def work() -> None:
        try:
            asyncio.run(probe())
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 - reported below
            outcome.append(exc)

    thread = threading.Thread(target=work, name="attnbounds-handshake", daemon=True)
    thread.start()
    thread.join(CONNECT_TIMEOUT_S + HANDSHAKE_S + 1)
    if not outcome or isinstance(outcome[0], (asyncio.TimeoutError, TimeoutError)):
        raise InvalidArgument(f"{address!r} accepted the connection but did not answer Dask's handshake within "
                              f"{CONNECT_TIMEOUT_S + HANDSHAKE_S} s: it is not a Dask scheduler (or it is stuck)")
    if isinstance(outcome[0], OSError):
        raise outcome[0]
    if outcome[0] is not None:
        raise InvalidArgument(f"{address!r} did not answer as a Dask scheduler ({type(outcome[0]).__name__}: "
                              f"{str(outcome[0])[:200]})")


@contextlib.contextmanager
def runner(scheduler: str | None = None) -> Iterator[Runner]:
    """The runner for ``scheduler`` (module docstring), closed on exit."""
    kind, arg = parse(scheduler)
    if kind == "none":
        yield Runner()
        return
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise InvalidArgument("a Dask scheduler needs dask.distributed: pip install 'attnbounds[distributed]'") from None
    cluster = None
    try:
        if kind == "processes":
            import dask

            # logs at CRITICAL only: a task's error reaches the driver as its result; what the workers log while a
            # run is cut short (heartbeats to a scheduler already closed after Ctrl-C) is noise with a traceback
            with dask.config.set(WORKER_CONFIG):  # the workers' own configuration, handed over by their nannies
                cluster = LocalCluster(n_workers=arg, threads_per_worker=1, processes=True, dashboard_address=None,
                                       scheduler_kwargs={"dashboard_address": ":0"},  # its HTTP server: any free port
                                       silence_logs=50)
            client = Client(cluster)
        else:
            _handshake(arg)
            client = Client(arg, timeout=CONNECT_TIMEOUT_S)
    except InvalidArgument:
        raise
    except (OSError, TimeoutError) as exc:
        if cluster is not None:
            cluster.close()
        raise InvalidArgument(f"cannot reach the Dask scheduler {arg!r} within {CONNECT_TIMEOUT_S} s: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - whatever answers at that address is not a Dask scheduler
        if cluster is not None:
            cluster.close()
        raise InvalidArgument(f"{arg!r} did not answer as a Dask scheduler ({type(exc).__name__}: {str(exc)[:200]}); "
                              "start one with `dask scheduler` and pass the address it prints") from None
    run = DaskRunner(client, cluster, f"{kind}:{arg}" if kind == "processes" else str(arg))
    try:
        yield run
    finally:
        run.close()
