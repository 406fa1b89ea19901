"""tollfree: an exact HMA/HMA3 sweep engine, callable across any boundary at almost no cost.

In-process: :func:`sweep`, :func:`sweep_stats` / :func:`sweep_frame` (the statistics) and
:class:`Strategy` (libtollfree via ctypes, zero-copy, GIL released).
Out of process: :func:`connect` (v2 over unix/tcp/shm/spawn) and :class:`tollfree.v1.Client`;
failures raise :class:`EngineError`.
Orders: :func:`tollfree.orders.connect` (OFL1 to ``tollfree engine serve``) and the paper-trading
loop :func:`tollfree.paper.run`.
Many instruments: :func:`sweep_panel` in-process, :func:`tollfree.distributed.sweep` on Dask.
"""
from tollfree import orders, paper, v1
from tollfree.binding import Series, Strategy, sweep, sweep_stats
from tollfree.client import connect
from tollfree.errors import EngineError, EngineTimeout
from tollfree.panel import sweep_panel
from tollfree.research import walk_forward
from tollfree.stats import sweep_frame


def report(*args, **kwargs) -> str:
    """The sweep's HTML report (:func:`tollfree.html_report.report`; matplotlib is imported
    only when a report is written)."""
    from tollfree.html_report import report as _report
    return _report(*args, **kwargs)


__all__ = ["sweep", "sweep_stats", "sweep_frame", "Strategy", "connect", "EngineError", "EngineTimeout", "v1", "orders", "paper",
           "walk_forward", "report", "sweep_panel", "Series"]
