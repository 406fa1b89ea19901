"""tollfree's benchmarks.

- ``python -m tollfree.bench [--quick]``: the boundary benchmark (issue 4): report.md, results.json
  and PNG plots in build/report/, and the headline table on stdout.
- ``python -m tollfree.bench_kernel [--quick]``: the kernel benchmark (kernel.json, kernel.md).
- :func:`headline`: the headline table of an earlier ``make bench`` run (``make demo`` prints it).

:mod:`tollfree.bench.harness` holds the measurement rules both follow (gate first, interleaved
rounds, medians and min-max, pinned latency rows, start-up costs on their own rows).
"""
from __future__ import annotations


def headline(results=None) -> str:
    """The headline table as text. ``results``: a results dict, a path to results.json, or None
    for build/report/results.json. Raises FileNotFoundError if there is no earlier run."""
    from tollfree.bench import report
    if isinstance(results, dict):
        return report.headline(results)
    return report.headline_from_file(results)


__all__ = ["headline"]
