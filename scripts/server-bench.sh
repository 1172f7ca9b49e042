#!/usr/bin/env bash
# server-bench.sh - tips-server against redis-server, side by side, with redis-benchmark.
#
# Throughput (default): `redis-benchmark -t set,get -n N -r N -d 8 -c 50 -q --csv` with
# -P 1 and -P 16 against each server, each on a fresh data directory under /dev/shm,
# R repeats; prints a table of median requests/s and the ratio to redis-server with
# appendfsync always (the Redis setting with the same promise as tips-server: a reply
# leaves after its write is durable), and writes a JSON file.
#   servers: tips-hash, tips-art, listdb (tips-server on that index), redis (no
#   persistence), redis-always (appendfsync always), redis-everysec (appendfsync everysec)
#
# Restart (--restart): loads K keys (redis-cli --pipe), then times launch-to-first-PONG
# after kill -9 and after SHUTDOWN, for tips-server and redis-server appendfsync always,
# and checks that DBSIZE is K after each restart; writes a JSON file.
#
#   scripts/server-bench.sh [--n N] [--repeats R] [--servers a,b,..] [--pipelines "1 16"]
#                           [--tips-server PATH] [--pool-size SIZE (1gb)] [--json FILE]
#   scripts/server-bench.sh --restart [--keys K] [--servers tips-art,redis-always] [--json FILE]
# Needs redis-server, redis-tools (scripts/install-deps.sh) and a built tips-server.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
n=100000
repeats=3
servers=tips-hash,tips-art,listdb,redis,redis-always,redis-everysec
pipelines="1 16"
tips_server="$root/build/tips-server"
pool_size=1gb
json=""
mode=throughput
keys=200000
servers_given=""
while [ $# -gt 0 ]; do
	case "$1" in
	--n) n=$2; shift 2 ;;
	--repeats) repeats=$2; shift 2 ;;
	--servers) servers=$2; servers_given=1; shift 2 ;;
	--pipelines) pipelines=$2; shift 2 ;;
	--tips-server) tips_server=$2; shift 2 ;;
	--pool-size) pool_size=$2; shift 2 ;;
	--json) json=$2; shift 2 ;;
	--restart) mode=restart; shift ;;
	--keys) keys=$2; shift 2 ;;
	-h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "server-bench: unknown argument $1 (see --help)" >&2; exit 2 ;;
	esac
done
[ "$mode" = restart ] && [ -z "$servers_given" ] && servers=tips-art,redis-always
[ -n "$json" ] || json="$root/build/server-bench-$mode.json"
for tool in redis-server redis-cli redis-benchmark python3; do
	command -v "$tool" >/dev/null || { echo "server-bench: $tool not found; install it with scripts/install-deps.sh" >&2; exit 1; }
done
case ",$servers," in
*,tips-*|*,listdb,*) [ -x "$tips_server" ] || { echo "server-bench: no tips-server at $tips_server (build it, or --tips-server PATH)" >&2; exit 1; } ;;
esac

work=$(mktemp -d /dev/shm/tips-server-bench.XXXXXX)
pid=""
cleanup() {
	[ -z "$pid" ] || { kill -9 "$pid"; wait "$pid"; } 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

now_ns() { date +%s%N; }

# launch NAME DIR PORT: start the server in the background (pid in $pid).
launch() {
	local name=$1 dir=$2 port=$3
	case "$name" in
	tips-*|listdb)
		"$tips_server" --port "$port" --bind 127.0.0.1 --pool "$dir/tips.pool" --pool-size "$pool_size" \
			--index "$name" >>"$dir/server.log" 2>&1 &
		;;
	redis|redis-always|redis-everysec)
		local persist=(--appendonly no)
		[ "$name" = redis-always ] && persist=(--appendonly yes --appendfsync always)
		[ "$name" = redis-everysec ] && persist=(--appendonly yes --appendfsync everysec)
		redis-server --port "$port" --bind 127.0.0.1 --save '' --dir "$dir" --logfile '' \
			"${persist[@]}" >>"$dir/server.log" 2>&1 &
		;;
	*) echo "server-bench: unknown server $name" >&2; exit 2 ;;
	esac
	pid=$!
}

