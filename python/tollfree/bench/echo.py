"""The echo curve: round trip of 1 .. 150,000 floats over unix, tcp and shm, two Python clients.

- **naive**: written here the way the published study wrote its client: the v1 echo request built
  by ``bytes`` concatenation (``header + arr.tobytes()``), the reply gathered by ``data += recv()``
  into fresh ``bytes`` objects, then ``np.frombuffer``. Over shared memory (which the study never
  had) "naive" means the same habits around the shm client: ``tobytes()`` in, ``bytes(reply)`` out.
- **zero-copy**: tollfree's own client (``tollfree.connect(url).echo``): ``sendmsg`` of memoryviews,
  ``recv_into`` reused buffers, or the shared-memory rings.

Each (transport, placement, size) runs 5+ interleaved rounds of ``k`` timed calls per client;
every call is timed on its own (median and p99 over all calls). The first reply of each round is
checked bit-identical to what was sent. ``T(b) = floor + 2 b / bandwidth`` is fitted per transport
and client on the medians (least squares on relative error, so small sizes count).
"""
from __future__ import annotations

import socket
import struct
import time

import numpy as np

from tollfree.bench import harness as H

SIZES = (1, 10, 100, 1000, 10_000, 100_000, 150_000)
QUICK_SIZES = (1, 1000, 150_000)
_V1 = struct.Struct("<IBII")


class NaiveV1Client:
    """The study's client habits, over a Unix or TCP socket, speaking v1 (opcode 1 = echo)."""

    def __init__(self, family: str, addr):
        if family == "unix":
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.connect(addr)
        else:
            self.sock = socket.create_connection(addr)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.settimeout(60.0)  # a hung server becomes an error row

    def echo(self, x: np.ndarray) -> np.ndarray:
        n = x.shape[0]
        body = struct.pack("<BII", 1, n, 0) + x.tobytes()
        self.sock.sendall(struct.pack("<I", len(body)) + body)
        hdr = b""
        while len(hdr) < 4:
            chunk = self.sock.recv(4 - len(hdr))
            if not chunk:
                raise ConnectionError("server closed")
            hdr += chunk
        (ln,) = struct.unpack("<I", hdr)
        data = b""
        while len(data) < ln:
            chunk = self.sock.recv(min(65536, ln - len(data)))
            if not chunk:
                raise ConnectionError("server closed")
            data += chunk
        if ln != 8 * n:
            raise RuntimeError(f"v1 echo: reply of {ln} bytes for {n} floats (error frame?)")
        return np.frombuffer(data, dtype="<f8")

    def close(self) -> None:
        self.sock.close()


class NaiveShm:
    """The naive habits around the shm client: a fresh bytes copy in, a fresh bytes copy out."""

    def __init__(self, client):
        self.client = client

    def echo(self, x: np.ndarray) -> np.ndarray:
        wire = np.frombuffer(x.tobytes(), dtype="<f8")
        return np.frombuffer(bytes(memoryview(self.client.echo(wire)).cast("B")), dtype="<f8")

    def close(self) -> None:
        pass


ROUND_BUDGET_S = 0.15        # a round of a slow configuration is cut to about this long
QUICK_ROUND_BUDGET_S = 0.01


def calls_per_round(n_floats: int, quick: bool) -> int:
    if quick:
        return 20 if n_floats < 10_000 else 5
    if n_floats <= 100:
        return 400
    if n_floats <= 1000:
        return 300
    if n_floats <= 10_000:
        return 120
    return 40


def as_f64(y) -> np.ndarray:
    """An echo reply (ndarray of any dtype, bytes, memoryview) seen as float64."""
    if isinstance(y, np.ndarray) and y.dtype == np.float64:
        return y
    return np.frombuffer(memoryview(np.ascontiguousarray(y) if isinstance(y, np.ndarray) else y)
                         .cast("B"), dtype="<f8")


def _round(client, x, k, out: list, budget_s: float) -> None:
    """Gate (first reply bit-identical), then ``k`` timed calls, fewer if one call is slow
    (at least 5 per round, about ``budget_s`` in all)."""
    t0 = time.perf_counter()
    if not H.same_bits(as_f64(client.echo(x)), x):
        raise H.GateFailure(f"echo of {x.shape[0]} floats came back different")
    first = time.perf_counter() - t0
    k = max(5, min(k, int(budget_s / max(first, 1e-9))))
    pc = time.perf_counter_ns
    echo = client.echo
    with H.no_gc():
        for _ in range(k):
            t0 = pc()
            echo(x)
            out.append(pc() - t0)


def measure(clients: dict, placement: str, servers, reps: int, quick: bool, log=None) -> list[dict]:
    """``clients``: {name: client or an exception} for one transport; ``servers`` are pinned
    per the placement before each round. Returns a row per (client, size)."""
    cl_cpus, sv_cpus = H.placement_cpus(placement)
    rows = []
    sizes = QUICK_SIZES if quick else SIZES
    rng = np.random.default_rng(7)
    for n in sizes:
        x = rng.standard_normal(n)
        k = calls_per_round(n, quick)
        samples = {name: [] for name in clients}
        rmed = {name: [] for name in clients}
        bad = {name: (H.UNAVAILABLE if isinstance(c, H.Unavailable) else H.ERROR, str(c))
               for name, c in clients.items() if isinstance(c, Exception)}
        names = [n_ for n_ in clients if n_ not in bad]
        for r in range(reps):
            order = names[r % len(names):] + names[:r % len(names)] if names else []
            for name in order:
                if name in bad:
                    continue
                for sv in servers:
                    sv.pin(sv_cpus)
                H.pin_thread(cl_cpus)
                before = len(samples[name])
                try:
                    _round(clients[name], x, k, samples[name],
                           QUICK_ROUND_BUDGET_S if quick else ROUND_BUDGET_S)
                    rmed[name].append(float(np.median(samples[name][before:])) * 1e-9)
                except H.GateFailure as e:
                    bad[name] = (H.FAILED, str(e))
                except Exception as e:  # noqa: BLE001
                    bad[name] = (H.ERROR, f"{type(e).__name__}: {e}")
        for name in clients:
            d = {"client": name, "n_floats": n, "bytes": 8 * n, "placement": placement,
                 "calls": len(samples[name])}
            if name in bad:
                d.update(status=bad[name][0], reason=bad[name][1])
            else:
                a = np.asarray(samples[name], dtype=np.float64) * 1e-9
                d.update(status=H.OK, median_s=float(np.median(a)),
                         p99_s=float(np.percentile(a, 99)), min_s=float(a.min()),
                         round_median_min_s=min(rmed[name]), round_median_max_s=max(rmed[name]))
            rows.append(d)
        if log:
            log(f"  echo {placement} {n} floats done")
    return rows


def fit(rows: list[dict]) -> dict | None:
    """``T(b) = floor + 2 b / bandwidth`` on the medians; weights 1/T (relative error)."""
    pts = [(d["bytes"], d["median_s"]) for d in rows if d.get("status") == H.OK]
    if len(pts) < 2:
        return None
    b = np.array([p[0] for p in pts], dtype=np.float64)
    t = np.array([p[1] for p in pts], dtype=np.float64)
    w = 1.0 / t
    A = np.stack([np.ones_like(b), b], axis=1) * w[:, None]
    (floor, slope), *_ = np.linalg.lstsq(A, t * w, rcond=None)
    bw = 2.0 / slope if slope > 0 else float("inf")
    return {"floor_s": float(floor), "bandwidth_Bps": float(bw), "points": len(pts)}
