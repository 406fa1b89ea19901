"""The sweep on Dask distributed: the same bits as tollfree.sweep, with or without a worker dying,
whatever order tasks finish in; a missing scheduler is a clear error, never a hang.

One LocalCluster of two process workers (one thread each) serves the whole module."""
from __future__ import annotations

import os
import socket
import subprocess
import time

import numpy as np
import pytest

pytest.importorskip("pandas")
distributed = pytest.importorskip("distributed")

from tollfree import distributed as TD, panel as P  # noqa: E402
from tollfree._lib import bin_path  # noqa: E402
from tollfree.data import generate_close  # noqa: E402
from tollfree.grid import grid  # noqa: E402
from conftest import DEADLINE  # noqa: E402
from test_panel import (bits, check_against_sweep, check_stats_against_sweep_stats,  # noqa: E402
                        random_grid, random_panel)


@pytest.fixture(scope="module")
def client():
    from dask.distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                           dashboard_address=":0", host="127.0.0.1")
    c = Client(cluster)
    try:
        c.wait_for_workers(2, timeout=DEADLINE)
        yield c
    finally:
        c.close()
        cluster.close()


def healthy(c) -> None:
    """After a worker died: wait (against hangs only) until its nanny has brought it back."""
    c.wait_for_workers(2, timeout=DEADLINE)


@pytest.mark.parametrize("broadcast,cache", [(True, False), (False, True), (None, None)])
def test_bits_equal_sweep(client, broadcast, cache):
    pan, g = random_panel(), random_grid()
    df = TD.sweep(pan, g, validate=False, client=client, chunk=5, broadcast=broadcast, cache=cache)
    check_against_sweep(df, pan, g)
    assert df.attrs["tollfree"]["tasks"] == 6 * 7  # 6 series x ceil(33 / 5) blocks
    ref = P.sweep_panel(pan, g, validate=False)
    assert np.array_equal(bits(df.pnl.to_numpy()), bits(ref.pnl.to_numpy()))


@pytest.mark.parametrize("broadcast,cache", [(True, False), (False, True)])
def test_stats_and_fee_bits_equal_sweep_stats(client, broadcast, cache):
    """stats=True with a fee, on the cluster: every statistic and derived figure of every row is
    tollfree.sweep_stats(close, params, fee=fee)'s, raw bits, with blocks from a plain sweep
    (cache=False) or from a prepared series' cache (cache=True), and equal to sweep_panel's."""
    pan, g = random_panel(11), random_grid(6)
    df = TD.sweep(pan, g, validate=False, client=client, chunk=5, broadcast=broadcast,
                  cache=cache, fee=0.25, stats=True)
    check_stats_against_sweep_stats(df, pan, g, 0.25)
    assert df.attrs["tollfree"]["tasks"] == 6 * 7
    assert df.attrs["tollfree"]["cached_instruments"] == (6 if cache else 0)
    ref = P.sweep_panel(pan, g, fee=0.25, stats=True, validate=False)
    for n in P.STATS_COLUMNS[1:]:
        assert df[n].to_numpy().tobytes() == ref[n].to_numpy().tobytes(), n
    plain = TD.sweep(pan, g, validate=False, client=client, chunk=7, cache=cache,
                     fee=0.0)  # no stats, a fee
    for k, close in pan.items():
        sub = plain[plain.instrument == k]
        p, t = P.binding.sweep(close, g, fee=0.0, **P._raw_kw(P.binding.sweep))
        assert np.array_equal(bits(sub.pnl.to_numpy()), bits(p)) and \
            np.array_equal(sub.trades.to_numpy(), t), k
    with pytest.raises(ValueError, match="finite"):
        TD.sweep(pan, g, validate=False, client=client, fee=float("inf"))


def test_auto_chunk_and_dataframe_panel(client):
    import pandas as pd

    a, b = generate_close(3000, 1), generate_close(2000, 2)
    frame = pd.DataFrame({"a": a, "b": np.r_[b, np.full(1000, np.nan)]})
    g = grid(2, 200, 40)
    df = TD.sweep(frame, g, client=client)
    check_against_sweep(df, {"a": a, "b": b}, g)
    plan = TD.plan([3000, 2000], g, None, 2)
    assert [i for i, _, _ in plan] == [0, 1] and all(bl for _, bl, _ in plan)


