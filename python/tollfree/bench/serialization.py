"""The serialization tax: encode + decode of 150,000 floats, every common way, against raw bytes.

Each codec is gated first (the decoded array has exactly the original bits), then timed in
interleaved rounds. Fast codecs run many times per sample so that each sample lasts >= ~2 ms.
"raw" is ``ndarray.tobytes()`` + ``np.frombuffer`` (one copy: what the study called raw);
memoryview and pickle-5 out-of-band make no copy at all (what tollfree's clients do).
"""
from __future__ import annotations

import json
import pickle
import struct
import time

import numpy as np

from tollfree.bench import harness as H


def codecs(n: int) -> list[tuple[str, callable, callable, str]]:
    """(name, encode(x) -> wire, decode(wire) -> ndarray, copies note)."""
    fmt = struct.Struct(f"<{n}d")
    out = [
        ("raw: tobytes + frombuffer", lambda x: x.tobytes(),
         lambda b: np.frombuffer(b, dtype="<f8"), "1 copy"),
        ("memoryview (buffer protocol)", lambda x: memoryview(x).cast("B"),
         lambda m: np.frombuffer(m, dtype="<f8"), "0 copies"),
        ("pickle 5, out-of-band buffers", _pickle_oob_enc, _pickle_oob_dec, "0 copies"),
        ("pickle 5, in-band", lambda x: pickle.dumps(x, protocol=5), pickle.loads, "2 copies"),
        ("struct.pack / unpack", lambda x: fmt.pack(*x.tolist()),
         lambda b: np.array(fmt.unpack(b), dtype=np.float64), "boxes every float"),
        ("JSON (list of floats)", lambda x: json.dumps(x.tolist()),
         lambda s: np.array(json.loads(s), dtype=np.float64), "text"),
    ]
    try:
        import msgpack
        out.append(("msgpack (list of floats)", lambda x: msgpack.packb(x.tolist()),
                    lambda b: np.array(msgpack.unpackb(b), dtype=np.float64), "boxes every float"))
        out.append(("msgpack bin (tobytes)", lambda x: msgpack.packb(x.tobytes()),
                    lambda b: np.frombuffer(msgpack.unpackb(b), dtype="<f8"), "2 copies"))
    except ImportError:
        pass
    return out


def _pickle_oob_enc(x):
    bufs: list = []
    head = pickle.dumps(x, protocol=5, buffer_callback=bufs.append)
    return head, bufs


def _pickle_oob_dec(w):
    head, bufs = w
    return pickle.loads(head, buffers=bufs)


def _calibrate(fn, arg, target_s: float) -> int:
    t0 = time.perf_counter()
    fn(arg)
    dt = max(time.perf_counter() - t0, 1e-7)
    return max(1, min(20000, int(target_s / dt)))


def run(x: np.ndarray, reps: int, quick: bool = False, log=None) -> dict:
    """Times each codec: per round, ``inner`` encodes, then ``inner`` decodes; per-call seconds."""
    x = np.ascontiguousarray(x, dtype="<f8")
    target = 0.0005 if quick else 0.002
    rows = []
    state = []
    for name, enc, dec, copies in codecs(x.size):
        d = {"name": name, "copies": copies, "status": H.OK}
        try:
            w = enc(x)
            y = dec(w)
            if not H.same_bits(np.asarray(y), x):
                raise H.GateFailure("decoded bits differ from the original")
            if isinstance(w, tuple):
                size = len(w[0]) + sum(memoryview(b).nbytes for b in w[1])
            else:
                size = memoryview(w.encode() if isinstance(w, str) else w).nbytes
            d["wire_bytes"] = size
            ie, idec = _calibrate(enc, x, target), _calibrate(dec, w, target)
            state.append((d, enc, dec, w, ie, idec, [], []))
        except H.GateFailure as e:
            d.update(status=H.FAILED, reason=str(e))
        except Exception as e:  # noqa: BLE001
            d.update(status=H.ERROR, reason=f"{type(e).__name__}: {e}")
        rows.append(d)
    for r in range(reps):
        k = r % len(state) if state else 0
        for d, enc, dec, w, ie, idec, es, ds in state[k:] + state[:k]:
            with H.no_gc():
                t0 = time.perf_counter_ns()
                for _ in range(ie):
                    enc(x)
                t1 = time.perf_counter_ns()
                for _ in range(idec):
                    dec(w)
                t2 = time.perf_counter_ns()
            es.append((t1 - t0) * 1e-9 / ie)
            ds.append((t2 - t1) * 1e-9 / idec)
        if log:
            log(f"  serialization round {r + 1}/{reps}")
    for d, enc, dec, w, ie, idec, es, ds in state:
        tot = [a + b for a, b in zip(es, ds)]
        d.update(encode_s=float(np.median(es)), decode_s=float(np.median(ds)),
                 median_s=float(np.median(tot)), min_s=float(min(tot)), max_s=float(max(tot)),
                 samples_s=tot, inner=[ie, idec])
    raw = next((d for d in rows if d["name"].startswith("raw") and d["status"] == H.OK), None)
    for d in rows:
        if raw and d["status"] == H.OK:
            d["ratio_to_raw"] = d["median_s"] / raw["median_s"]
    return {"n_floats": int(x.size), "bytes": int(x.nbytes), "reps": reps, "rows": rows}


def markdown(res: dict) -> str:
    hdr = ["codec", "copies", "wire bytes", "encode", "decode", "encode + decode (median)",
           "min - max", "ratio to raw"]
    rows = []
    for d in res["rows"]:
        if d["status"] != H.OK:
            rows.append([d["name"], d["copies"], "-", "-", "-", H.status_cell(d), "-", "-"])
            continue
        rows.append([d["name"], d["copies"], f"{d['wire_bytes']:,}", H.fmt_time(d["encode_s"]),
                     H.fmt_time(d["decode_s"]), H.fmt_time(d["median_s"]),
                     f"{H.fmt_time(d['min_s'])} - {H.fmt_time(d['max_s'])}",
                     H.fmt_ratio(d.get("ratio_to_raw"))])
    return H.md_table(hdr, rows)


def plot(res: dict, path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    ok = [d for d in res["rows"] if d["status"] == H.OK]
    ok.sort(key=lambda d: d["median_s"])
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(ok) + 1.5))
    vals = [d["median_s"] * 1e6 for d in ok]
    ax.barh([d["name"] for d in ok], vals, color=["#2a7" if "0 copies" in d["copies"] else "#888"
                                                  for d in ok])
    ax.set_xscale("log")
    for i, (v, d) in enumerate(zip(vals, ok)):
        r = d.get("ratio_to_raw", float("nan"))
        ax.text(v, i, f"  {v:,.1f} us ({r:,.0f}x raw)" if r >= 100 else f"  {v:,.1f} us ({r:.3g}x raw)",
                va="center", fontsize=8)
    ax.set_xlabel(f"encode + decode of {res['n_floats']:,} floats, median (us, log scale)")
    ax.set_title("Serialization tax (green: zero-copy)")
    ax.set_xlim(right=max(vals) * 300)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
