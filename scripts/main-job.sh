#!/usr/bin/env bash
# main-job.sh - install the dependencies, build, and run the main job:
#  - tips-bench compare: every tips-* index (hash, lfhash, bst, lfbst, bptree, art,
#    clht) and the pmdk-hash baseline against their volatile twins dram-*, and null (the
#    harness alone: its ceiling), on YCSB A-E with 1 and 2 threads side by side (200K
#    records, run phases of 2 s each, uniform 8-byte keys and values, one run of each:
#    runs this short on a shared 2-core machine move by 10-30%, so read the ratios, and
#    the CPU ns per operation, which noise moves far less). Workload E (scans) only on
#    the ordered indexes: a hash index has no key order, its E is listed n/a and not
#    run. The table of throughputs, ratios, background CPU per role, write stalls and
#    write latency on stdout; the JSON and the plots (throughput.png: one panel per
#    workload; ratios.png: the ratio heatmap; each under 2000 px wide) under
#    build/main-job/;
#  - ListDB against the two tips trees (tips-bptree, tips-art) on YCSB A and C (200K
#    records, 2 s runs, 1 and 2 threads, ratios against tips-art);
#  - a short crash check: a tips-hash pool and a listdb database crashed 20 times each
#    as a simulated power failure (unflushed lines dropped) and verified after each
#    crash;
#  - tips-server side by side with redis-server (scripts/server-bench.sh): tips-art and
#    tips-hash against redis-server without persistence and with appendfsync always,
#    redis-benchmark -t set,get -n 100000 -c 50 at -P 1 and -P 16, one repeat (under a
#    minute), the table on stdout and build/main-job/server-bench.json.
# About ten minutes on 2 cores after the build (MAIN_JOB_SECONDS=S changes the length
# of each run phase). The benchmarks' pools live in the directory scripts/pool-dir.sh
# prints (a tmpfs with 2 MiB pages when it can mount one, else /dev/shm; the JSON's
# pool_pages says which), the crash checks' under /dev/shm. The paper-size measurement
# (8M records, 8M operations, medians of 3) is in docs/indexes.md.
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

TIPS_BENCH_POOL_DIR=$("$root/scripts/pool-dir.sh")
export TIPS_BENCH_POOL_DIR
echo "== benchmark pools in $TIPS_BENCH_POOL_DIR"
secs=${MAIN_JOB_SECONDS:-2}
# --ops bounds the inserts of D and E (5% of a run phase), which sizes the pools.
indexes=tips-hash,tips-lfhash,tips-bst,tips-lfbst,tips-bptree,tips-art,tips-clht,pmdk-hash,null
if ! "$bin/tips-bench" --list | grep -q '^pmdk-hash '; then
	indexes=${indexes/pmdk-hash,/}
fi
echo "== tips-bench compare: tips-* and pmdk-hash against dram-* on YCSB A-E, 1 and 2 threads"
"$bin/tips-bench" compare --indexes "$indexes" --records 200K --seconds "$secs" --ops 20M \
	--threads 1,2 --repeat 1 --json "$out/compare.json"
echo "== plots"
"$root/.venv/bin/python" "$root/scripts/plot_bench.py" "$out/compare.json" \
	--out "$out/plots" --log
echo "== ListDB against tips-bptree and tips-art (ratios to tips-art)"
"$bin/tips-bench" compare --indexes listdb,tips-bptree,tips-art --baseline tips-art \
	--workloads a,c --records 200K --seconds "$secs" --ops 20M --threads 1,2 --repeat 1 \
	--json "$out/listdb-compare.json"
echo "== crash a listdb database 20 times (simulated power failure) and verify it each time"
"$bin/tips-crashtest" --index listdb --pool "$ld_pool" --crashes 20 --mode sim --seed 1 --fresh
echo "== crash a tips-hash pool 20 times (simulated power failure) and verify it each time"
"$bin/tips-crashtest" --index tips-hash --pool "$crash_pool" --crashes 20 --mode sim --seed 1 --fresh
echo "== tips-server against redis-server (redis-benchmark set/get, 1 repeat; ratios to appendfsync always)"
"$root/scripts/server-bench.sh" --tips-server "$bin/tips-server" --servers tips-art,tips-hash,redis,redis-always \
	--n 100000 --repeats 1 --pipelines "1 16" --json "$out/server-bench.json"
