"""The panel sweep on a Dask distributed cluster, with the same bits as the in-process sweep.

:func:`sweep` cuts the work into tasks (instrument, block of combos). Each series is scattered to
the workers once (``client.scatter``; broadcast to every worker when the panel is small or has few
instruments, so that any worker can take any block and a worker's death loses no data) and the
grid once; tasks carry only their block bounds. Each task calls the C kernel in the worker process
through :mod:`tollfree.binding` (the GIL released) with ``threads=1``, so Dask's worker threads
give the parallelism. Results are gathered into the DataFrame of :func:`tollfree.panel.sweep_panel`
(instrument order, then combo order as given), whatever order tasks finish in. ``fee`` and
``stats=True`` (every statistic and the derived figures) are those of ``sweep_panel``: a task then
returns its block's :func:`binding.sweep_stats` dict.

A worker that dies mid-sweep: Dask reruns its tasks elsewhere (up to the scheduler's
``allowed-failures``); a series that was only on that worker is scattered again from the client
and its blocks resubmitted. Every combo is computed by the same kernel from the same inputs, so
the result is bit-identical however the work was cut and wherever it ran (docs/distributed.md).

Requires Debian's ``python3-distributed`` and ``python3-pandas``; every worker must import the same
tollfree package and load the same libtollfree build (``TOLLFREE_LIB``).
"""
from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
import uuid
from collections import OrderedDict
from concurrent.futures import CancelledError

import numpy as np

from tollfree import binding
from tollfree.grid import PARAM_NAMES
from tollfree.panel import (_attach, _raw_kw, as_fee, prepare_panel, result_frame,
                            stats_frame, sweep_panel)

# Work units (multiply-adds per bar, see _unit_cost) one task thread does per second. Measured on
# a shared AMD EPYC VM (AVX-512, one thread, under other jobs' load): 1.05e10 units (800 combos x
# 150,000 bars) in 0.25-1.4 s depending on that load. An estimate off by 4x either way still keeps
# tasks in the 0.1-2 s band of TASK_S when the target is in its middle.
UNITS_PER_S = 1.5e10
SAR_UNITS = 12          # the stop-and-reverse loop per combo per bar, in multiply-add units
STRATEGY_UNITS = 40     # another strategy's step and booking per combo per bar (a rough guess)
TASK_S = (0.1, 2.0)     # the band a task's estimated run time is kept in
TASKS_PER_THREAD = 4    # aim for this many tasks per worker thread, within TASK_S
SMALL_S = 2.0           # client=None: below this estimated work, stay in-process
CACHE_DUP = 1.5         # cache="auto": blocks that redo this x the first stage use the cache
BROADCAST_BYTES = 256 << 20  # broadcast the series when the panel is at most this size ...
DEFAULT_CACHE = 1 << 30      # worker-side budget of cached first-stage rows (TOLLFREE_DASK_CACHE)


_CANCELLED = (CancelledError, asyncio.CancelledError)


def _result_or_lost(f):
    """A finished future's result, or None when it was lost while being read: its result, or
    what recomputing it needs, went with a worker that died. A future can turn from finished to
    cancelled between distributed's gather and its status check; Future.result then raises a
    TypeError ("exceptions must derive from BaseException": it raises the gathered value) instead
    of a CancelledError. Any error of a future that is not cancelled afterwards is re-raised."""
    try:
        return f.result()
    except _CANCELLED:
        return None
    except Exception:
        if f.status == "cancelled":
            return None
        raise


class SchedulerUnavailable(ConnectionError):
    """No Dask scheduler answered at the address within the timeout, or it has no workers."""


# ---- cost model and plan ----

def _first_stage_units(params: np.ndarray) -> int:
    """Multiply-adds per bar of the distinct first-stage WMAs these combos need (HMA's int64
    grid; another strategy's float64 grid has no shared first stage in this model)."""
    if params.shape[0] == 0 or params.dtype != np.int64:
        return 0
    return int(np.unique(params[:, [0, 1, 3, 4, 5]]).sum())


