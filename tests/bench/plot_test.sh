#!/usr/bin/env bash
# plot_test.sh - scripts/plot_bench.py on real tips-bench output: a tiny compare (three
# workloads, two runs each, 1 and 2 threads, E not applicable to the hash indexes) and a
# tiny single run must each give their figures as valid, non-trivial PNGs at most 2000
# pixels wide, in the default directory beside the JSON or in --out; a missing
# file, invalid JSON and a document of neither shape must exit 2 with a message.
# Uses the Python of <source>/.venv, which scripts/install-deps.sh creates; without it
# the test fails (it never skips).
#
# usage: plot_test.sh TIPS_BENCH_EXE SOURCE_DIR
set -euo pipefail
BENCH=$1
SRC=$2
PY=$SRC/.venv/bin/python
PLOT=$SRC/scripts/plot_bench.py
if [[ ! -x $PY ]]; then
	echo "FAIL: no Python environment at $SRC/.venv: run scripts/install-deps.sh" >&2
	exit 1
fi
DIR=$(mktemp -d /tmp/tips-plot-test.XXXXXX)
trap 'rm -rf -- "$DIR"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# bench NAME ARGS...: a tips-bench run that must succeed and write $DIR/NAME.json.
bench() {
	local name=$1; shift
	"$BENCH" "$@" --json "$DIR/$name.json" >"$DIR/$name.out" 2>&1 ||
		{ fail "tips-bench $*: exit $? ($(tail -1 "$DIR/$name.out"))"; return 1; }
}

# plot_ok OUT_DIR PNG... -- ARGS...: plot_bench.py ARGS must exit 0, print the path of
# every PNG in OUT_DIR, and each must be a valid PNG of a real figure.
plot_ok() {
	local out=$1; shift
	local pngs=()
	while [[ $1 != -- ]]; do pngs+=("$1"); shift; done
	shift
	if ! "$PY" "$PLOT" "$@" >"$DIR/plot.out" 2>"$DIR/plot.err"; then
		fail "plot_bench.py $*: exit $? ($(tail -1 "$DIR/plot.err"))"
		return
	fi
	for png in "${pngs[@]}"; do
		grep -qxF "$out/$png" "$DIR/plot.out" || fail "plot_bench.py $*: did not print $out/$png"
	done
	"$PY" - "$out" "${pngs[@]}" <<-'EOF' || fail "plot_bench.py $*: bad figures"
	import sys
	from pathlib import Path
	from PIL import Image
	out, bad = Path(sys.argv[1]), 0
	for name in sys.argv[2:]:
	    path = out / name
	    try:
	        with Image.open(path) as im:
	            im.verify()  # a complete, uncorrupted PNG
	        with Image.open(path) as im:
	            colors = im.convert("RGB").getcolors(4096)  # None: more than 4096
	            problem = ("not a PNG" if im.format != "PNG" else
	                       f"only {im.width}x{im.height}" if im.width < 600 or im.height < 400 else
	                       f"{im.width} px wide" if im.width > 2000 else
	                       "nearly blank" if colors is not None and len(colors) < 8 else
	                       "under 10 KB" if path.stat().st_size < 10_000 else None)
	    except Exception as e:
	        problem = str(e)
	    if problem:
	        print(f"FAIL: {path}: {problem}", file=sys.stderr)
	        bad += 1
	sys.exit(1 if bad else 0)
	EOF
	echo "ok: plot_bench.py $*"
}

# plot_fails WHY ARGS...: plot_bench.py ARGS must exit 2 with a message.
plot_fails() {
	local why=$1; shift
	local rc=0
	"$PY" "$PLOT" "$@" >/dev/null 2>"$DIR/plot.err" || rc=$?
	[[ $rc -eq 2 ]] || fail "$why must exit 2, not $rc"
	grep -q '^plot_bench: ' "$DIR/plot.err" || fail "$why gave no message"
	echo "ok: $why exits 2"
}

index=$("$BENCH" --list | awk 'NR == 1 {print $1}')
all=(throughput.png ratios.png load.png timeline.png latency_cdf.png)
if bench compare compare --records 2K --ops 2K --repeat 2 --max-seconds 1 --workloads a,c,e \
	--threads 1,2 --indexes tips-hash,tips-art; then
	plot_ok "$DIR/compare-plots" "${all[@]}" -- "$DIR/compare.json"
	plot_ok "$DIR/log" "${all[@]}" -- "$DIR/compare.json" --log --out "$DIR/log"
fi
if bench single --index "$index" --records 2K --ops 20K --workload b --sample-ms 5; then
	plot_ok "$DIR/single" timeline.png latency_cdf.png -- "$DIR/single.json" --out "$DIR/single"
fi

plot_fails "a missing file" "$DIR/no-such.json"
echo '{"index": "x", "run": ' >"$DIR/truncated.json"
plot_fails "invalid JSON" "$DIR/truncated.json"
echo '{"kind": "something-else", "results": []}' >"$DIR/other.json"
plot_fails "a document of neither shape" "$DIR/other.json"
echo '[1, 2, 3]' >"$DIR/list.json"
plot_fails "a JSON list" "$DIR/list.json"

if [[ $failures -ne 0 ]]; then
	echo "plot_test: $failures failure(s)" >&2
	exit 1
fi
echo "plot_test: all passed"
