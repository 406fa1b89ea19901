"""The researcher's side of the sweep: metrics, out-of-sample splits and walk-forward folds.

The same folds, winners and ranks as ``tollfree sweep --split F`` / ``--walk-forward K``
(src/cli/research.c), bit for bit: each part of the series is swept cold (a strategy deployed
at that bar would start with nothing), by the in-process kernel."""
from __future__ import annotations

import math

import numpy as np

from tollfree import grid as _grid
from tollfree.binding import FEE_DEFAULT, STAT_NAMES, sweep, sweep_stats
from tollfree.stats import DERIVED, derived
from tollfree.data import to_close

# The metrics: every output of the sweep and every derived figure (docs/definition.md sections 8
# and 9), as `tollfree sweep --metric` takes them. Higher is better for all.
METRICS: tuple[str, ...] = tuple(STAT_NAMES) + DERIVED
_PLAIN = ("pnl", "trades")  # computed without the statistics

COLUMNS = ["fold", "is_start", "is_end", "oos_start", "oos_end", "L", "half", "sq", "p", "p3",
           "p2", "metric", "is_value", "is_pnl", "is_trades", "oos_value", "oos_pnl",
           "oos_trades", "oos_rank", "combos", "oos_best_value"]


def _check_metric(metric: str) -> str:
    """The column of a metric "name" (higher is better) or "-name" (lower is better)."""
    name = metric[1:] if isinstance(metric, str) and metric.startswith("-") else metric
    if name not in METRICS:
        raise ValueError(f"metric must be one of {', '.join(METRICS)} (or -name: lower is "
                         f"better), got {metric!r}")
    return name


def metric_values(metric: str, st: dict) -> np.ndarray:
    """The metric for every combo (float64, higher is better: "-name" negates the column) from a
    :func:`tollfree.sweep_stats` dict (pnl and trades alone suffice for those two)."""
    name = _check_metric(metric)
    v = np.asarray(derived(st)[name] if name in DERIVED else st[name], dtype=np.float64)
    return -v if metric.startswith("-") else v


def _sweep_for(metric, close, params, threads, isa, fee) -> dict:
    if _check_metric(metric) in _PLAIN:
        p, t = sweep(close, params, threads=threads, isa=isa, fee=fee)
        return {"pnl": p, "trades": t}
    return sweep_stats(close, params, threads=threads, isa=isa, fee=fee)


def folds(n: int, split: float | None = None, walk_forward: int | None = None):
    """The folds as (is_start, is_end, oos_start, oos_end) bar ranges (end exclusive)."""
    if (split is None) == (walk_forward is None):
        raise ValueError("give exactly one of split= and walk_forward=")
    if split is not None:
        if not 0 < split < 1:
            raise ValueError(f"split wants a fraction 0 < F < 1, got {split}")
        b = int(math.floor(float(n) * split))
        out = [(0, b, b, n)]
    else:
        k = int(walk_forward)
        if not 1 <= k <= 1000:
            raise ValueError(f"walk_forward wants 1..1000 folds, got {walk_forward}")
        seg = n // (k + 1)
        out = [((i - 1) * seg, i * seg, i * seg, n if i == k else (i + 1) * seg)
               for i in range(1, k + 1)]
    for i, (a, b, _, c) in enumerate(out):
        if b - a < 1 or c - b < 1:
            raise ValueError(f"fold {i + 1} has an empty in-sample or out-of-sample part ({n} bars)")
    return out


def _best(v: np.ndarray) -> int:
    """Index of the best value: NaN never wins unless all are NaN; ties: the first."""
    if np.isnan(v).all():
        return 0
    return int(np.nanargmax(v))