def _slow_first(delay: float):
    """A task that makes early blocks finish last (completion order != submission order)."""
    def task(close, params, lo, hi, key, threads, isa, use, **kw):
        import time as t

        from tollfree import distributed as D

        if lo == 0:
            t.sleep(delay)
        return D._block(close, params, lo, hi, key, threads, isa, use, **kw)
    return task


def test_order_independent_of_completion(client):
    pan, g = random_panel(9), random_grid(4)
    df = TD.sweep(pan, g, validate=False, client=client, chunk=4, _task=_slow_first(0.3))
    check_against_sweep(df, pan, g)


def _kill_once(marker: str, instrument: int):
    """A task that kills its own worker process, the first time only (an O_EXCL marker file),
    on a later block of one instrument: mid-sweep, with other results already on that worker."""
    def task(close, params, lo, hi, key, threads, isa, use, **kw):
        import os as o

        from tollfree import distributed as D

        if key.endswith(f"-{instrument}") and lo > 0:
            try:
                fd = o.open(marker, o.O_CREAT | o.O_EXCL | o.O_WRONLY)
            except FileExistsError:
                pass
            else:
                o.close(fd)
                o.kill(o.getpid(), 9)
        return D._block(close, params, lo, hi, key, threads, isa, use, **kw)
    return task


@pytest.mark.parametrize("broadcast,stats", [(True, False), (False, False), (False, True)])
def test_worker_killed_mid_sweep_same_bits(client, tmp_path, broadcast, stats):
    pan, g = random_panel(13), random_grid(5)
    marker = str(tmp_path / "killed")
    try:
        df = TD.sweep(pan, g, validate=False, client=client, chunk=3, broadcast=broadcast,
                      cache=True, stats=stats, fee=0.5 if stats else None,
                      _task=_kill_once(marker, 5))
    finally:
        healthy(client)
    assert os.path.exists(marker)  # a worker did die
    if stats:
        check_stats_against_sweep_stats(df, pan, g, 0.5)
    else:
        check_against_sweep(df, pan, g)


class _RaceFuture:
    """A future that distributed reports finished and that turns cancelled while its result is
    read (its worker died between the gather and the status check): distributed's Future.result
    then raises the gathered value, a TypeError. Seen in CI on test_worker_killed_mid_sweep."""
    def __init__(self, status_after, exc):
        self.status, self._after, self._exc = "finished", status_after, exc

    def result(self):
        self.status = self._after
        raise self._exc


def test_future_cancelled_while_read_is_lost_not_an_error():
    assert TD._result_or_lost(_RaceFuture("cancelled", TypeError("exceptions must derive from "
                                                                 "BaseException"))) is None
    from distributed import CancelledError
    assert TD._result_or_lost(_RaceFuture("cancelled", CancelledError("k"))) is None
    # An error of a future that is not cancelled is the task's own: it is raised.
    with pytest.raises(ValueError, match="a task's own error"):
        TD._result_or_lost(_RaceFuture("error", ValueError("a task's own error")))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_missing_scheduler_is_a_clear_error():
    port = _free_port()  # nothing listens there
    t0 = time.monotonic()
    with pytest.raises(TD.SchedulerUnavailable, match=f"no Dask scheduler answered at "
                                                      f"tcp://127.0.0.1:{port}"):
        TD.sweep({"a": generate_close(100, 1)}, grid(2, 9, 2), client=f"tcp://127.0.0.1:{port}",
                 connect_timeout=2)
    assert time.monotonic() - t0 < DEADLINE  # against a hang only


def test_small_sweep_stays_in_process(monkeypatch):
    def no_cluster(*a, **k):
        raise AssertionError("a small sweep must not start a cluster")

    monkeypatch.setattr(TD, "connect", no_cluster)
    pan, g = random_panel(), random_grid()
    check_against_sweep(TD.sweep(pan, g, validate=False), pan, g)
    check_stats_against_sweep_stats(TD.sweep(pan, g, validate=False, stats=True, fee=0.3), pan,
                                    g, 0.3)


