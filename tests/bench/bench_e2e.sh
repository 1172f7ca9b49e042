#!/usr/bin/env bash
# bench_e2e.sh - tips-bench end to end on a tiny workload, for every index it lists:
# YCSB A-E and the insert-only load, a mix with removes, longer keys and values, and a
# skewed distribution; each run must exit 0 and its JSON must carry the documented
# fields. listdb also with small MemTables (flushes and Zipper compactions during the
# run), two domains, the WAL flush mode, no compaction, --listdb-settle and --upsert.
# Every index also in duration mode (--seconds) on D, whose inserts the pool must hold,
# with the new report lines (background CPU by role, stalls, write latency) checked.
# Also: usage errors exit 2 (a thread list outside compare among them), and an unknown
# index exits 3.
#
# usage: bench_e2e.sh TIPS_BENCH_EXE
set -euo pipefail
BENCH=$1
DIR=$(mktemp -d /tmp/tips-bench-e2e.XXXXXX)
trap 'rm -rf -- "$DIR"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# run_ok NAME ARGS...: the run must succeed and write a JSON with the required fields.
run_ok() {
	local name=$1; shift
	local json=$DIR/$name.json rc=0
	"$BENCH" "$@" --json "$json" >"$DIR/$name.out" 2>"$DIR/$name.err" &
	local pid=$!
	wait "$pid" || rc=$?
	# Its default pool is named after its pid; other tests may run tips-bench meanwhile.
	ls /dev/shm/tips-bench-"$pid".pool /dev/shm/tips-bench-pmdk-"$pid".pool \
		/dev/shm/tips-bench-listdb-"$pid".pool* \
		>/dev/null 2>&1 && fail "$name: its pool was left in /dev/shm"
	if ((rc)); then
		fail "$name: exit $rc ($(tail -1 "$DIR/$name.err"))"
		return
	fi
	for field in '"index":' '"config":' '"load":{"ops":' '"run":{"ops":' '"ops_per_sec":' \
		'"latency_ns":{' '"p50":' '"p99":' '"p999":' '"timeline":[' '"persist":{' \
		'"flushes_per_write":' '"fences_per_write":' '"fences_per_read":' '"peak_rss_kib":' \
		'"persist":' '"replay":' '"gc":' '"other_background":' '"stalls":{' \
		'"write_latency_ns":{' '"insert_capped":' '"harness_ns_per_op":'; do
		grep -qF -- "$field" "$json" || fail "$name: JSON lacks $field"
	done
	case "$*" in
	*tips-*) grep -qF '"framework":{"cache_hit_ratio":' "$json" ||
		fail "$name: JSON lacks the framework counters" ;;
	*listdb*) grep -qF '"listdb":{"config":{"memtable_entries":' "$json" ||
		fail "$name: JSON lacks the listdb counters" ;;
	esac
	echo "ok: $name"
}

indexes=$("$BENCH" --list | awk '{print $1}')
[[ -n $indexes ]] || fail "--list printed no index"
for idx in $indexes; do
	for w in a b c d e load; do
		run_ok "$idx-$w" --index "$idx" --records 3000 --ops 3000 --workload "$w" \
			--latency-sample 0.5 --sample-ms 5
	done
	run_ok "$idx-mix" --index "$idx" --records 3000 --ops 6000 --read 0.4 --remove 0.3 \
		--insert 0.2 --update 0.1 --threads 3
	run_ok "$idx-long" --index "$idx" --records 2000 --ops 2000 --workload a \
		--key-size 24 --key-prefix user --value-size 100 --dist selfsimilar --skew 0.2
	run_ok "$idx-zipf" --index "$idx" --records 2000 --ops 2000 --workload b --dist zipfian
	run_ok "$idx-seconds" --index "$idx" --records 2000 --ops 1M --workload d \
		--seconds 0.1 --sample-ms 10
	grep -q '^run   stalls: ' "$DIR/$idx-seconds.out" ||
		fail "$idx-seconds: the report lacks the stall line"
	grep -q 'background (persist [0-9]*, replay [0-9]*, gc [0-9]*, other [0-9]*)' \
		"$DIR/$idx-seconds.out" || fail "$idx-seconds: the report lacks the roles"
done

if grep -qx listdb <<<"$indexes"; then
	small=(--records 4000 --ops 4000 --listdb-memtable 300)
	run_ok listdb-small-a --index listdb "${small[@]}" --workload a --threads 3
	run_ok listdb-small-mix --index listdb "${small[@]}" --read 0.4 --remove 0.3 \
		--insert 0.2 --update 0.1 --listdb-compaction-threads 2
	run_ok listdb-d2 --index listdb "${small[@]}" --workload e --scan-len 20 \
		--listdb-domains 2 --threads 2
	run_ok listdb-d2-oblivious --index listdb "${small[@]}" --workload b \
		--listdb-domains 2 --listdb-oblivious
	run_ok listdb-wal --index listdb "${small[@]}" --workload a --listdb-flush wal
	run_ok listdb-no-compaction --index listdb "${small[@]}" --workload d \
		--listdb-no-compaction
	run_ok listdb-settle --index listdb "${small[@]}" --workload c --listdb-settle \
		--listdb-cache 0 --listdb-second-chance 0
	run_ok listdb-upsert --index listdb "${small[@]}" --workload a --upsert
fi
run_ok dram-hash-upsert --index dram-hash --records 3000 --ops 3000 --read 0.3 \
	--insert 0.3 --update 0.2 --remove 0.2 --upsert --threads 3

# Past the facade: every loaded key must still be found (a miss exits 1).
for idx in tips-art tips-clht; do
	grep -qx "$idx" <<<"$indexes" && run_ok "$idx-past-facade" --index "$idx" \
		--records 3000 --ops 3000 --workload c --lookup-via index
done

set +e
"$BENCH" --index tips-art --workload a --lookup-via index --records 10 >/dev/null 2>&1
[[ $? -eq 2 ]] || fail "--lookup-via index with writes in the run must exit 2"
"$BENCH" --index dram-hash --listdb-memtable 100 --records 10 >/dev/null 2>&1
[[ $? -eq 2 ]] || fail "a --listdb-* option with another index must exit 2"
"$BENCH" --index listdb --listdb-flush xyz --records 10 >/dev/null 2>&1
[[ $? -eq 2 ]] || fail "a bad --listdb-flush must exit 2"
"$BENCH" --index dram-hash --read 0.5 --update 0.4 >/dev/null 2>&1
[[ $? -eq 2 ]] || fail "ratios not summing to 1 must exit 2"
"$BENCH" --records 10 >/dev/null 2>&1
[[ $? -eq 2 ]] || fail "a missing --index must exit 2"
"$BENCH" --index dram-hash --threads 1,2 --records 10 >/dev/null 2>&1
[[ $? -eq 2 ]] || fail "a thread list outside compare must exit 2"
"$BENCH" --index dram-hash --seconds 0 --records 10 >/dev/null 2>&1
[[ $? -eq 2 ]] || fail "--seconds 0 must exit 2"
"$BENCH" --index no-such-index --records 10 --ops 10 >/dev/null 2>&1
[[ $? -eq 3 ]] || fail "an unknown index must exit 3"
set -e

if [[ $failures -ne 0 ]]; then
	echo "bench_e2e: $failures failure(s)" >&2
	exit 1
fi
echo "bench_e2e: all passed"