# wait_pong PORT: poll PING until PONG; fails loudly after 60 s or if the server exited.
wait_pong() {
	local port=$1 deadline=$((SECONDS + 60))
	until [ "$(redis-cli -h 127.0.0.1 -p "$port" PING 2>/dev/null)" = PONG ]; do
		if ! kill -0 "$pid" 2>/dev/null; then
			echo "server-bench: the server exited before answering PING; its log:" >&2
			tail -20 "$work"/*/server.log >&2
			exit 1
		fi
		[ $SECONDS -lt $deadline ] || { echo "server-bench: no PONG on port $port within 60 s" >&2; exit 1; }
	done
}

stop() {
	{ kill -9 "$pid"; wait "$pid"; } 2>/dev/null || true
	pid=""
}

results="$work/results.tsv"
: >"$results"

throughput() {
	local name rep p port dir out
	for rep in $(seq 1 "$repeats"); do
		for name in ${servers//,/ }; do
			dir="$work/$name-$rep"
			mkdir -p "$dir"
			port=$(free_port)
			launch "$name" "$dir" "$port"
			wait_pong "$port"
			for p in $pipelines; do
				out=$(redis-benchmark -h 127.0.0.1 -p "$port" -t set,get -n "$n" -r "$n" -d 8 -c 50 \
					-P "$p" -q --csv 2>&1) || true
				if ! grep -q '^"SET"' <<<"$out" || ! grep -q '^"GET"' <<<"$out" || grep -qi 'error' <<<"$out"; then
					echo "server-bench: redis-benchmark against $name -P $p failed:" >&2
					echo "$out" >&2
					exit 1
				fi
				awk -F'"' -v s="$name" -v p="$p" -v r="$rep" \
					'$2=="SET"||$2=="GET" {print s "\t" p "\t" $2 "\t" r "\t" $4}' <<<"$out" >>"$results"
				echo "  $name -P $p repeat $rep: $(awk -F'"' '$2=="SET"||$2=="GET" {printf "%s %s  ", $2, $4}' <<<"$out")"
			done
			stop
			rm -rf "$dir"
		done
	done
	python3 - "$results" "$json" "$n" "$repeats" "$servers" <<'PY'
import json, statistics, sys
path, out, n, repeats, order = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5].split(",")
runs = {}
for line in open(path):
    s, p, t, r, rps = line.split("\t")
    runs.setdefault((s, int(p), t), []).append(float(rps))
med = {k: statistics.median(v) for k, v in runs.items()}
ps = sorted({k[1] for k in med})
print("\nmedian requests/s of %d repeats (redis-benchmark -t set,get -n %d -r %d -d 8 -c 50); "
      "ratio: to redis-server appendfsync always" % (repeats, n, n))
print("%-16s %4s %12s %12s %10s %10s" % ("server", "-P", "SET", "GET", "SET ratio", "GET ratio"))
for s in order:
    for p in ps:
        row = []
        for t in ("SET", "GET"):
            base = med.get(("redis-always", p, t))
            v = med.get((s, p, t))
            row.append((v, v / base if base and v else None))
        print("%-16s %4d %12.0f %12.0f %10s %10s" % (s, p, row[0][0], row[1][0],
              *["%.2f" % r if r else "-" for _, r in row]))
doc = {"n": n, "repeats": repeats, "command": "redis-benchmark -t set,get -n N -r N -d 8 -c 50 -P P --csv",
       "baseline": "redis-always",
       "results": [{"server": s, "pipeline": p, "test": t, "runs": runs[(s, p, t)], "median": med[(s, p, t)],
                    "ratio_to_baseline": (med[(s, p, t)] / med[("redis-always", p, t)]
                                          if ("redis-always", p, t) in med else None)}
                   for (s, p, t) in sorted(med)]}
with open(out, "w") as f:
    json.dump(doc, f, indent=1)
print("json: %s" % out)
PY
}

# time_start NAME DIR PORT: launch, and set $ms to the ms from launch to the first PONG.
# (Not run in a $(...) subshell: the server's pid must reach this shell, to be stopped.)
time_start() {
	local t0 t1
	t0=$(now_ns)
	launch "$1" "$2" "$3"
	wait_pong "$3"
	t1=$(now_ns)
	ms=$(((t1 - t0) / 1000000))
}

check_dbsize() {
	local got
	got=$(redis-cli -h 127.0.0.1 -p "$1" DBSIZE) || true
	[ "$got" = "$keys" ] || { echo "server-bench: DBSIZE $got after the restart, expected $keys" >&2; exit 1; }
}

restart() {
	local name dir port load ms ms_kill ms_shutdown reply
	load="$work/load.resp"
	python3 - "$load" "$keys" <<'PY'
import sys
with open(sys.argv[1], "wb") as f:
    for i in range(int(sys.argv[2])):
        k, v = b"key:%010d" % i, b"value:%010d" % i
        f.write(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(k), k, len(v), v))
PY
	for name in ${servers//,/ }; do
		dir="$work/$name"
		mkdir -p "$dir"
		port=$(free_port)
		time_start "$name" "$dir" "$port"
		reply=$(redis-cli -h 127.0.0.1 -p "$port" --pipe <"$load" 2>&1) || true
		grep -q "errors: 0, replies: $keys" <<<"$reply" || { echo "server-bench: load failed: $reply" >&2; exit 1; }
		stop
		time_start "$name" "$dir" "$port"
		ms_kill=$ms
		check_dbsize "$port"
		redis-cli -h 127.0.0.1 -p "$port" SHUTDOWN >/dev/null 2>&1 || true
		wait "$pid" 2>/dev/null || true
		pid=""
		time_start "$name" "$dir" "$port"
		ms_shutdown=$ms
		check_dbsize "$port"
		stop
		printf '%s\t%s\t%s\n' "$name" "$ms_kill" "$ms_shutdown" >>"$results"
		printf '  %-14s %d keys: launch to first PONG after kill -9 %s ms, after SHUTDOWN %s ms\n' \
			"$name" "$keys" "$ms_kill" "$ms_shutdown"
		rm -rf "$dir"
	done
	python3 - "$results" "$json" "$keys" <<'PY'
import json, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
doc = {"keys": int(sys.argv[3]), "unit": "ms from launch to the first PONG (redis-cli PING polled)",
       "results": [{"server": s, "after_kill9_ms": int(a), "after_shutdown_ms": int(b)} for s, a, b in rows]}
with open(sys.argv[2], "w") as f:
    json.dump(doc, f, indent=1)
print("json: %s" % sys.argv[2])
PY
}

echo "== server-bench $mode: servers $servers, data under $work"
if [ "$mode" = restart ]; then restart; else throughput; fi