def _unit_cost(params: np.ndarray) -> np.ndarray:
    """Per combo: multiply-adds per bar of its second stage and SAR loop (another strategy's
    combo: STRATEGY_UNITS, a step and the booking)."""
    if params.dtype != np.int64:
        return np.full(params.shape[0], STRATEGY_UNITS, dtype=np.int64)
    return params[:, 2] + params[:, 3] + SAR_UNITS


def plan(lengths, params: np.ndarray, chunk: int | None = None, n_threads: int = 1,
         cache=None) -> list[tuple[int, list[tuple[int, int]], bool]]:
    """Blocks per instrument: ``[(i, [(lo, hi), ...], use_cache), ...]`` over ``params`` (rows
    lo:hi of the grid as swept: :func:`sweep` sorts it by L first, so that a block needs few
    first-stage lengths). ``chunk``: combos per task; None picks it so that a task's estimated
    run time is in TASK_S and there are about TASKS_PER_THREAD tasks per thread."""
    m = params.shape[0]
    per_combo = _unit_cost(params).astype(np.float64)
    fs = _first_stage_units(params)
    if chunk is None:
        total = sum(n * (fs + per_combo.sum()) for n in lengths) / UNITS_PER_S
        target = min(max(total / max(1, TASKS_PER_THREAD * n_threads), TASK_S[0]), TASK_S[1])
    out = []
    for i, n in enumerate(lengths):
        if m == 0:
            out.append((i, [], False))
            continue
        if chunk is not None:
            step = chunk
        else:
            est = n * (fs + per_combo.sum()) / UNITS_PER_S
            nb = max(1, min(m, int(np.ceil(est / target))))
            step = -(-m // nb)
        blocks = [(lo, min(m, lo + step)) for lo in range(0, m, step)]
        if cache is None:
            redo = sum(_first_stage_units(params[a:b]) for a, b in blocks)
            use = len(blocks) > 1 and n > 0 and redo > CACHE_DUP * fs
        else:
            use = bool(cache) and len(blocks) > 1
        out.append((i, blocks, use))
    return out


def estimate_seconds(lengths, params: np.ndarray) -> float:
    """The model's single-thread estimate of a sweep (seconds; order of magnitude only)."""
    per = _first_stage_units(params) + float(_unit_cost(params).sum())
    return sum(n * per for n in lengths) / UNITS_PER_S


# ---- the worker side ----

class _SeriesCache:
    """Per worker process: prepared series by key, least recently used first out when the cached
    first-stage rows pass the budget. A series in use by a task is never closed."""

    def __init__(self):
        self.lock = threading.Lock()
        self.items: OrderedDict = OrderedDict()  # key -> [Series, users]
        self.budget = int(os.environ.get("TOLLFREE_DASK_CACHE", DEFAULT_CACHE))

    def acquire(self, key: str, close: np.ndarray) -> binding.Series:
        with self.lock:
            it = self.items.get(key)
            if it is None:
                it = self.items[key] = [binding.Series(close, self.budget,
                                                   **_raw_kw(binding.Series)), 0]
            self.items.move_to_end(key)
            it[1] += 1
            return it[0]

    def release(self, key: str) -> None:
        with self.lock:
            self.items[key][1] -= 1
            used = sum(s.cached_bytes for s, _ in self.items.values())
            for k in list(self.items):
                if used <= self.budget:
                    break
                s, users = self.items[k]
                if users == 0:
                    used -= s.cached_bytes
                    s.close()
                    del self.items[k]

    def drop(self, prefix: str) -> int:
        with self.lock:
            gone = [k for k, (_, users) in self.items.items() if k.startswith(prefix) and not users]
            for k in gone:
                self.items.pop(k)[0].close()
            return len(gone)


_CACHE = _SeriesCache()


def _block(close: np.ndarray, params: np.ndarray, lo: int, hi: int, key: str, threads: int,
           isa: str, use_cache: bool, fee: float = binding.FEE_DEFAULT, stats: bool = False,
           strategy=None, time_stats: bool = False, periods_per_year=None):
    """One task: rows lo:hi of params on close, in this worker process. -> (pnl, trades), or
    with ``stats`` the block's :func:`binding.sweep_stats` dict, or with ``time_stats`` the
    block's ``(statistics, figures)`` from one sweep (:func:`tollfree.stats.sweep_time`: a
    combo's figures depend only on its own series, never on its block). ``strategy``: None (HMA), a
    built-in name or plugin path (a string: the path must exist on the worker), or a
    :class:`tollfree.strategies.UserStrategy` (unpickled from its importable functions,
    compiled once per worker process)."""
    if not close.flags.aligned or not close.flags.c_contiguous:
        close = np.ascontiguousarray(close).copy()
    p = np.ascontiguousarray(params[lo:hi])
    if time_stats:
        from tollfree.stats import sweep_time

        return sweep_time(close, p, threads=threads, isa=isa, fee=fee,
                          periods_per_year=periods_per_year, validate=False, strategy=strategy)
    if not use_cache or strategy is not None:  # the client checked the series
        if stats:
            return binding.sweep_stats(close, p, threads=threads, isa=isa, fee=fee,
                                       strategy=strategy, **_raw_kw(binding.sweep_stats))
        return binding.sweep(close, p, threads=threads, isa=isa, fee=fee, strategy=strategy,
                             **_raw_kw(binding.sweep))
    s = _CACHE.acquire(key, close)
    try:
        if stats:
            return s.sweep_stats(p, threads=threads, isa=isa, fee=fee)
        return s.sweep(p, threads=threads, isa=isa, fee=fee)
    finally:
        _CACHE.release(key)


def _drop_cache(prefix: str) -> int:
    return _CACHE.drop(prefix)


# ---- the client side ----

GUARD = 'if __name__ == "__main__":'


def _is_main_guard(node) -> bool:
    """``node`` is the test ``__name__ == "__main__"`` (either side)."""
    import ast

    if not (isinstance(node, ast.Compare) and len(node.ops) == 1
            and isinstance(node.ops[0], ast.Eq)):
        return False
    sides = [node.left, node.comparators[0]]
    return (any(isinstance(x, ast.Name) and x.id == "__name__" for x in sides)
            and any(isinstance(x, ast.Constant) and x.value == "__main__" for x in sides))


def _module_frame(name: str):
    """The innermost frame running the top level of the module whose ``__name__`` is ``name``
    (a script being run or imported), or None."""
    f = sys._getframe(1)
    while f is not None:
        if f.f_code.co_name == "<module>" and f.f_globals.get("__name__") == name:
            return f
        f = f.f_back
    return None


def _unguarded_line() -> tuple[str, int] | None:
    """``(script, line)`` when this call comes from a top-level statement of the main script
    that is not inside ``if __name__ == "__main__":``, else None (guarded, or no script file:
    ``python -c``, a notebook, an interactive session, none of which a worker re-imports)."""
    import ast

    f = _module_frame("__main__")
    path = f.f_globals.get("__file__") if f is not None else None
    if not path:
        return None
    try:
        with open(path, "rb") as fh:
            tree = ast.parse(fh.read(), path)
    except (OSError, SyntaxError, ValueError):
        return None
    line = f.f_lineno
    for stmt in tree.body:
        if stmt.lineno <= line <= (stmt.end_lineno or stmt.lineno):
            if isinstance(stmt, ast.If) and _is_main_guard(stmt.test) and stmt.body and \
                    stmt.body[0].lineno <= line <= (stmt.body[-1].end_lineno or line):
                return None
            return path, line
    return None


def _refuse_unguarded_main() -> None:
    """Raises RuntimeError before a LocalCluster of worker processes is started from a script's
    top level outside ``if __name__ == "__main__":``. Dask starts its workers with the 'spawn'
    method (``distributed.worker.multiprocessing-method``), which runs the main script again in
    each new process; unguarded, that run starts a cluster too, the worker fails, its nanny
    restarts it, and the script never ends. Two checks: in the script's own process, the
    statement that led here is looked up in the script's source; in a process started by
    multiprocessing, a re-import of the script (``__mp_main__``) on the stack is the loop
    itself."""
    where = _unguarded_line()
    if where is None and _module_frame("__mp_main__") is None:
        return
    import multiprocessing

    try:
        import dask

        method = dask.config.get("distributed.worker.multiprocessing-method", "spawn")
    except ImportError:
        method = "spawn"
    if where is not None and method == "fork":
        return  # a forked worker does not run the script again
    if where is not None:
        head = (f"tollfree.distributed: {where[0]}, line {where[1]}, starts a Dask LocalCluster "
                "at the script's top level, outside")
    else:
        script = getattr(sys.modules.get("__mp_main__"), "__file__", None) or "the script"
        head = (f"tollfree.distributed: a LocalCluster was asked for while this worker process "
                f"(started by multiprocessing from process "
                f"{getattr(multiprocessing.parent_process(), 'pid', '?')}) imports {script} "
                "again, at its top level, outside")
    raise RuntimeError(
        f"{head} {GUARD!r}. Dask starts each worker process by running the script again, so "
        "every worker would start a cluster of its own, forever. Put the code that sweeps "
        "under the guard:\n"
        f"    {GUARD}\n"
        "        df = tollfree.distributed.sweep(...)\n"
        "(Python's multiprocessing docs, 'Safe importing of main module')")


def connect(scheduler, timeout: float = 10.0, n_workers: int | None = None):
    """``(client, cluster)`` for a scheduler spec: a ``Client`` (used as is; cluster None),
    ``tcp://HOST:PORT`` (or any Dask address), or ``local`` / ``local:N`` (a new LocalCluster of
    N process workers, one thread each; N defaults to the cores). The caller closes what it did
    not pass in. Raises :class:`SchedulerUnavailable` if nothing answers within ``timeout``
    seconds or the scheduler has no worker within ``timeout``."""
    from dask.distributed import Client, LocalCluster

    if isinstance(scheduler, Client):
        return scheduler, None
    spec = str(scheduler)
    if spec == "local" or spec.startswith("local:"):
        n = n_workers
        if spec.startswith("local:"):
            try:
                n = int(spec[6:])
            except ValueError:
                raise ValueError(f"--scheduler {spec}: want local or local:N") from None
            if n < 1:
                raise ValueError(f"--scheduler {spec}: N must be >= 1")
        n = n or os.cpu_count() or 1
        _refuse_unguarded_main()
        # A free port for the scheduler's HTTP server (the dashboard when bokeh is installed):
        # the default 8787 may be another cluster's.
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                               dashboard_address=":0", host="127.0.0.1")
        return Client(cluster), cluster
    try:
        client = Client(spec, timeout=timeout)
    except (OSError, TimeoutError) as e:
        raise SchedulerUnavailable(
            f"tollfree.distributed: no Dask scheduler answered at {spec} within {timeout:g} s "
            f"({e}); start one with 'dask scheduler' and workers with 'dask worker {spec}'"
        ) from None
    try:
        client.wait_for_workers(1, timeout=timeout)
    except (OSError, TimeoutError):
        client.close()
        raise SchedulerUnavailable(f"tollfree.distributed: the scheduler at {spec} has no worker "
                                   f"after {timeout:g} s (start one with 'dask worker {spec}')"
                                   ) from None
    return client, None


