#!/usr/bin/env bash
# cli_test.sh - tests the `tips` command-line tool and the `tips-demo` example as a user
# runs them: exit codes (0 ok, 1 inconsistent, 2 usage, 3 failure) and messages of
# `tips --help`, usage errors, `tips pool create|info|check` on /dev/shm (media shm) and
# on a /tmp file (media file), the documented failures (existing file, missing directory,
# bad size, not a pool), `grow` (usage, refusals, a locked pool, data kept, the heap
# reaching the new end), `check` on a fresh pool and on pools whose heap chunk table was
# corrupted on purpose, and a demo list written by one process and verified by another.
#
# usage: cli_test.sh TIPS_EXE TIPS_DEMO_EXE SOURCE_DIR
set -euo pipefail

if [[ $# -ne 3 ]]; then
	echo "usage: $0 TIPS_EXE TIPS_DEMO_EXE SOURCE_DIR" >&2
	exit 2
fi
TIPS=$1
DEMO=$2
SRC=$3
for exe in "$TIPS" "$DEMO"; do
	[[ -x $exe ]] || { echo "FAIL: $exe is not an executable" >&2; exit 1; }
done
HEAP_LAYOUT=$SRC/src/heap/heap_layout.h
[[ -r $HEAP_LAYOUT ]] || { echo "FAIL: cannot read $HEAP_LAYOUT" >&2; exit 1; }

SHM_DIR=$(mktemp -d /dev/shm/tips-cli-test.XXXXXX)
FILE_DIR=$(mktemp -d /tmp/tips-cli-test.XXXXXX)
cleanup() { rm -rf -- "$SHM_DIR" "$FILE_DIR"; }
trap cleanup EXIT
OUT=$FILE_DIR/stdout
ERR=$FILE_DIR/stderr

failures=0
fail() {
	echo "FAIL: $*" >&2
	failures=$((failures + 1))
}
pass() { echo "ok: $*"; }

# run CMD...: runs CMD with stdout in $OUT and stderr in $ERR; its exit code in $RC.
RC=0
run() {
	set +e
	"$@" >"$OUT" 2>"$ERR"
	RC=$?
	set -e
}
show() {
	echo "  --- stdout:"; sed 's/^/  | /' "$OUT"
	echo "  --- stderr:"; sed 's/^/  | /' "$ERR"
}
# expect_rc WANT DESCRIPTION: checks $RC of the last run.
expect_rc() {
	if [[ $RC -ne $1 ]]; then
		fail "$2: exit code $RC, expected $1"
		show >&2
		return 1
	fi
	return 0
}
# expect_in FILE REGEX DESCRIPTION: FILE (stdout or stderr of the last run) matches.
expect_in() {
	if ! grep -Eq -- "$2" "$1"; then
		fail "$3: $(basename "$1") does not match /$2/"
		show >&2
		return 1
	fi
	return 0
}
expect_empty() {
	if [[ -s $1 ]]; then
		fail "$2: $(basename "$1") should be empty"
		show >&2
		return 1
	fi
	return 0
}
# check WANT_RC DESCRIPTION [STREAM REGEX]...: run already done; all expectations.
check() {
	local want=$1 what=$2 ok=1
	shift 2
	expect_rc "$want" "$what" || ok=0
	while [[ $# -ge 2 ]]; do
		local f=$OUT
		[[ $1 == stderr ]] && f=$ERR
		expect_in "$f" "$2" "$what" || ok=0
		shift 2
	done
	[[ $ok -eq 1 ]] && pass "$what"
	return 0
}

# ---- usage ---------------------------------------------------------------------------
run "$TIPS" --help
check 0 "tips --help" stdout '^usage: tips pool create PATH --size SIZE' stdout 'exit codes: 0 ok'
expect_empty "$ERR" "tips --help" || true
run "$TIPS" -h
check 0 "tips -h" stdout '^usage: tips pool'
run "$TIPS" pool --help
check 0 "tips pool --help" stdout '^usage: tips pool'

run "$TIPS"
check 2 "tips (no arguments)" stderr '^usage: tips pool'
expect_empty "$OUT" "tips (no arguments)" || true
run "$TIPS" pool
check 2 "tips pool (no command)" stderr '^usage: tips pool'
run "$TIPS" frobnicate x
check 2 "tips frobnicate (unknown command)" stderr '^usage: tips pool'
run "$TIPS" pool frobnicate x
check 2 "tips pool frobnicate (unknown command)" stderr "unknown command 'pool frobnicate'" \
	stderr '^usage: tips pool'
run "$TIPS" pool create "$SHM_DIR/u" --size 16M --bogus 1
check 2 "create with an unknown option" stderr "unknown or incomplete option '--bogus'"
run "$TIPS" pool create "$SHM_DIR/u" --size
check 2 "create with --size missing its value" stderr "unknown or incomplete option '--size'"
run "$TIPS" pool create "$SHM_DIR/u"
check 2 "create without --size" stderr '--size is required'
for bad in 12Q 16MX -5 abc ''; do
	run "$TIPS" pool create "$SHM_DIR/u" --size "$bad"
	check 2 "create --size '$bad' (bad size string)" stderr "'$bad' is not a size"
done
run "$TIPS" pool info
check 2 "info without a path" stderr '^usage: tips pool'
run "$TIPS" pool check a b
check 2 "check with two paths" stderr '^usage: tips pool'
[[ ! -e $SHM_DIR/u ]] || fail "a usage error created $SHM_DIR/u"

# ---- create and info -----------------------------------------------------------------
SHM_POOL=$SHM_DIR/pool
run "$TIPS" pool create "$SHM_POOL" --size 16M
check 0 "create on /dev/shm" stdout "^created $SHM_POOL: 16777216 bytes at 0x[0-9a-f]+, media shm$"
run "$TIPS" pool info "$SHM_POOL"
check 0 "info on the /dev/shm pool" stdout '^media: +shm$' stdout '^clean shutdown:  yes$' \
	stdout "^path: +$SHM_POOL$" stdout '^size: +16777216 bytes$' stdout '^layout version:  1$' \
	stdout '^uuid: +[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$' \
	stdout '^flush: +(clwb|clflushopt|clflush)$'
# A heap of 256 MiB or more gives its allocation logs 1/8 of itself (at most 64 MiB),
# a smaller one 1/32, as the 16 MiB pools below (src/heap/heap_open.c): a 512 MiB pool
# keeps 1557 chunks of 256 KiB for data (1724 with 1/32).
BIG_POOL=$SHM_DIR/big
run "$TIPS" pool create "$BIG_POOL" --size 512M
expect_rc 0 "create a 512 MiB pool" || exit 1
run "$TIPS" pool check "$BIG_POOL"
check 0 "a 512 MiB pool's heap gives its logs 1/8" stdout '^chunks: +1557 \(1557 free, 0 in runs, 0 in extents\)$'
rm -f "$BIG_POOL"
# TIPS_FLUSH forces the weakest instruction.
TIPS_FLUSH=clflush run "$TIPS" pool info "$SHM_POOL"
check 0 "info with TIPS_FLUSH=clflush" stdout '^flush: +clflush$'

FILE_POOL=$FILE_DIR/pool
run "$TIPS" pool create "$FILE_POOL" --size 8MiB
check 0 "create on a /tmp file" stdout "^created $FILE_POOL: 8388608 bytes at 0x[0-9a-f]+, media file$"
run "$TIPS" pool info "$FILE_POOL"
check 0 "info on the /tmp pool" stdout '^media: +file$' stdout '^clean shutdown:  yes$' \
	stdout '^flush: +msync$'
# The temporary file create builds under must be gone.
leftover=$(find "$SHM_DIR" "$FILE_DIR" -name '.*creating*' | head -n 1)
[[ -z $leftover ]] && pass "create leaves no temporary file" || fail "create left $leftover"

# ---- create failures -----------------------------------------------------------------
before=$(cksum <"$SHM_POOL")
run "$TIPS" pool create "$SHM_POOL" --size 16M
check 3 "create on an existing path" stderr 'already exists'
expect_empty "$OUT" "create on an existing path" || true
[[ $(cksum <"$SHM_POOL") == "$before" ]] && pass "the existing pool is untouched" ||
	fail "create on an existing path modified it"

run "$TIPS" pool create "$FILE_DIR/missing/pool" --size 16M
check 3 "create in a missing directory" stderr "directory $FILE_DIR/missing does not exist"
[[ ! -e $FILE_DIR/missing ]] || fail "create made the missing directory"

run "$TIPS" pool create "$FILE_DIR/small" --size 1M
check 3 "create --size 1M" stderr 'pool size 1048576' stderr '\(pool size too small, too large or not aligned, or a buffer too small for the value\)'
run "$TIPS" pool create "$FILE_DIR/odd" --size 9M
check 3 "create --size 9M (not 2 MiB aligned)" stderr 'must be a multiple of 2 MiB'
[[ ! -e $FILE_DIR/small && ! -e $FILE_DIR/odd ]] || fail "a failed create left a pool file"

# ---- info failures -------------------------------------------------------------------
NOT_POOL=$FILE_DIR/not-a-pool
head -c 8192 /dev/urandom >"$NOT_POOL"
run "$TIPS" pool info "$NOT_POOL"
check 3 "info on a non-pool file" stderr 'not a TIPS pool'
run "$TIPS" pool check "$NOT_POOL"
check 3 "check on a non-pool file" stderr 'not a TIPS pool'
run "$TIPS" pool info "$FILE_DIR/nothing-here"
check 3 "info on a missing file" stderr "no pool file at $FILE_DIR/nothing-here"

# ---- check ---------------------------------------------------------------------------
run "$TIPS" pool check "$SHM_POOL"
check 0 "check on a fresh pool" stdout '^result:          consistent$' \
	stdout '^blocks: +0 allocated' stdout '^pending records: 0$'
run "$TIPS" pool check "$FILE_POOL"
check 0 "check on a fresh file pool" stdout '^result:          consistent$'

# Heap geometry, from `tips pool info` and the heap header (src/heap/heap_layout.h):
# struct heap_header { u64 magic; u32 layout_version, nlanes; u64 lane_records, nchunks;
# u64 lanes_offset, table_offset, chunks_offset; ... }, so table_offset is the
# little-endian u64 at byte 40 of the heap. Fail loudly if that layout changed.
grep -q 'uint64_t lanes_offset, table_offset, chunks_offset;' "$HEAP_LAYOUT" ||
	{ fail "heap_header layout in $HEAP_LAYOUT changed; update the offsets in $0"; exit 1; }
u64_at() { od -An -t u8 -j "$2" -N 8 "$1" | tr -d ' '; }
# put_entry FILE OFFSET KIND ARG: writes chunk table entry (kind << 56 | arg), arg < 256.
put_entry() {
	printf "$(printf '\\x%02x\\x00\\x00\\x00\\x00\\x00\\x00\\x%02x' "$4" "$3")" |
		dd of="$1" bs=1 seek="$2" conv=notrunc status=none
	local want
	want=$(printf '%02x000000000000%02x' "$3" "$4")
	[[ $(od -An -t x8 -j "$2" -N 8 "$1" | tr -d ' ') == "$want" ]] ||
		{ fail "chunk table entry $want was not written at offset $2 of $1"; exit 1; }
}
# table_entry_offset POOL: sets ENTRY0 to the file offset of chunk table entry 0.
table_entry_offset() {
	run "$TIPS" pool info "$1"
	expect_rc 0 "info before corrupting $1" || exit 1
	local heap_off
	heap_off=$(sed -nE 's/^heap: +[0-9]+ bytes at offset ([0-9]+)$/\1/p' "$OUT")
	[[ -n $heap_off ]] || { fail "no heap offset in info output"; show >&2; exit 1; }
	local magic
	magic=$(dd if="$1" bs=1 skip="$heap_off" count=8 status=none)
	[[ $magic == TIPSHEAP ]] || { fail "no heap magic at offset $heap_off of $1"; exit 1; }
	local table_off
	table_off=$(u64_at "$1" $((heap_off + 40)))
	[[ $table_off -gt 0 && $table_off -lt $(stat -c %s "$1") ]] ||
		{ fail "implausible table_offset $table_off"; exit 1; }
	ENTRY0=$((heap_off + table_off))
	[[ $(u64_at "$1" "$ENTRY0") == 0 ]] ||
		{ fail "chunk table entry 0 of a fresh pool is not CHUNK_FREE (0)"; exit 1; }
}

# (a) An unknown chunk kind (0xFF) in entry 0: heap_open()'s rebuild() refuses the
# table (TIPS_ECORRUPT), so the pool cannot even be opened: check reports the damage,
# naming the chunk and the cause, and exits 1.
BAD_KIND=$SHM_DIR/bad-kind
run "$TIPS" pool create "$BAD_KIND" --size 16M
expect_rc 0 "create pool to corrupt" || exit 1
table_entry_offset "$BAD_KIND"
put_entry "$BAD_KIND" "$ENTRY0" 255 0
run "$TIPS" pool check "$BAD_KIND"
check 1 "check with chunk kind 0xFF in the table (open refuses)" \
	stdout '^result: +INCONSISTENT: chunk 0: bad chunk table entry$'
run "$TIPS" pool check "$BAD_KIND"
check 1 "check again on the same corrupted pool (still refused, nothing repaired)" \
	stdout 'bad chunk table entry'

# (b) Entry 0 says EXTENT of 2 chunks but entry 1 is FREE instead of CONT 1, and the
# extent's block header is all zero: rebuild() accepts the table (it skips the extent's
# chunks unchecked), so the pool opens and tips_heap_check() must find all three
# problems (continuation, header size 0, allocation generation 0): INCONSISTENT, exit 1.
BAD_EXTENT=$SHM_DIR/bad-extent
run "$TIPS" pool create "$BAD_EXTENT" --size 16M
expect_rc 0 "create pool to corrupt" || exit 1
table_entry_offset "$BAD_EXTENT"
put_entry "$BAD_EXTENT" "$ENTRY0" 2 2
run "$TIPS" pool check "$BAD_EXTENT"
check 1 "check with an extent whose continuation is missing" \
	stdout '^result:          INCONSISTENT: heap: 3 problem\(s\); first: chunk 0: extent continuation 1 is wrong$' \
	stdout '^chunks: +46 \(44 free, 0 in runs, 2 in extents\)$' \
	stdout '^blocks: +1 allocated, 0 bytes requested$'

# ---- the demo ------------------------------------------------------------------------
DEMO_POOL=$SHM_DIR/demo
run "$TIPS" pool create "$DEMO_POOL" --size 32M
expect_rc 0 "create demo pool" || exit 1
run "$DEMO" write "$DEMO_POOL" 500
check 0 "tips-demo write 500" stdout "^wrote 500 records to $DEMO_POOL$"
run "$DEMO" verify "$DEMO_POOL" 500
check 0 "tips-demo verify 500 (new process)" stdout "^verified 500 records in $DEMO_POOL \(media shm"
run "$DEMO" verify "$DEMO_POOL" 499
check 1 "tips-demo verify with a wrong N (499)" stderr 'root says 500 records, expected 499'
run "$DEMO" verify "$DEMO_POOL" 501
check 1 "tips-demo verify with a wrong N (501)" stderr 'root says 500 records, expected 501'
run "$TIPS" pool check "$DEMO_POOL"
# struct record is 64 bytes: 500 blocks, 500 * 64 bytes requested.
check 0 "check on the demo pool" stdout '^blocks: +500 allocated, 32000 bytes requested$' \
	stdout '^result:          consistent$'
run "$TIPS" pool info "$DEMO_POOL"
check 0 "info on the demo pool after clean closes" stdout '^clean shutdown:  yes$'
run "$TIPS" pool check "$DEMO_POOL" --index no-such-index
check 2 "check --index with an unknown index" stderr "no index named 'no-such-index'; known:.* tips-hash"
run "$TIPS" pool check "$DEMO_POOL" --index tips-hash
check 3 "check --index on a pool without a TIPS index" stderr 'holds no TIPS index'
# Appending continues the list; the longer list verifies, the old count does not.
run "$DEMO" write "$DEMO_POOL" 600
check 0 "tips-demo write 600 (append)" stdout '^wrote 600 records'
run "$DEMO" verify "$DEMO_POOL" 600
check 0 "tips-demo verify 600" stdout '^verified 600 records'
run "$DEMO" verify "$DEMO_POOL" 500
check 1 "tips-demo verify 500 after appending" stderr 'expected 500'
run "$DEMO" verify "$SHM_DIR/no-such-pool" 1
check 3 "tips-demo verify on a missing pool" stderr 'no pool file'
run "$DEMO" verify "$DEMO_POOL"
check 2 "tips-demo with a missing argument" stderr '^usage: tips-demo'

# ---- grow ----------------------------------------------------------------------------
# The demo pool (600 records) grows from 32 MiB; its records stay, the heap gets the room.
run "$TIPS" pool grow "$DEMO_POOL"
check 2 "grow without --size" stderr '^usage: tips pool'
run "$TIPS" pool grow "$DEMO_POOL" --size
check 2 "grow with --size missing its value" stderr '^usage: tips pool'
run "$TIPS" pool grow "$DEMO_POOL" --size lots
check 2 "grow with a size that is not one" stderr "'lots' is not a size"
run "$TIPS" pool grow "$DEMO_POOL" --size 16M
check 3 "grow to a smaller size" stderr 'already has 33554432 bytes' stderr '\(pool size too small'
run "$TIPS" pool grow "$DEMO_POOL" --size 33M
check 3 "grow to a size that is not 2 MiB aligned" stderr 'multiples of 2 MiB'
run "$TIPS" pool grow "$FILE_DIR/nothing-here" --size 64M
check 3 "grow a missing file" stderr "no pool file at $FILE_DIR/nothing-here"
run "$TIPS" pool grow "$FILE_DIR/not-a-pool" --size 64M
check 3 "grow a non-pool file" stderr 'not a TIPS pool'
run "$TIPS" pool info "$DEMO_POOL"
check 0 "info before grow" stdout '^size: +33554432 bytes$'
run "$TIPS" pool grow "$DEMO_POOL" --size 64M
check 0 "grow the demo pool to 64M" stdout "^grew $DEMO_POOL: 33554432 -> 67108864 bytes$"
run "$TIPS" pool info "$DEMO_POOL"
check 0 "info after grow" stdout '^size: +67108864 bytes$' \
	stdout "^heap: +[0-9]+ bytes at offset [0-9]+$"
HEAP_LINE=$(grep '^heap:' "$OUT")
HEAP_BYTES=$(echo "$HEAP_LINE" | awk '{print $2}')
HEAP_OFF=$(echo "$HEAP_LINE" | awk '{print $6}')
if [[ $((HEAP_BYTES + HEAP_OFF)) -eq 67108864 ]]; then
	pass "the grown heap reaches the end of the pool"
else
	fail "grown heap: $HEAP_BYTES bytes at $HEAP_OFF do not end at 64 MiB"
fi
run "$DEMO" verify "$DEMO_POOL" 600
check 0 "tips-demo verify 600 after grow" stdout '^verified 600 records'
run "$TIPS" pool check "$DEMO_POOL"
check 0 "check after grow" stdout '^blocks: +600 allocated' stdout '^chunks: +[0-9]+ ' \
	stdout '^result:          consistent$'
CHUNKS=$(awk '/^chunks:/ {print $2}' "$OUT")
if [[ $CHUNKS -ge 200 ]]; then
	pass "the grown heap has $CHUNKS chunks (>= 200 of 256 KiB)"
else
	fail "the grown heap has $CHUNKS chunks, expected at least 200"
fi
# A file pool grows too; a pool locked by another process (flock, as an open pool is) does not.
run "$TIPS" pool grow "$FILE_POOL" --size 10M
check 0 "grow the /tmp file pool (media file)" stdout '8388608 -> 10485760 bytes'
run "$TIPS" pool check "$FILE_POOL"
check 0 "check the grown file pool" stdout '^result:          consistent$'
exec 9>>"$DEMO_POOL"
flock -x 9
run "$TIPS" pool grow "$DEMO_POOL" --size 128M
check 3 "grow a pool locked by another process" stderr 'already open' stderr '\(pool is already open elsewhere\)'
flock -u 9
exec 9>&-
run "$TIPS" pool grow "$DEMO_POOL" --size 128M
check 0 "grow once the lock is gone" stdout '67108864 -> 134217728 bytes'

if [[ $failures -ne 0 ]]; then
	echo "cli_test: $failures failure(s)" >&2
	exit 1
fi
echo "cli_test: all passed"
