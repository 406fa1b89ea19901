#!/usr/bin/env bash
# Installs the Debian packages tollfree needs, only those missing. Quick when nothing is missing.
# Run by `make demo` and `make test`; safe to run by hand.
set -euo pipefail

packages=(cmake make gcc clang libclang-rt-14-dev clang-format python3-numpy python3-numba
          python3-pytest python3-matplotlib python3-msgpack strace
          python3-distributed python3-pandas chromium python3-venv python3-pip pkg-config
          libssl-dev openssl)

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# npm fetches the report's charting library (make web); Node's own packages may carry it.
command -v npm >/dev/null 2>&1 || missing+=(npm)
[ ${#missing[@]} -eq 0 ] && exit 0

echo "setup: installing ${missing[*]}" >&2
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q >&2
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
