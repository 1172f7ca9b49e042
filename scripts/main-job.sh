#!/usr/bin/env bash
# main-job.sh - install the dependencies, build, and run the main job:
#  - tips-bench compare: every tips-* index (hash, lfhash, bst, lfbst, bptree, art,
#    clht) and the pmdk-hash baseline against their volatile twins dram-* on YCSB A-E
#    (500K records, 500K operations, 2 threads, uniform 8-byte keys and values, medians
#    of 3 runs), the table of throughputs and ratios on stdout, the JSON and the plots
#    under build/main-job/;
#  - ListDB against the two tips trees (tips-bptree, tips-art) on YCSB A and C (500K,
#    medians of 3, ratios against tips-art);
#  - a short crash check: a tips-hash pool and a listdb database crashed 20 times each
#    as a simulated power failure (unflushed lines dropped) and verified after each
#    crash;
#  - tips-server side by side with redis-server (scripts/server-bench.sh): tips-art and
#    tips-hash against redis-server without persistence and with appendfsync always,
#    redis-benchmark -t set,get -n 100000 -c 50 at -P 1 and -P 16, one repeat (under a
#    minute), the table on stdout and build/main-job/server-bench.json.
# About ten minutes on 2 cores after the build. Pools live under /dev/shm. The
# paper-size measurement (8M records, 8M operations) is in docs/indexes.md.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh" "$root/build"
bin="$root/build"
out="$root/build/main-job"
crash_pool="/dev/shm/tips-main-job-crash-$$.pool"
ld_pool="/dev/shm/tips-main-job-listdb-$$.pool"
trap 'rm -f "$crash_pool" "$ld_pool"' EXIT
mkdir -p "$out"

echo "== tips-bench compare: tips-* and pmdk-hash against dram-* on YCSB A-E"
# E on a hash index scans the whole table for each scan: the run phase stops at 3 s.
"$bin/tips-bench" compare --records 500K --ops 500K --threads 2 --repeat 3 --max-seconds 3 \
	--json "$out/compare.json"
echo "== plots"
"$root/.venv/bin/python" "$root/scripts/plot_bench.py" "$out/compare.json" \
	--out "$out/plots" --log
echo "== ListDB against tips-bptree and tips-art (ratios to tips-art)"
"$bin/tips-bench" compare --indexes listdb,tips-bptree,tips-art --baseline tips-art \
	--workloads a,c --records 500K --ops 500K --threads 2 --repeat 3 --max-seconds 10 \
	--json "$out/listdb-compare.json"
echo "== crash a listdb database 20 times (simulated power failure) and verify it each time"
"$bin/tips-crashtest" --index listdb --pool "$ld_pool" --crashes 20 --mode sim --seed 1 --fresh
echo "== crash a tips-hash pool 20 times (simulated power failure) and verify it each time"
"$bin/tips-crashtest" --index tips-hash --pool "$crash_pool" --crashes 20 --mode sim --seed 1 --fresh
echo "== tips-server against redis-server (redis-benchmark set/get, 1 repeat; ratios to appendfsync always)"
"$root/scripts/server-bench.sh" --tips-server "$bin/tips-server" --servers tips-art,tips-hash,redis,redis-always \
	--n 100000 --repeats 1 --pipelines "1 16" --json "$out/server-bench.json"
