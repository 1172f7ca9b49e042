#!/usr/bin/env bash
# test.sh - build and run the default test suite (labels unit, stress, crash, install;
# the long `campaign` label is excluded).
#
#   scripts/test.sh                     Release build in build-test/
#   scripts/test.sh --sanitize address  ASan + UBSan build in build-asan/
#   scripts/test.sh --sanitize thread   TSan build in build-tsan/
#   scripts/test.sh --campaign          only the long crash campaigns (200 crashes a mode)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
sanitize=""
select=(-LE campaign)
while [ $# -gt 0 ]; do
	case "$1" in
	--sanitize) sanitize=$2; shift 2 ;;
	--campaign) select=(-L campaign); shift ;;
	*) echo "usage: scripts/test.sh [--sanitize address|thread] [--campaign]" >&2; exit 2 ;;
	esac
done
case "$sanitize" in
"") dir="$root/build-test"; "$root/scripts/build.sh" "$dir" ;;
address) dir="$root/build-asan" ;;
thread) dir="$root/build-tsan" ;;
*) echo "test.sh: --sanitize takes address or thread" >&2; exit 2 ;;
esac
[ -z "$sanitize" ] || "$root/scripts/build.sh" "$dir" -DCMAKE_BUILD_TYPE=Debug -DTIPS_SANITIZE="$sanitize" \
	-DTIPS_BUILD_BENCH=ON
cd "$dir"
# TSan: the crash tests fork children that start threads of their own (a store's
# background threads) after the parent ran threads, which TSan refuses by default;
# each child uses only what it opens itself, so let them run (races are still reported).
# tests/tsan.supp silences races inside libpmemobj, a system library TSan cannot see.
[ "$sanitize" != thread ] ||
	export TSAN_OPTIONS="die_after_fork=0 suppressions=$root/tests/tsan.supp ${TSAN_OPTIONS:-}"
ctest "${select[@]}" --output-on-failure -j2
