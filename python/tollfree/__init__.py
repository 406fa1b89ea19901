"""tollfree: an exact HMA/HMA3 sweep engine, callable across any boundary at almost no cost.

In-process: :func:`sweep` and :class:`Strategy` (libtollfree via ctypes, zero-copy, GIL released).
Out of process: :func:`connect` (v2 over unix/tcp/shm/spawn) and :class:`tollfree.v1.Client`;
failures raise :class:`EngineError`.
Orders: :func:`tollfree.orders.connect` (OFL1 to ``tollfree engine serve``) and the paper-trading
loop :func:`tollfree.paper.run`.
"""
from tollfree import orders, paper, v1
from tollfree.binding import Strategy, sweep
from tollfree.client import connect
from tollfree.errors import EngineError, EngineTimeout

__all__ = ["sweep", "Strategy", "connect", "EngineError", "EngineTimeout", "v1", "orders", "paper"]
