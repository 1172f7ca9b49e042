#!/usr/bin/env bash
# main-job.sh - install the dependencies, build, and run the main job.
#
# Until the benchmark harness exists, the main job is a demonstration of the
# foundation on a pool under /dev/shm: create a pool, store records in it, reopen it in
# a new process and verify every record (the pool maps at the same address, so the
# stored pointers are valid), then check the heap with `tips pool check`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh" "$root/build"
bin="$root/build"
pool="/dev/shm/tips-main-job-$$.pool"
trap 'rm -f "$pool"' EXIT

echo "== create a 64 MiB pool under /dev/shm"
"$bin/tips" pool create "$pool" --size 64M
"$bin/tips" pool info "$pool"
echo "== store 100000 records (one process)"
"$bin/tips-demo" write "$pool" 100000
echo "== reopen in a new process and verify every record"
"$bin/tips-demo" verify "$pool" 100000
echo "== check the heap"
"$bin/tips" pool check "$pool"