class _Bar:
    """A one-line progress bar on stderr (only used when stderr is a terminal, or forced)."""

    def __init__(self, total: int, on: bool):
        self.total, self.on, self.done, self.t0, self.last = total, on, 0, time.monotonic(), 0.0

    def step(self, k: int = 1) -> None:
        self.done += k
        now = time.monotonic()
        if self.on and (now - self.last > 0.1 or self.done == self.total):
            self.last = now
            w = 30
            f = self.done / max(1, self.total)
            sys.stderr.write(f"\r[{'#' * int(w * f):<{w}}] {self.done}/{self.total} tasks "
                             f"{now - self.t0:6.1f} s")
            if self.done == self.total:
                sys.stderr.write("\n")
            sys.stderr.flush()


def sweep(panel, params: np.ndarray, client=None, chunk: int | None = None, *, names=None,
          threads: int = 1, isa: str = "auto", broadcast: bool | None = None, cache=None,
          progress: bool | None = None, quiet: bool = True, connect_timeout: float = 10.0,
          max_resubmits: int = 3, fee: float | None = None, stats: bool = False,
          fill: str | None = None, validate: bool = True, strategy=None, _task=None,
          time_stats: bool = False, periods_per_year=None):
    """Sweeps ``params`` over every instrument of ``panel`` on a Dask cluster.

    ``panel`` and the result are those of :func:`tollfree.panel.sweep_panel`, bit for bit.
    ``client``: a ``dask.distributed.Client``, an address (``tcp://HOST:PORT``), ``local[:N]``,
    or None: a sweep the cost model puts under SMALL_S seconds runs in-process; a larger one on
    a LocalCluster of one process per core, closed at the end. ``chunk``: combos per task (None:
    chosen so a task runs about 0.1-2 s). ``threads``: kernel threads per task (1: Dask gives the
    parallelism). ``broadcast``: scatter every series to every worker (None: when the panel is
    at most BROADCAST_BYTES or has fewer instruments than worker threads). ``cache``: keep a
    prepared series per instrument on each worker so blocks after the first skip the first stage
    (None: when the blocks of an instrument would redo its first stage more than CACHE_DUP
    times). ``progress``: a bar on stderr (None: when stderr is a terminal); with ``quiet=False``
    the dashboard link is printed too. ``fee`` (None: the kernel's default, 0.09) and ``stats``
    (every statistic and the derived figures), ``fill`` and ``validate`` (gaps refused, or
    filled forward; ``df.attrs["tollfree"]["filled"]``) are :func:`tollfree.panel.sweep_panel`'s,
    checked on the client before anything is sent. Raises :class:`SchedulerUnavailable` when no
    scheduler answers within ``connect_timeout`` s, and RuntimeError when called to start a
    LocalCluster inside a worker process (a script without the ``__main__`` guard).

    ``strategy`` (as :func:`tollfree.sweep` takes it) reaches the workers by name: a built-in
    name or a plugin path as a string (the .so must be at that path on every worker), a
    :func:`tollfree.strategies.define` strategy by its functions (pickled by reference: they
    must be importable on the workers, from a module, not ``__main__``; each worker compiles
    them once). A plain-Python strategy runs in-process only (it would hold each worker's GIL).
    ``params`` is then its (n, k) float64 grid.

    ``time_stats=True`` (or ``periods_per_year=``): the time-aware figures appended as
    :func:`tollfree.panel.sweep_panel` appends them, each task booking its block's figures in its
    one sweep (no series cache then): the same bits as in process.
    """
    from tollfree import strategies as _st

    r_st = _st.resolve(strategy)
    if r_st.is_hma:
        params = binding.as_params(params) if strategy is None else binding.hma_params(params)
        spec = None
    else:
        params = r_st.params(params)
        spec = r_st.spec
        if r_st.kind == "python" and client is not None:
            raise ValueError(f"strategy {r_st.name} is plain Python: it runs in-process only "
                             "(client=None); decorate init and step with numba.njit to send it "
                             "to Dask workers")
    fee = as_fee(fee)
    stats = bool(stats)
    time_stats = bool(time_stats) or periods_per_year is not None
    if periods_per_year is not None and not (0.0 < float(periods_per_year) < float("inf")):
        raise ValueError(f"periods_per_year must be a positive finite number, got "
                         f"{periods_per_year}")
    prep = prepare_panel(panel, names, fill, validate)
    names, series = prep.names, prep.series
    if isa not in binding.ISAS:
        raise ValueError(f"isa must be one of {sorted(binding.ISAS)}, got {isa!r}")
    threads = binding.as_threads(threads)
    if chunk is not None and int(chunk) < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    lengths = [s.shape[0] for s in series]
    if client is None and (estimate_seconds(lengths, params) < SMALL_S
                           or r_st.kind == "python"):
        return _attach(sweep_panel(dict(zip(names, series)), params, threads=None, isa=isa,
                                   fee=fee, stats=stats, validate=False, strategy=r_st,
                                   time_stats=time_stats, periods_per_year=periods_per_year),
                       prep)
    own = client is None
    cl, cluster = connect("local" if own else client, timeout=connect_timeout)
    try:
        if not cl.scheduler_info()["workers"]:
            try:
                cl.wait_for_workers(1, timeout=connect_timeout)
            except (OSError, TimeoutError):
                raise SchedulerUnavailable(f"tollfree.distributed: the scheduler has no worker "
                                           f"after {connect_timeout:g} s") from None
        return _attach(_run(cl, names, series, params, chunk, threads, isa, broadcast, cache,
                            progress, quiet, max_resubmits, _task or _block, fee, stats, spec,
                            r_st, (periods_per_year,) if time_stats else None), prep)
    finally:
        if cl is not client:
            cl.close()
        if cluster is not None:
            cluster.close()


