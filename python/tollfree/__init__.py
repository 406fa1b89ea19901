"""tollfree: an exact HMA/HMA3 sweep engine, callable across any boundary at almost no cost.

In-process: :func:`sweep` and :class:`Strategy` (libtollfree via ctypes, zero-copy, GIL released).
"""
from tollfree.binding import Strategy, sweep

__all__ = ["sweep", "Strategy"]
