#!/usr/bin/env bash
# main-job.sh - install the dependencies, build, and run the main job.
#
# Until the benchmark harness exists, the main job demonstrates what is built, on pools
# under /dev/shm:
#  - the foundation: create a pool, store records in it, reopen it in a new process and
#    verify every record (the pool maps at the same address, so the stored pointers are
#    valid), then check the heap with `tips pool check`;
#  - the TIPS framework: tips-hash against its volatile original dram-hash
#    (tips-fwbench, small sizes), and a short crash campaign (tips-crashtest).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh" "$root/build"
bin="$root/build"
pool="/dev/shm/tips-main-job-$$.pool"
crash_pool="/dev/shm/tips-main-job-crash-$$.pool"
trap 'rm -f "$pool" "$crash_pool"' EXIT

echo "== create a 64 MiB pool under /dev/shm"
"$bin/tips" pool create "$pool" --size 64M
"$bin/tips" pool info "$pool"
echo "== store 100000 records (one process)"
"$bin/tips-demo" write "$pool" 100000
echo "== reopen in a new process and verify every record"
"$bin/tips-demo" verify "$pool" 100000
echo "== check the heap"
"$bin/tips" pool check "$pool"
echo "== TIPS framework: tips-hash against dram-hash (256K keys, 2 threads, one run)"
"$bin/tips-fwbench" --keys 256K --ops 512K --threads 2 --repeat 1
echo "== crash a tips-hash pool 20 times (simulated power failure) and verify it each time"
"$bin/tips-crashtest" --index tips-hash --pool "$crash_pool" --crashes 20 --mode sim --seed 1 --fresh
