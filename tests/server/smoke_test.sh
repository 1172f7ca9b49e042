#!/usr/bin/env bash
# smoke_test.sh - tips-server end to end with redis-cli: start on a free port with a pool
# in /dev/shm, a few commands of every kind and their exact replies, pipelining, a 1 MiB
# string, MULTI/EXEC, restart after SHUTDOWN and after kill -9 (the data is there), and
# the start-up errors (port in use, unknown index, missing directory, a pool of another
# index: one line, non-zero exit, pool untouched).
#   smoke_test.sh TIPS_SERVER [INDEX]
set -euo pipefail
server=$1
index=${2:-tips-art}
dir=$(mktemp -d /dev/shm/tips-smoke.XXXXXX)
pool=$dir/db.pool
pid=""
starts=0
log=$dir/log.0
cleanup() {
	[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; [ -f "$log" ] && tail -20 "$log" >&2; exit 1; }
free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }

port=$(free_port)
start() { # each start logs to its own file, $log
	log=$dir/log.$((++starts))
	"$server" --port "$port" --pool "$pool" --pool-size 256mb --index "$index" --threads 2 \
		"$@" >"$log" 2>&1 &
	pid=$!
	for _ in $(seq 100); do
		grep -q "Ready to accept connections" "$log" 2>/dev/null && return 0
		kill -0 "$pid" 2>/dev/null || fail "server exited at start"
		sleep 0.1
	done
	fail "server not ready"
}
stop() { # SHUTDOWN and wait for the process
	redis-cli -p "$port" shutdown >/dev/null 2>&1 || true
	wait "$pid" || fail "server exit status $?"
	pid=""
}
cli() { redis-cli -p "$port" "$@"; }
expect() { # expect "WANT" cmd args...
	local want=$1; shift
	local got
	got=$(cli "$@" 2>&1) || true
	[ "$got" = "$want" ] || fail "$*: got '$got', want '$want'"
}

