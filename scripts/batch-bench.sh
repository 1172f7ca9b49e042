#!/usr/bin/env bash
# batch-bench.sh - write batches measured: keys per second of puts committed one at a
# time and in batches of 1, 4, 16 and 64 (tips-bench --workload load --upsert --batch N:
# 100K records loaded, then the run phase's --ops puts of new keys, which is what is
# measured), with 1 and 2 threads, medians of --repeat runs, for each index; and the
# fences per write on the writer's critical path (sampled commits), and the CPU per put
# of the writer threads and of the background. Prints one table and writes the compare
# JSON of every cell under OUT.
#
#   scripts/batch-bench.sh [--ops N] [--repeat R] [--indexes LIST] [--threads LIST]
#                          [--sizes LIST] [--out DIR]
# Defaults: 1M puts, 3 repeats, tips-hash,tips-art,listdb, threads 1,2,
# sizes 0,1,4,16,64 (0: single writes, tips_put; the others: tips_batch_commit).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
ops=1M repeat=3 indexes=tips-hash,tips-art,listdb threads=1,2 sizes=0,1,4,16,64
out=$root/build/batch-bench
while [ $# -gt 0 ]; do
	case "$1" in
	--ops) ops=$2; shift 2 ;;
	--repeat) repeat=$2; shift 2 ;;
	--indexes) indexes=$2; shift 2 ;;
	--threads) threads=$2; shift 2 ;;
	--sizes) sizes=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	*) echo "usage: scripts/batch-bench.sh [--ops N] [--repeat R] [--indexes LIST]" \
		"[--threads LIST] [--sizes LIST] [--out DIR]" >&2; exit 2 ;;
	esac
done
bench=$root/build/tips-bench
[ -x "$bench" ] || { echo "batch-bench: build first (scripts/build.sh)" >&2; exit 3; }
mkdir -p "$out"
for t in ${threads//,/ }; do
	for b in ${sizes//,/ }; do
		batch=()
		[ "$b" = 0 ] || batch=(--batch "$b")
		echo "batch-bench: threads $t, batch ${b/#0/single writes}" >&2
		"$bench" compare --indexes "$indexes" --workloads load --upsert "${batch[@]}" \
			--records 100Ki --ops "$ops" --threads "$t" --repeat "$repeat" \
			--baseline "${indexes%%,*}" --json "$out/t$t-b$b.json" >/dev/null
	done
done
python3 - "$out" "$indexes" "$threads" "$sizes" <<'EOF'
import json, sys
out, indexes, threads, sizes = sys.argv[1], sys.argv[2].split(","), sys.argv[3].split(","), sys.argv[4].split(",")
head = ["index", "threads"] + ["single" if s == "0" else "batch %s" % s for s in sizes]
print("puts of new keys: Mkeys/s, [fences per write on the writer's path], CPU ns per put")
print("of the writers + the background (medians)")
print("| " + " | ".join(head) + " |")
print("|" + " --- |" * len(head))
for idx in indexes:
    for t in threads:
        row = [idx, t]
        for s in sizes:
            doc = json.load(open("%s/t%s-b%s.json" % (out, t, s)))
            r = [x for x in doc["results"] if x["index"] == idx and x["workload"] == "load"][0]
            rate = r["run_ops_per_sec"]["median"] / 1e6
            fw = r["fences_per_write"]["median"]
            cpu = r["cpu_ns_per_op"]
            row.append("%.3f [%s] %.0f+%.0f" % (rate, "-" if fw is None else "%.2f" % fw,
                                               cpu["app"]["median"], cpu["background"]["median"]))
        print("| " + " | ".join(str(x) for x in row) + " |")
EOF
