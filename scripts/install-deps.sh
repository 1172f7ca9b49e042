#!/usr/bin/env bash
# install-deps.sh - install every system package libtips needs to build, test and
# benchmark, from Debian's repositories, then the Python environment of the benchmark
# plots. Idempotent: installs only what is missing and runs `apt-get update` only when
# something is.
#
#   build:      gcc, cmake, pkg-config, zlib (header checksums)
#   benchmark:  libpmemobj (the PMDK allocator baseline of tips-allocbench)
#   framework:  liburcu (RCU grace periods of the TIPS DRAM cache)
#   server:     redis-server and redis-tools (the reference tips-server is compared with:
#               differential tests, redis-benchmark, redis-cli), nutcracker (twemproxy, the
#               scale-out test)
#   plots, server tests: python3 and python3-venv; then <repo>/.venv holding exactly the
#               pinned packages of requirements-plot.txt (matplotlib for
#               scripts/plot_bench.py, the `redis` client for the server's tests)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

packages=(build-essential cmake pkg-config zlib1g-dev libpmemobj-dev liburcu-dev
	python3 python3-venv redis-server redis-tools nutcracker)

missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
	echo "install-deps: all packages present (${packages[*]})"
else
	sudo=""
	if [ "$(id -u)" -ne 0 ]; then
		command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
		sudo="sudo"
	fi
	echo "install-deps: installing ${missing[*]}"
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The venv keeps a copy of the requirements it was built from; it is current when that
# copy matches and its Python still runs. Otherwise it is rebuilt from scratch (--clear),
# so it never holds packages of an older requirements file.
venv=$root/.venv
requirements=$root/requirements-plot.txt
stamp=$venv/requirements-plot.txt
if cmp -s "$requirements" "$stamp" && "$venv/bin/python" -c '' 2>/dev/null; then
	echo "install-deps: $venv is up to date with requirements-plot.txt"
	exit 0
fi
echo "install-deps: creating $venv from requirements-plot.txt"
python3 -m venv --clear "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --only-binary=:all: \
	-r "$requirements"
cp "$requirements" "$stamp"