start
grep -q "media shm" "$log" || fail "the log does not name the media"
expect PONG ping
expect OK set k v
expect v get k
expect OK mset a 1 b 2
expect "$(printf '1\n2\n\n')" mget a b nokey
expect 2 incr a
expect 12 incrby a 10
expect "ERR value is not an integer or out of range" incr k
expect "ERR unknown command 'foo', with args beginning with: 'bar' " foo bar
expect "ERR wrong number of arguments for 'get' command" get
expect "NOPROTO unsupported protocol version" hello 3
expect 1 expire k 100
# TTL rounds the time left to seconds: 100 right after the EXPIRE, 99 once half a
# second has passed between the two redis-cli runs (a loaded machine).
ttl=$(cli ttl k)
[ "$ttl" = 100 ] || [ "$ttl" = 99 ] || fail "ttl k: got '$ttl', want 100 or 99"
expect 1 persist k
expect -1 ttl k
expect 2 del a b
expect 0 exists a
expect 1 dbsize
expect string type k
expect OK rename k k2
expect v get k2
# MULTI/EXEC: one connection, replies in order
out=$(printf 'MULTI\nSET x 1\nINCR x\nGET x\nEXEC\n' | cli)
[ "$out" = "$(printf 'OK\nQUEUED\nQUEUED\nQUEUED\nOK\n2\n2')" ] || fail "multi/exec: $out"
# WATCH: a write by another client to a watched key makes EXEC run nothing
exec 4<>"/dev/tcp/127.0.0.1/$port"
printf 'WATCH w\r\n' >&4; IFS= read -r l1 <&4
expect OK set w other
printf 'MULTI\r\nSET w mine\r\nEXEC\r\n' >&4
IFS= read -r l1 <&4; IFS= read -r l2 <&4; IFS= read -r l3 <&4
[ "$l3" = "$(printf -- '*-1\r')" ] || fail "EXEC after a watched key changed: $l1 $l2 $l3"
expect other get w
printf 'WATCH w\r\nMULTI\r\nSET w mine\r\nEXEC\r\n' >&4
for _ in 1 2 3 4 5; do IFS= read -r l1 <&4; done
[ "$l1" = "+OK$(printf '\r')" ] || fail "EXEC with an unchanged watched key: $l1"
expect mine get w
exec 4<&-
expect 1 del w
# pipelining: three commands in one write, three replies
exec 3<>"/dev/tcp/127.0.0.1/$port"
printf 'PING\r\n*2\r\n$3\r\nGET\r\n$1\r\nx\r\nECHO hi\r\n' >&3
IFS= read -r l1 <&3; IFS= read -r l2 <&3; IFS= read -r l3 <&3; IFS= read -r l4 <&3
IFS= read -r l5 <&3
[ "$l1$l2$l3$l4$l5" = "$(printf '+PONG\r$1\r2\r$2\rhi\r')" ] || fail "pipelining: $l1 $l2 $l3 $l4 $l5"
# group commit: 100 pipelined SETs in one write share far fewer than 100 batches
before=$(cli info stats | tr -d '\r' | sed -n 's/^batches_committed://p')
req=""
for i in $(seq 100); do req+="*3\r\n\$3\r\nSET\r\n\$5\r\np$((1000 + i))\r\n\$1\r\nv\r\n"; done
printf "$req" >&3
for i in $(seq 100); do IFS= read -r l1 <&3; [ "$l1" = "$(printf '+OK\r')" ] || fail "pipelined SET $i: $l1"; done
after=$(cli info stats | tr -d '\r' | sed -n 's/^batches_committed://p')
[ $((after - before)) -lt 50 ] || fail "100 pipelined SETs took $((after - before)) batches"
# a protocol error is answered after the commands before it, then the connection closes
printf '*1\r\n$4\r\nPING\r\n*1\r\n$-5\r\n' >&3
IFS= read -r l1 <&3; IFS= read -r l2 <&3
[ "$l1" = "$(printf '+PONG\r')" ] || fail "before the protocol error: $l1"
[ "$l2" = "$(printf -- '-ERR Protocol error: invalid bulk length\r')" ] || fail "protocol error: $l2"
exec 3<&-
# a 1 MiB string, stored in pieces (a 256 MiB pool takes strings up to 1.5 MiB)
python3 -c 'import random,string,sys;r=random.Random(7);sys.stdout.write("".join(r.choice(string.ascii_letters) for _ in range(1<<20)))' >"$dir/big"
cli -x set big <"$dir/big" >/dev/null
expect 1048576 strlen big
cli --raw get big >"$dir/big.out"
cmp -s -n 1048576 "$dir/big.out" "$dir/big" || fail "1 MiB string differs"
# a reply past client-output-buffer-limit drops the client (and only that client)
expect OK config set client-output-buffer-limit 1mb
cli get big >/dev/null 2>&1 || true
grep -q "Closing client .*client-output-buffer-limit" "$log" || fail "output limit not enforced"
expect OK config set client-output-buffer-limit 1gb
expect 1048576 strlen big
expect 1048576 setrange big 5 ""
# a 4 MiB string: more than one batch takes, its pieces are staged ahead of the batch
# that makes it visible
head -c 3145728 /dev/urandom >"$dir/raw"
base64 -w0 "$dir/raw" >"$dir/huge"
cli -x set huge <"$dir/huge" >/dev/null
expect 4194304 strlen huge
cli --raw get huge >"$dir/huge.out"
cmp -s -n 4194304 "$dir/huge.out" "$dir/huge" || fail "4 MiB string differs"
expect 104 dbsize
cli info tips | grep -q "fences_per_commit" || fail "INFO has no tips section"
# the sweeper: an expired key nobody reads is deleted, and the pieces of an overwritten
# long string are swept
expect OK set short-lived v px 50
cli -x set big2 <"$dir/big" >/dev/null
expect OK set big2 small
for _ in $(seq 50); do
	[ "$(cli dbsize)" = 105 ] && [ "$(cli info stats | tr -d '\r' | sed -n 's/^swept_members://p')" -ge 16 ] && break
	sleep 0.1