def test_cli_scheduler(client, tmp_path):
    d = tmp_path / "panel"
    d.mkdir()
    for i, n in enumerate([2000, 900, 1]):
        generate_close(n, 30 + i).tofile(d / f"s{i}.f64")
    args = [bin_path(), "sweep", "--panel", str(d), "--grid", "2:80:9"]
    local = subprocess.run(args + ["--quiet"], capture_output=True, text=True, timeout=DEADLINE)
    assert local.returncode == 0, local.stderr
    addr = client.scheduler.address
    dask = subprocess.run(args + ["--scheduler", addr, "--chunk", "2"], capture_output=True,
                          text=True, timeout=DEADLINE)
    assert dask.returncode == 0, dask.stderr
    assert dask.stdout == local.stdout  # same rows, same text, same bits
    assert local.stdout.splitlines()[0].endswith(",sharpe_per_trade,avg_trade")  # every column
    assert f"dask: {addr}, 2 workers" in dask.stderr and "(Dask " in dask.stderr
    assert "Warning" not in dask.stderr
    ranked = ["--fee", "0.3", "--sort", "-max_dd", "--top", "2", "--columns", "L,pnl,max_dd"]
    local = subprocess.run(args + ["--quiet"] + ranked, capture_output=True, text=True,
                           timeout=DEADLINE)
    dask = subprocess.run(args + ["--quiet", "--scheduler", addr, "--chunk", "2"] + ranked,
                          capture_output=True, text=True, timeout=DEADLINE)
    assert local.returncode == 0 and dask.returncode == 0, (local.stderr, dask.stderr)
    assert dask.stdout == local.stdout and len(local.stdout.splitlines()) == 1 + 3 * 2
    port = _free_port()
    bad = subprocess.run(args + ["--scheduler", f"tcp://127.0.0.1:{port}", "--connect-timeout",
                                 "1"], capture_output=True, text=True, timeout=DEADLINE)
    assert bad.returncode == 1 and "no Dask scheduler answered" in bad.stderr


def test_gap_refused_before_any_task_or_filled_forward(client):
    """A gap inside a column: refused on the client (naming instrument and row) before anything
    is sent, or filled forward when asked, with the same bits and count as sweep_panel."""
    import pandas as pd

    idx = pd.bdate_range("2024-01-01", periods=400)
    frame = pd.DataFrame({"A": generate_close(400, 7)}, index=idx).resample("D").last()
    g = grid(2, 60, 8)
    with pytest.raises(ValueError, match=r"instrument 'A', row at index label 2024-01-06 "
                                         r"\(position 5\): a gap"):
        TD.sweep(frame, g, client=client, chunk=3)
    df = TD.sweep(frame, g, client=client, chunk=3, fill="forward")
    ref = P.sweep_panel(frame, g, fill="forward")
    assert df.pnl.to_numpy().tobytes() == ref.pnl.to_numpy().tobytes()
    assert df.attrs["tollfree"]["filled"] == ref.attrs["tollfree"]["filled"] == {"A": 158}
    assert df.attrs["tollfree"]["tasks"] == 3 and df.attrs["tollfree"]["notes"]


UNGUARDED = """
import sys
from tollfree import distributed
from tollfree.data import generate_close
from tollfree.grid import grid
print("imported as", __name__, file=sys.stderr, flush=True)
df = distributed.sweep({"a": generate_close(500, 1)}, grid(2, 9, 2), client="local:1")
print("rows", len(df))
"""

GUARDED = """
import sys
from tollfree import distributed
from tollfree.data import generate_close
from tollfree.grid import grid


def main():
    df = distributed.sweep({"a": generate_close(500, 1)}, grid(2, 9, 2), client="local:1")
    print("rows", len(df))


print("imported as", __name__, file=sys.stderr, flush=True)
if __name__ == "__main__":
    main()
"""

# The check in a process multiprocessing started: the script's re-import asks for a cluster.
CHILD = """
import multiprocessing
import sys
from tollfree import distributed

if __name__ == "__mp_main__":
    distributed.connect("local:1")


def nothing():
    pass


if __name__ == "__main__":
    p = multiprocessing.get_context("spawn").Process(target=nothing)
    p.start()
    p.join()
    print("child exit", p.exitcode)
"""