def _bokeh() -> bool:
    import importlib.util

    return importlib.util.find_spec("bokeh") is not None


def _has_dashboard(client, info) -> bool:
    """The scheduler serves HTTP without bokeh too, but its dashboard pages need bokeh."""
    if not info.get("services", {}).get("dashboard"):
        return False
    try:
        return bool(client.run_on_scheduler(_bokeh))
    except Exception:  # noqa: BLE001  (a scheduler that refuses run_on_scheduler: assume yes)
        return True


def _run(client, names, series, params, chunk, threads, isa, broadcast, cache, progress, quiet,
         max_resubmits, task, fee, stats, spec=None, r_st=None, timed=None):
    """timed: None, or (periods_per_year,) for the time-aware figures."""
    from dask.distributed import as_completed

    info = client.scheduler_info()
    n_threads = sum(w.get("nthreads", 1) for w in info["workers"].values()) or 1
    if not quiet:
        dash = client.dashboard_link if _has_dashboard(client, info) else None
        print(f"dask: {client.scheduler.address}, {len(info['workers'])} workers, "
              f"{n_threads} threads" + (f", dashboard {dash}" if dash else ""), file=sys.stderr)
    m = params.shape[0]
    # Blocks are cut from the grid sorted by L (stable), so a block needs few first-stage
    # lengths; results go back to the order given.
    order = np.argsort(params[:, 0], kind="stable")
    sparams = np.ascontiguousarray(params[order])
    lengths = [s.shape[0] for s in series]
    blocks = plan(lengths, sparams, chunk, n_threads,
                  False if spec is not None or timed else cache)
    if broadcast is None:
        broadcast = (sum(s.nbytes for s in series) <= BROADCAST_BYTES
                     or len(series) < n_threads)
    token = f"tollfree-{uuid.uuid4().hex[:12]}"
    pnl = [np.empty(m, dtype=np.float64) for _ in series]
    trades = [np.empty(m, dtype=np.int64) for _ in series]
    srows = [np.empty(m, dtype=binding.STATS_DTYPE) for _ in series] if stats or timed else None
    trows = None
    if timed:
        from tollfree.stats import TIME_DTYPE, TIME_FIGURES
        trows = [np.empty(m, dtype=TIME_DTYPE) for _ in series]

    def scatter(i):
        return client.scatter(series[i], broadcast=broadcast, hash=False)

    pf = client.scatter(sparams, broadcast=True, hash=False)
    sf = {}
    todo = [i for i, b, _ in blocks if b]
    if todo:
        futs = client.scatter([series[i] for i in todo], broadcast=broadcast, hash=False)
        sf = dict(zip(todo, futs))
    meta = {}

    def submit(i, lo, hi, use):
        kw = {} if spec is None else {"strategy": spec}  # HMA: the task's signature as before
        if timed:
            kw.update(time_stats=True, periods_per_year=timed[0])
        f = client.submit(task, sf[i], pf, lo, hi, f"{token}-{i}", int(threads), isa, use,
                          fee=fee, stats=stats, **kw,
                          key=f"{token}-{i}-{lo}-{uuid.uuid4().hex[:6]}", pure=False)
        meta[f.key] = (i, lo, hi, use)
        return f

    futures = [submit(i, lo, hi, use) for i, bl, use in blocks for lo, hi in bl]
    n_tasks = len(futures)
    bar = _Bar(len(futures), sys.stderr.isatty() if progress is None else bool(progress))
    resubmits = {}
    ac = as_completed(futures)
    try:
        for f in ac:
            i, lo, hi, use = meta.pop(f.key)
            if f.status == "error":
                raise f.exception()
            res = _result_or_lost(f) if f.status == "finished" else None
            if res is not None:
                rows = order[lo:hi]
                if timed:
                    res, figs = res
                    for name in binding.STAT_NAMES:
                        srows[i][name][rows] = res[name]
                    for name in TIME_FIGURES:
                        trows[i][name][rows] = figs[name]
                elif stats:
                    for name in binding.STAT_NAMES:
                        srows[i][name][rows] = res[name]
                else:
                    pnl[i][rows], trades[i][rows] = res
                bar.step()
            else:
                # Cancelled or lost: its series was only on a worker that died. Scatter the
                # series again (once per loss) and resubmit the block.
                n = resubmits[(i, lo)] = resubmits.get((i, lo), 0) + 1
                if n > max_resubmits:
                    raise RuntimeError(f"tollfree.distributed: block {lo}:{hi} of {names[i]!r} "
                                       f"lost {n} times")
                if sf[i].status != "finished":
                    sf[i] = scatter(i)
                if pf.status != "finished":
                    pf = client.scatter(sparams, broadcast=True, hash=False)
                g = submit(i, lo, hi, use)
                futures.append(g)
                ac.add(g)
            f.release()
    except BaseException:
        client.cancel([g for g in futures if not g.done()])
        raise
    finally:
        try:
            client.run(_drop_cache, token)
        except Exception:  # noqa: BLE001  (a worker gone: its cache went with it)
            pass
    pnames = r_st.param_names if spec is not None else PARAM_NAMES
    if timed and not stats:
        pnl = [r["pnl"] for r in srows]
        trades = [r["trades"] for r in srows]
    df = (stats_frame(names, params, srows, pnames) if stats
          else result_frame(names, params, pnl, trades, pnames))
    if timed:
        for name in TIME_FIGURES:
            df[name] = np.concatenate([t[name] for t in trows]) if trows else np.empty(0)
    df.attrs["tollfree"] = {"tasks": n_tasks, "resubmitted": sum(resubmits.values()),
                            "broadcast": bool(broadcast), "workers": len(info["workers"]),
                            "threads": n_threads,
                            "cached_instruments": sum(1 for _, b, u in blocks if u)}
    return df



if __name__ == "__main__":  # `tollfree sweep --panel/--scheduler` runs this (src/cli/cmd_sweep.c)
    from tollfree.panel import main

    sys.exit(main())
