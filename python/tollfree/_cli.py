"""The ``tollfree`` console script that pip installs: it runs the real C program.

``pip install --no-build-isolation .`` builds the C program with the library and ships it inside
the package (``tollfree/bin/tollfree``); this script finds it (:func:`tollfree._lib.bin_path`:
``$TOLLFREE_BIN``, the packaged program, a source tree's ``build/tollfree``, then a ``tollfree``
program on PATH that is not this script) and replaces itself with it, arguments unchanged. The
program's own Python steps (``--report``, ``--panel``, ``paper --plot``) then run with this
interpreter (the venv's), the package's library and the program itself, unless the environment
already names others (``TOLLFREE_PYTHON``, ``TOLLFREE_LIB``, ``TOLLFREE_BIN``)."""
from __future__ import annotations

import os
import sys

from tollfree._lib import bin_path, lib_path


def main(argv: list[str] | None = None) -> int:
    """Execs the C program with ``argv`` (default ``sys.argv[1:]``); returns 127 (with what to
    do, on stderr) only when there is none to run."""
    args = sys.argv[1:] if argv is None else list(argv)
    exe = bin_path()
    if not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
        print(f"tollfree: the C program is not installed (looked for {exe}): reinstall the "
              "package from the source tree with `pip install --no-build-isolation .` (it builds "
              "the program with CMake and ships it beside libtollfree.so), or build it with "
              "`make` / `make install PREFIX=DIR`, or set TOLLFREE_BIN=/path/to/tollfree",
              file=sys.stderr)
        return 127
    env = dict(os.environ)
    env.setdefault("TOLLFREE_PYTHON", sys.executable)
    env.setdefault("TOLLFREE_BIN", exe)
    lib = lib_path()
    if os.path.exists(lib):
        env.setdefault("TOLLFREE_LIB", lib)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execve(exe, [exe, *args], env)
    except OSError as e:
        print(f"tollfree: cannot run {exe}: {e.strerror} (set TOLLFREE_BIN=/path/to/tollfree)",
              file=sys.stderr)
        return 127
    return 0  # not reached: execve replaced this process


if __name__ == "__main__":
    raise SystemExit(main())
