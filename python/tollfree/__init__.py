"""tollfree: an exact HMA/HMA3 sweep engine, callable across any boundary at almost no cost.

In-process: :func:`sweep`, :func:`sweep_stats` / :func:`sweep_frame` (the statistics) and
:class:`Strategy` (libtollfree via ctypes, zero-copy, GIL released).
Out of process: :func:`connect` (v2 over unix/tcp/shm/spawn) and :class:`tollfree.v1.Client`, the
clients of the sweep service (``tollfree serve``); failures raise :class:`SweepError`.
Orders: :func:`tollfree.orders.connect` (OFL1 to the engine service, ``tollfree engine serve``;
failures raise :class:`EngineServiceError`) and the paper-trading loop :func:`tollfree.paper.run`.
``EngineError``/``EngineTimeout`` are deprecated names of the two errors' common base
(:mod:`tollfree.errors`).
Many instruments: :func:`sweep_panel` in-process, :func:`tollfree.distributed.sweep` on Dask.
Any strategy: ``strategy=`` on every path takes a built-in name (:func:`strategies.builtins`), a
plugin .so, or :func:`define` (numba functions, run by the C sweep without the GIL); grids by
name with :func:`tollfree.grid.product`.
The close may be a numpy array, a pandas Series or DataFrame, or a list: checked by default
(``validate=False`` for the raw path). :func:`report` writes the HTML report; ``__version__`` is
the release; pip's ``tollfree`` command (or ``python -m tollfree``) runs the C program.
"""
# The release, as pyproject.toml, CMakeLists.txt's project() and `tollfree --version` say it
# (python/tests/test_first_hour.py checks that all four agree).
__version__ = "0.3.0"

from tollfree import grid, orders, strategies, v1  # noqa: E402,F401
from tollfree.binding import Series, Strategy, sweep, sweep_stats  # noqa: E402
from tollfree.client import connect  # noqa: E402
from tollfree.errors import (EngineServiceError, EngineServiceTimeout, ServiceError,  # noqa: E402
                             ServiceTimeout, SweepError, SweepTimeout)
from tollfree.research import walk_forward  # noqa: E402
from tollfree.stats import sweep_frame  # noqa: E402
from tollfree.strategies import define  # noqa: E402
from tollfree.trade_list import trades  # noqa: E402


__all__ = ["sweep", "sweep_stats", "sweep_frame", "Strategy", "connect", "SweepError",
           "SweepTimeout", "EngineServiceError", "EngineServiceTimeout", "ServiceError",
           "ServiceTimeout", "v1", "orders", "paper", "walk_forward", "report", "sweep_panel",
           "Series", "strategies", "define", "trades"]

# Imported on first use (PEP 562), not with the package: `python -m tollfree.paper`,
# `-m tollfree.html_report` and `-m tollfree.panel` run those modules as scripts, and a module the
# package had imported already would run twice (runpy's RuntimeWarning). `tollfree.paper`,
# `from tollfree import report` and the like work as before.
_LAZY = {"paper": ("tollfree.paper", None), "report": ("tollfree.html_report", "report"),
         "sweep_panel": ("tollfree.panel", "sweep_panel")}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        m = importlib.import_module(module)
        value = m if attr is None else getattr(m, attr)
        globals()[name] = value
        return value
    from tollfree import errors

    return errors.deprecated(name, "tollfree")  # EngineError, EngineTimeout; else AttributeError


def __dir__():
    return sorted(set(globals()) | set(_LAZY))

