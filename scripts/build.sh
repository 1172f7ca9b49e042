#!/usr/bin/env bash
# build.sh - configure and build libtips, its tools and tests into a build directory.
#   scripts/build.sh [BUILD_DIR] [extra cmake arguments...]   (default BUILD_DIR: build)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-"$root/build"}
shift || true
cmake -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$dir" -j"$(nproc)"