done
expect 105 dbsize
cli info stats | grep -q "^expired_keys:1" || fail "the sweeper did not expire the key"
stop
grep -q "Pool closed cleanly" "$log" || fail "no clean close in the log"

# restart from a config file with a password and a unix socket; SIGTERM closes cleanly
cat >"$dir/conf" <<CONF
# a comment
requirepass "s3cret"
unixsocket $dir/sock
CONF
start --config "$dir/conf"
expect "NOAUTH Authentication required." get k2
expect v -a s3cret --no-auth-warning get k2
expect v -s "$dir/sock" -a s3cret --no-auth-warning get k2
expect "WRONGPASS invalid username-password pair or user is disabled." auth nope
# before AUTH only small requests are read (as Redis: 10 arguments, 16 KiB bulks)
expect "ERR Protocol error: invalid multibulk length" mget 1 2 3 4 5 6 7 8 9 10 11
kill -TERM "$pid"; wait "$pid" || fail "exit status $? after SIGTERM"; pid=""
grep -q "Received SIGTERM" "$log" && grep -q "Pool closed cleanly" "$log" || fail "SIGTERM"

# restart: everything is there, nothing replayed
start
grep -q "Clean shutdown found: nothing to replay" "$log" || fail "restart replayed"
expect v get k2
expect 1048576 strlen big
expect 4194304 strlen huge
expect 2 get x
# kill -9: every acknowledged write survives
expect OK set after-kill yes
kill -9 "$pid"; wait "$pid" 2>/dev/null || true; pid=""
start
expect yes get after-kill
stop

# start-up errors: one line, non-zero exit, the pool untouched
sum=$(md5sum "$pool" | cut -d' ' -f1)
expect_fail() { # expect_fail "message part" args...
	local msg=$1; shift
	local out rc=0
	out=$(timeout 20 "$server" --pool "$pool" --pool-size 64mb "$@" 2>&1 >/dev/null) || rc=$?
	[ "$rc" -ne 0 ] || fail "tips-server $* exited 0"
	echo "$out" | grep -q -- "$msg" || fail "tips-server $*: '$out' lacks '$msg'"
}
# a port held by another process (its own free port, printed once it listens)
coproc HOLDER { python3 -c 'import socket,sys;s=socket.socket();s.bind(("127.0.0.1",0));s.listen();print(s.getsockname()[1],flush=True);sys.stdin.read()'; }
read -r busy <&"${HOLDER[0]}"
expect_fail "cannot listen on 127.0.0.1:$busy" --port "$busy" --index "$index"
kill "$HOLDER_PID"; wait "$HOLDER_PID" 2>/dev/null || true
expect_fail "unknown index 'no-such'" --port "$(free_port)" --index no-such
expect_fail "unknown option '--nope'" --nope 1
timeout 20 "$server" --port "$(free_port)" --pool "$dir/no/such/dir.pool" --index "$index" >/dev/null 2>"$dir/err" &&
	fail "missing directory accepted"
grep -q "cannot open pool" "$dir/err" || fail "missing directory: $(cat "$dir/err")"
[ "$(md5sum "$pool" | cut -d' ' -f1)" = "$sum" ] || fail "a failed start changed the pool"
# a pool of another index: refused when opened (libtips counts the open in the pool's
# header, so the bytes change), the keys intact
other=tips-bptree; [ "$index" = tips-bptree ] && other=tips-art
if [ "$index" != listdb ]; then
	expect_fail "holds index" --port "$(free_port)" --index "$other"
	start
	expect yes get after-kill
	stop
fi
echo "smoke_test ($index): ok"
