#!/usr/bin/env bash
# install-deps.sh - install every system package libtips needs to build, test and
# benchmark, from Debian's repositories. Idempotent: installs only what is missing and
# runs `apt-get update` only when something is.
#
#   build:      gcc, cmake, pkg-config, zlib (header checksums)
#   benchmark:  libpmemobj (the PMDK allocator baseline of tips-allocbench)
#   framework:  liburcu (RCU grace periods of the TIPS DRAM cache)
set -euo pipefail

packages=(build-essential cmake pkg-config zlib1g-dev libpmemobj-dev liburcu-dev)

missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
	echo "install-deps: all packages present (${packages[*]})"
	exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
	command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
	sudo="sudo"
fi
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
