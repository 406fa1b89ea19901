"""The charting library the interactive report puts into each page: uPlot (MIT), from the npm
registry, pinned by web/package.json and web/package-lock.json (integrity hashes) and fetched
with ``npm ci`` into web/node_modules/ (ignored by git): by ``make web`` or, from a source tree,
by the first report that needs it. An installed package carries the three files it needs in
tollfree/_vendor/uplot/. The page never loads anything from the network: the library's code,
its stylesheet and its license (as a comment block) are written into the HTML."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

_PKG = Path(__file__).resolve().parent
FILES = ("dist/uPlot.iife.min.js", "dist/uPlot.min.css", "LICENSE", "package.json")


class VendorMissing(RuntimeError):
    """The charting library is not here and could not be fetched; the message says what to do
    (``make web`` with network, or the static report)."""


def web_dir() -> Path | None:
    """Where web/package-lock.json lives: ``$TOLLFREE_WEB_DIR``, else the source tree's web/
    (None for an installed package without one)."""
    env = os.environ.get("TOLLFREE_WEB_DIR")
    if env:
        return Path(env)
    d = _PKG.parent.parent / "web"
    return d if (d / "package-lock.json").is_file() else None


def _complete(d: Path) -> bool:
    return all((d / f).is_file() for f in FILES)


def _npm_ci(web: Path) -> None:
    """``npm ci`` in ``web`` (one process at a time: a lock file beside it); VendorMissing
    naming the failure."""
    import fcntl
    npm = shutil.which("npm")
    if npm is None:
        raise VendorMissing(
            f"the interactive report vendors uPlot from npm ({web}/package-lock.json) and npm is "
            "not installed: install it (Debian: apt-get install npm; scripts/setup.sh does), "
            "or write the static report (--static; static=True in Python)")
    with open(web / ".vendor.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _complete(web / "node_modules" / "uplot"):
            return
        try:
            r = subprocess.run([npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund",
                                "--loglevel=error"], cwd=web, capture_output=True, text=True,
                               timeout=600)
            why = (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1]
        except (OSError, subprocess.TimeoutExpired) as e:
            why = str(e)
    if not _complete(web / "node_modules" / "uplot"):
        raise VendorMissing(
            f"the interactive report needs uPlot, vendored from the npm registry at build time: "
            f"`npm ci` in {web} failed ({why}); run `make web` where the registry can be "
            "reached, or write the static report (--static; static=True in Python)")


def uplot_dir() -> Path:
    """The directory holding uPlot's files (FILES), fetching them on first use from a source
    tree; VendorMissing when that fails or there is nothing to fetch from."""
    bundled = _PKG / "_vendor" / "uplot"
    if _complete(bundled):
        return bundled
    web = web_dir()
    if web is None:
        raise VendorMissing(
            "the interactive report needs uPlot, which this installed package does not carry "
            f"({bundled}): reinstall from a source tree where `make web` ran, or write the "
            "static report (--static; static=True in Python)")
    d = web / "node_modules" / "uplot"
    if not _complete(d):
        _npm_ci(web)
    return d


def uplot() -> dict:
    """{"js", "css", "license", "version"}: what the page inlines."""
    import json
    d = uplot_dir()
    return {"js": (d / FILES[0]).read_text(encoding="utf-8"),
            "css": (d / FILES[1]).read_text(encoding="utf-8"),
            "license": (d / FILES[2]).read_text(encoding="utf-8"),
            "version": json.loads((d / FILES[3]).read_text(encoding="utf-8"))["version"]}