def _script(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(__import__("pathlib").Path(TD.__file__).parents[1])]
        + [x for x in os.environ.get("PYTHONPATH", "").split(os.pathsep) if x]))
    # Bounded: before the check, this script respawned Dask workers until killed.
    return subprocess.run(["/usr/bin/python3", str(path)], capture_output=True, text=True,
                          timeout=DEADLINE, env=env, cwd=tmp_path)


def test_script_without_main_guard_fails_at_once_instead_of_respawning(tmp_path):
    r = _script(tmp_path, "unguarded.py", UNGUARDED)
    assert r.returncode == 1 and "rows" not in r.stdout
    assert f"{tmp_path / 'unguarded.py'}, line 7, starts a Dask LocalCluster" in r.stderr
    assert "    if __name__ == \"__main__\":\n" in r.stderr and "RuntimeError" in r.stderr
    assert r.stderr.count("imported as") == 1  # no worker process ever ran the script
    g = _script(tmp_path, "guarded.py", GUARDED)
    assert g.returncode == 0 and "rows 2" in g.stdout, g.stderr
    assert "imported as __main__" in g.stderr  # and the workers' re-imports did not loop


def test_cluster_asked_for_while_a_child_reimports_the_script(tmp_path):
    r = _script(tmp_path, "child.py", CHILD)
    assert r.returncode == 0 and "child exit 1" in r.stdout, r.stderr
    assert "a LocalCluster was asked for while this worker process" in r.stderr
    assert f"imports {tmp_path / 'child.py'} again" in r.stderr


@pytest.mark.parametrize("strategy,stats", [(None, False), (None, True), ("sma_cross", True)])
def test_time_stats_bits_equal_in_process(client, strategy, stats):
    """time_stats=True on the cluster (each task books its block's figures in its one sweep):
    every column of every row is sweep_panel(time_stats=True)'s in process, raw bits (NaN and
    inf closes inside, an empty series, a one-bar one), HMA and a built-in strategy."""
    from tollfree.stats import TIME_FIGURES
    pan = random_panel(13)
    if strategy is None:
        g = random_grid(8)
    else:
        g = np.array([[f, s] for f in (2, 3, 5) for s in (10, 21, 40)], dtype=np.float64)
    df = TD.sweep(pan, g, validate=False, client=client, chunk=4, fee=0.05, stats=stats,
                  strategy=strategy, time_stats=True, periods_per_year=252)
    ref = P.sweep_panel(pan, g, fee=0.05, stats=stats, validate=False, strategy=strategy,
                        time_stats=True, periods_per_year=252)
    assert list(df.columns) == list(ref.columns) and set(TIME_FIGURES) <= set(df.columns)
    assert df.attrs["tollfree"]["tasks"] == 6 * -(-len(g) // 4)
    assert df.attrs["tollfree"]["cached_instruments"] == 0
    for n in ref.columns[1:]:
        assert df[n].to_numpy().tobytes() == ref[n].to_numpy().tobytes(), n
    assert list(df.instrument) == list(ref.instrument)


def test_cli_scheduler_time_stats(client, tmp_path):
    """`sweep --panel DIR --scheduler ADDR --time-stats`: the rows of the in-process run."""
    d = tmp_path / "panel"
    d.mkdir()
    for k, n in (("a", 1200), ("b", 900)):
        c = generate_close(n, n)
        (d / f"{k}.csv").write_text("close\n" + "\n".join(repr(float(v)) for v in c) + "\n")
    addr = client.scheduler.address
    base = [bin_path(), "sweep", "--panel", str(d), "--periods-per-year", "252", "--quiet",
            "--sort", "-sharpe", "--top", "7"]
    there = subprocess.run(base + ["--scheduler", addr, "--chunk", "9"], capture_output=True,
                           text=True, timeout=DEADLINE)
    here = subprocess.run(base, capture_output=True, text=True, timeout=DEADLINE)
    assert there.returncode == 0, there.stderr
    assert here.returncode == 0, here.stderr
    assert there.stdout == here.stdout and there.stdout.count("\n") == 1 + 2 * 7