def walk_forward(close, params=None, split: float | None = None, walk_forward: int | None = None,
                 metric: str = "pnl", threads: int | None = None, isa: str = "auto",
                 fee: float = FEE_DEFAULT):
    """Out-of-sample check of the sweep: a pandas DataFrame with one row per fold.

    ``split=F``: in-sample = the first floor(n*F) bars, out-of-sample = the rest.
    ``walk_forward=K``: the bars cut into K+1 equal segments (the last takes the remainder);
    fold k picks its winner on segment k-1 and tests it on segment k. Each part is swept cold.
    Columns: ``fold, is_start, is_end, oos_start, oos_end`` (bars, end exclusive), the winner's
    six lengths, ``metric``, ``is_value, is_pnl, is_trades`` (in sample), ``oos_value, oos_pnl,
    oos_trades, oos_rank`` (its rank among all ``combos`` out of sample by the metric; 1 = best,
    NaN last) and ``oos_best_value``. ``close``: anything :func:`tollfree.data.to_close` takes;
    ``fee``: percent points per closed trade."""
    import pandas as pd

    close = to_close(close)
    params = _grid.default_grid() if params is None else np.ascontiguousarray(params, dtype=np.int64)
    _check_metric(metric)
    rows = []
    for k, (a, b, _, c) in enumerate(folds(close.shape[0], split, walk_forward), 1):
        s_is = _sweep_for(metric, close[a:b], params, threads, isa, fee)
        s_os = _sweep_for(metric, close[b:c], params, threads, isa, fee)
        p_is, t_is, p_os, t_os = s_is["pnl"], s_is["trades"], s_os["pnl"], s_os["trades"]
        v_is = metric_values(metric, s_is)
        v_os = metric_values(metric, s_os)
        w = _best(v_is)
        ov = v_os[w]
        rank = 1 + int(np.sum(v_os > ov)) if ov == ov else 1 + int(np.sum(~np.isnan(v_os)))
        best = np.nan if np.isnan(v_os).all() else float(np.nanmax(v_os))
        rows.append([k, a, b, b, c, *(int(x) for x in params[w]), metric, float(v_is[w]),
                     float(p_is[w]), int(t_is[w]), float(ov), float(p_os[w]), int(t_os[w]), rank,
                     params.shape[0], best])
    return pd.DataFrame(rows, columns=COLUMNS)


def verdict(frame) -> str:
    """One line on whether the in-sample winners held up out of sample."""
    m = int(frame["combos"].iloc[0])
    mean_rank = float(frame["oos_rank"].mean())
    word = ("holds up: top quarter" if mean_rank <= 0.25 * m else
            "weak: top half" if mean_rank <= 0.5 * m else "does not hold up: bottom half")
    return (f"the in-sample winner's mean out-of-sample rank is {mean_rank:.1f} of {m} ({word}; "
            f"random choice: {(m + 1) / 2:.1f}); its oos pnl summed over folds "
            f"{frame['oos_pnl'].sum():.4g}")


def parse_grid(spec: str = "default") -> np.ndarray:
    """``--grid`` as the CLI takes it: ``default``, ``LO:HI:N`` or a CSV file of six integer
    columns ``L,half,sq,p,p3,p2`` (an optional header line)."""
    if spec == "default":
        return _grid.default_grid()
    parts = spec.split(":")
    if len(parts) == 3 and all(p.strip().lstrip("-").isdigit() for p in parts):
        lo, hi, n = (int(p) for p in parts)
        return _grid.grid(lo, hi, n)
    rows = []
    with open(spec) as f:
        for i, line in enumerate(f, 1):
            cells = [c.strip().strip('"') for c in line.strip().split(",")]
            if cells == [""]:
                continue
            if i == 1 and cells and cells[0] == "L":
                continue
            if len(cells) != 6:
                raise ValueError(f"{spec}:{i}: a grid row is six integers L,half,sq,p,p3,p2")
            rows.append([int(c) for c in cells])
    if not rows:
        raise ValueError(f"{spec}: empty grid (no combos)")
    return np.array(rows, dtype=np.int64).reshape(-1, 6)
