"""A C plugin strategy from Python: examples/plugin_sma.c, built by the project's CMake into
build/examples/plugin_sma.so (or build it yourself:
``cc -O2 -fPIC -shared -Iinclude examples/plugin_sma.c -o plugin_sma.so``).

    PYTHONPATH=python python3 examples/plugin_strategy.py [path/to/plugin_sma.so]

``strategy=`` takes the path (a string holding '/' or ending in .so): tollfree loads it once
(dlopen, the ABI checked) and runs it on every path. The plugin is sma_cross's logic, so it
gives the built-in's bits.
"""
import sys
from pathlib import Path

import tollfree
from tollfree import grid
from tollfree.data import default_close

root = Path(__file__).resolve().parents[1]
plugin = sys.argv[1] if len(sys.argv) > 1 else str(root / "build" / "examples" / "plugin_sma.so")

if __name__ == "__main__":
    close = default_close()
    params = grid.product(fast=(5, 50, 5), slow=(20, 200, 10), where="fast<slow")
    pnl, trades = tollfree.sweep(close, params, strategy=plugin)
    same, _ = tollfree.sweep(close, params, strategy="sma_cross")
    print(f"{params.shape[0]} combos; best pnl {pnl.max():.4f} at "
          f"fast={params[pnl.argmax(), 0]:g}, slow={params[pnl.argmax(), 1]:g}; "
          f"the built-in sma_cross gives the same bits: {pnl.tobytes() == same.tobytes()}")
    r = tollfree.paper.run(strategy=plugin, params={"fast": 10, "slow": 50}, progress=False)
    print(f"paper trading fast=10, slow=50 through the engine: pnl {r.pnl!r}, "
          f"parity with the sweep: {r.parity}")
