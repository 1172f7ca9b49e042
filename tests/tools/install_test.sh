#!/usr/bin/env bash
# install_test.sh - tests the installed package the way an outside user consumes it:
# `cmake --install` of the build tree into a temporary prefix; the headers, the shared
# and static libraries, tips.pc, the CMake package files and the `tips` tool are there;
# the shared library exports only `tips_*` symbols, each under the version node of
# cmake/libtips.map; the static library defines no global symbol outside `tips_*` (its
# internals are local); and a small outside program (version check first, (create a
# then create a pool, allocate into the root with tips_heap_alloc_to, close, reopen,
# verify, check)
# builds and runs (a) with pkg-config against the shared library, (b) in a CMake project
# with find_package(tips) against tips::tips and against tips::tips_static.
#
# usage: install_test.sh BUILD_DIR SOURCE_DIR CMAKE CC PKG_CONFIG NM config=CONFIG sanitize=SAN
set -euo pipefail

if [[ $# -ne 8 || $7 != config=* || $8 != sanitize=* ]]; then
	echo "usage: $0 BUILD_DIR SOURCE_DIR CMAKE CC PKG_CONFIG NM config=CONFIG sanitize=SAN" >&2
	exit 2
fi
BUILD_DIR=$1
SOURCE_DIR=$2
CMAKE=$3
CC=$4
PKG_CONFIG=$5
NM=$6
CONFIG=${7#config=}
SANITIZE=${8#sanitize=}
[[ -f $BUILD_DIR/cmake_install.cmake ]] || { echo "FAIL: $BUILD_DIR is not a configured build tree" >&2; exit 1; }
[[ -f $SOURCE_DIR/CMakeLists.txt ]] || { echo "FAIL: $SOURCE_DIR is not the source tree" >&2; exit 1; }

# An outside program built against a sanitized library needs the same runtime.
SAN_FLAGS=()
case $SANITIZE in
'') ;;
address) SAN_FLAGS=(-fsanitize=address,undefined) ;;
thread) SAN_FLAGS=(-fsanitize=thread) ;;
*) echo "FAIL: unknown sanitizer '$SANITIZE'" >&2; exit 1 ;;
esac

WORK=$(mktemp -d /tmp/tips-install-test.XXXXXX)
POOLS=$(mktemp -d /dev/shm/tips-install-test.XXXXXX)
cleanup() { rm -rf -- "$WORK" "$POOLS"; }
trap cleanup EXIT
PREFIX=$WORK/prefix
LOG=$WORK/log

failures=0
fail() {
	echo "FAIL: $*" >&2
	failures=$((failures + 1))
}
pass() { echo "ok: $*"; }
show_log() { sed 's/^/  | /' "$LOG" >&2; }
# step DESCRIPTION CMD...: runs CMD with its output in $LOG; on failure shows it.
step() {
	local what=$1 rc=0
	shift
	"$@" >"$LOG" 2>&1 || rc=$?
	if [[ $rc -eq 0 ]]; then
		pass "$what"
		return 0
	fi
	fail "$what (exit $rc): $*"
	show_log
	return 1
}

# ---- install -------------------------------------------------------------------------
INSTALL_ARGS=(--install "$BUILD_DIR" --prefix "$PREFIX")
[[ -n $CONFIG ]] && INSTALL_ARGS+=(--config "$CONFIG")
step "cmake --install into $PREFIX" "$CMAKE" "${INSTALL_ARGS[@]}" || exit 1

shopt -s nullglob
libdirs=("$PREFIX"/lib*/)
shopt -u nullglob
libdir=
for d in "${libdirs[@]}"; do
	[[ -e $d/libtips.so ]] && libdir=${d%/}
done
[[ -n $libdir ]] || { fail "no $PREFIX/lib*/libtips.so"; find "$PREFIX" >&2; exit 1; }
echo "library directory: $libdir"

expect_file() {
	if [[ -f $1 ]]; then pass "installed: ${1#"$PREFIX"/}"; else fail "missing: $1"; fi
}
for h in tips.h plugin.h base.h pool.h heap.h errors.h version.h listdb.h batch.h; do
	expect_file "$PREFIX/include/tips/$h"
done
expect_file "$PREFIX/include/libtips.h"
expect_file "$libdir/libtips.a"
expect_file "$libdir/pkgconfig/tips.pc"
expect_file "$libdir/cmake/tips/tipsConfig.cmake"
expect_file "$libdir/cmake/tips/tipsConfigVersion.cmake"
expect_file "$libdir/cmake/tips/tipsTargets.cmake"
expect_file "$PREFIX/bin/tips"
expect_file "$PREFIX/bin/tips-server"
# libtips.so -> libtips.so.0 -> libtips.so.<version>, and the SONAME is libtips.so.0.
[[ -L $libdir/libtips.so && -e $libdir/libtips.so.0 ]] && pass "installed: libtips.so -> libtips.so.0" ||
	fail "libtips.so / libtips.so.0 symlinks missing"
soname=$(LC_ALL=C readelf -d "$libdir/libtips.so" | sed -nE 's/.*\(SONAME\).*\[(.*)\]/\1/p')
[[ $soname == libtips.so.0 ]] && pass "SONAME $soname" || fail "SONAME is '$soname', expected libtips.so.0"
step "installed tips --help runs" "$PREFIX/bin/tips" --help || true
step "installed tips-server --version runs" "$PREFIX/bin/tips-server" --version || true
# Nothing installed may point back into the build or source tree.
if grep -rlF -e "$BUILD_DIR" -e "$SOURCE_DIR" "$PREFIX/include" "$libdir/pkgconfig" "$libdir/cmake" >"$LOG" 2>/dev/null; then
	fail "installed files refer to the build or source tree:"
	show_log
else
	pass "installed text files do not refer to the build or source tree"
fi

# ---- exported symbols ------------------------------------------------------------------
# nm -D prints versioned names as NAME@@NODE; the node itself is an absolute symbol (A).
"$NM" -D --defined-only "$libdir/libtips.so" >"$WORK/exports.raw"
awk 'NF >= 3 && $2 != "A" { sub(/@.*/, "", $3); print $3 }' "$WORK/exports.raw" | sort -u >"$WORK/exports"
version_node=$(awk 'NF >= 3 && $2 == "A" { print $3 }' "$WORK/exports.raw" | sort -u | tr '\n' ' ')
unversioned=$(awk 'NF >= 3 && $2 != "A" && $3 !~ /@@TIPS_/ { print $3 }' "$WORK/exports.raw")
[[ $version_node == "TIPS_"*" " && -z $unversioned ]] &&
	pass "libtips.so exports every symbol under version node ${version_node% }" ||
	fail "libtips.so version nodes '${version_node}', unversioned exports: ${unversioned:0:200}"
offenders=$(grep -v '^tips_' "$WORK/exports" || true)
if [[ -n $offenders ]]; then
	fail "libtips.so exports symbols outside the tips_ namespace:"
	sed 's/^/  | /' <<<"$offenders" >&2
elif ! grep -q '^tips_pool_create$' "$WORK/exports"; then
	fail "libtips.so does not export tips_pool_create"
else
	pass "libtips.so exports only tips_* symbols ($(wc -l <"$WORK/exports"))"
fi
# libtips.a: every global symbol it defines is tips_* (the internals were localized).
"$NM" -g --defined-only "$libdir/libtips.a" 2>/dev/null | awk 'NF >= 3 { print $3 }' | sort -u >"$WORK/static_globals"
offenders=$(grep -v '^tips_' "$WORK/static_globals" || true)
if [[ -n $offenders ]]; then
	fail "libtips.a defines $(wc -l <<<"$offenders") global symbols outside the tips_ namespace:"
	head -20 <<<"$offenders" | sed 's/^/  | /' >&2
elif ! grep -q '^tips_pool_create$' "$WORK/static_globals"; then
	fail "libtips.a does not define tips_pool_create"
else
	pass "libtips.a defines only tips_* global symbols ($(wc -l <"$WORK/static_globals"))"
fi
cmp -s "$WORK/exports" "$WORK/static_globals" &&
	pass "libtips.a and libtips.so offer the same tips_* symbols" ||
	fail "libtips.a and libtips.so differ: $(diff "$WORK/exports" "$WORK/static_globals" | grep '^[<>]' | head -5 | tr '\n' ' ')"
# No symbol is ever removed: every one that 0.3 exported is still there, under TIPS_0.3.
gone=
while read -r f; do
	[[ -z $f || $f == \#* ]] && continue
	grep -qxF "$f@@TIPS_0.3" <(awk 'NF >= 3 { print $3 }' "$WORK/exports.raw") || gone+=" $f"
done <"$SOURCE_DIR/tests/tools/abi_0.3.txt"
[[ -z $gone ]] && pass "every symbol of 0.3 is still exported under TIPS_0.3 (tests/tools/abi_0.3.txt)" ||
	fail "symbols of 0.3 missing or under another node:$gone"
# Each symbol a later node of cmake/libtips.map names is exported under that node.
misplaced=
while read -r f node; do
	grep -qxF "$f@@$node" <(awk 'NF >= 3 { print $3 }' "$WORK/exports.raw") || misplaced+=" $f@@$node"
done < <(awk '/^TIPS_[0-9.]+ \{/ { node = $1 } node != "TIPS_0.3" && $1 ~ /^tips_[a-z0-9_]+;$/ {
	sub(/;$/, "", $1); print $1, node }' "$SOURCE_DIR/cmake/libtips.map")
[[ -z $misplaced ]] && pass "the symbols named by later nodes of libtips.map are exported under them" ||
	fail "not exported as the version script says:$misplaced"
# Every TIPS_API function of the installed headers must be exported.
missing=
for f in $(sed -nE 's/^TIPS_API[^(]*[ *](tips_[a-z0-9_]+)\(.*/\1/p' "$PREFIX"/include/tips/*.h); do
	grep -qx "$f" "$WORK/exports" || missing+=" $f"
done
[[ -z $missing ]] && pass "every TIPS_API function is exported" || fail "declared but not exported:$missing"

# ---- headers are self-contained --------------------------------------------------------
for h in tips/tips.h tips/plugin.h tips/base.h tips/pool.h tips/heap.h tips/errors.h tips/version.h \
	tips/listdb.h tips/batch.h libtips.h; do
	printf '#include <%s>\nint main(void) { return 0; }\n' "$h" >"$WORK/hdr.c"
	step "<$h> compiles on its own (-std=c99 -Wall -Wextra -Werror)" \
		"$CC" -std=c99 -Wall -Wextra -Werror -I"$PREFIX/include" -c "$WORK/hdr.c" -o "$WORK/hdr.o" || true
done
# Headers by audience: an application's <tips/tips.h> does not declare the plug-in calls
# (they are valid only inside an index's callbacks), and <tips/listdb.h> does not pull
# in the TIPS framework; <libtips.h> declares everything.
audience() { # HEADER CALL: does a program including only HEADER see CALL declared?
	printf '#include <%s>\nvoid *f(void) { return (void *)&%s; }\n' "$1" "$2" >"$WORK/aud.c"
	"$CC" -std=c99 -Werror -I"$PREFIX/include" -c "$WORK/aud.c" -o "$WORK/aud.o" 2>/dev/null
}
split_ok=1
for pair in "tips/tips.h tips_alloc" "tips/tips.h tips_ulog_add" "tips/listdb.h tips_open"; do
	! audience $pair || { split_ok=0; fail "<${pair% *}> declares ${pair#* }"; }
done
for pair in "tips/plugin.h tips_alloc" "tips/tips.h tips_open" "tips/listdb.h tips_listdb_open" \
	"libtips.h tips_alloc" "libtips.h tips_listdb_get"; do
	audience $pair || { split_ok=0; fail "<${pair% *}> does not declare ${pair#* }"; }
done
[[ $split_ok == 1 ]] && pass "headers by audience: tips.h without the plug-in calls, listdb.h without the framework, libtips.h with all"

# ---- the outside program ---------------------------------------------------------------
cat >"$WORK/prog.c" <<'EOF'
/* prog.c - an outside user of libtips: pool create, allocate into the root, reopen. */
#include <stdio.h>
#include <string.h>
#include <tips/tips.h>

#define N 8
#define MAGIC 0x4c4c4154534e4955ull

struct root {
	uint64_t magic;
	uint64_t slot[N];
};

static int failed(const char *what, int rc)
{
	fprintf(stderr, "prog: %s: %d %s: %s\n", what, rc, tips_strerror(rc), tips_errormsg());
	return 1;
}

/* Global names that libtips uses inside (heap_open, recover, pm_flush): a program may
 * define its own, also when it links libtips.a statically. */
int heap_open(void);
int recover(void);
int pm_flush(void);
int heap_open(void) { return 1; }
int recover(void) { return 2; }
int pm_flush(void) { return 3; }

static int count_block(const struct tips_heap_block *b, void *arg)
{
	(void)b;
	++*(int *)arg;
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: prog POOL\n");
		return 2;
	}
	const char *path = argv[1];
	if (heap_open() + recover() + pm_flush() != 6)
		return failed("the program's own heap_open, recover, pm_flush", 0);
	int rc = TIPS_VERSION_CHECK();
	if (rc)
		return failed("version check", rc);
	if (strcmp(tips_version(NULL, NULL, NULL), TIPS_VERSION_STRING) != 0)
		return failed("tips_version() differs from the headers' TIPS_VERSION_STRING", 0);
	if (tips_version_check(TIPS_VERSION_MAJOR + 1, 0) != TIPS_EVERSION)
		return failed("tips_version_check accepted another major version", 0);
	struct tips_pool_options o;
	tips_pool_options_init(&o);
	o.size = 16ull << 20;
	struct tips_pool *pool;
	rc = tips_pool_create(path, &o, &pool);
	if (rc)
		return failed("create", rc);
	size_t root_size;
	struct root *root = tips_pool_root(pool, &root_size);
	if (!root || root_size < sizeof(*root) || root->magic != 0)
		return failed("root of a new pool", 0);
	for (int i = 0; i < N; i++) {
		size_t size = 24 + (size_t)i * 1000;
		rc = tips_heap_alloc_to(tips_pool_heap(pool), size, &root->slot[i]);
		if (rc)
			return failed("alloc_to", rc);
		if (!root->slot[i] || !tips_pool_contains(pool, (void *)root->slot[i], size))
			return failed("alloc_to left the slot outside the pool", 0);
		memset((void *)root->slot[i], 'a' + i, size);
		tips_persist((void *)root->slot[i], size);
	}
	root->magic = MAGIC;
	tips_persist(&root->magic, sizeof(root->magic));
	uint64_t addr = (uint64_t)(uintptr_t)root;
	if ((rc = tips_pool_close(&pool)) != 0 || pool != NULL)
		return failed("close", rc);

	struct tips_pool *again;
	if (tips_pool_create(path, &o, &again) != TIPS_EEXIST)
		return failed("create over an existing pool did not give TIPS_EEXIST", 0);
	if ((rc = tips_pool_open(path, NULL, &pool)) != 0)
		return failed("reopen", rc);
	root = tips_pool_root(pool, NULL);
	if ((uint64_t)(uintptr_t)root != addr || root->magic != MAGIC)
		return failed("root after reopen", 0);
	for (int i = 0; i < N; i++) {
		size_t size = 24 + (size_t)i * 1000;
		const unsigned char *p = (const unsigned char *)root->slot[i];
		if (!p || tips_heap_usable_size(tips_pool_heap(pool), p) < size)
			return failed("slot after reopen", i);
		for (size_t k = 0; k < size; k++)
			if (p[k] != (unsigned char)('a' + i))
				return failed("block contents after reopen", i);
	}
	int blocks = 0;
	tips_heap_walk(tips_pool_heap(pool), count_block, &blocks);
	struct tips_heap_report rep;
	rc = tips_heap_check(tips_pool_heap(pool), &rep);
	if (rc || rep.errors || blocks != N || rep.blocks_allocated != N)
		return failed("heap check after reopen", rc);
	if ((rc = tips_pool_close(&pool)) != 0)
		return failed("close after reopen", rc);
	printf("OK\n");
	return 0;
}
EOF

# run_prog DESCRIPTION ENV... -- EXE: runs EXE on a new pool; must print exactly OK.
run_prog() {
	local what=$1 pool
	shift
	pool=$POOLS/pool.$RANDOM$RANDOM
	if env "$@" "$pool" >"$LOG" 2>&1 && [[ $(cat "$LOG") == OK ]]; then
		pass "$what"
	else
		fail "$what"
		show_log
	fi
	rm -f -- "$pool"
}
# libtips_of [ENV...] ldd EXE: the path EXE's libtips.so.* resolves to ("" if none).
libtips_of() { env "$@" | awk '$1 ~ /^libtips\.so/ { print $3 }'; }

# (a) pkg-config, shared library.
export PKG_CONFIG_PATH=$libdir/pkgconfig
if step "pkg-config --exists tips" "$PKG_CONFIG" --exists tips; then
	pc_inc=$("$PKG_CONFIG" --variable=includedir tips)
	pc_lib=$("$PKG_CONFIG" --variable=libdir tips)
	[[ $pc_inc -ef $PREFIX/include ]] && pass "tips.pc includedir is the prefix's ($pc_inc)" ||
		fail "tips.pc includedir is '$pc_inc', not $PREFIX/include (installed with --prefix $PREFIX)"
	[[ $pc_lib -ef $libdir ]] && pass "tips.pc libdir is the prefix's ($pc_lib)" ||
		fail "tips.pc libdir is '$pc_lib', not $libdir"
	pc_cflags=$("$PKG_CONFIG" --cflags tips)
	pc_libs=$("$PKG_CONFIG" --libs tips)
	echo "pkg-config --cflags tips: $pc_cflags"
	echo "pkg-config --libs tips:   $pc_libs"
	# shellcheck disable=SC2086 # word splitting of pkg-config output is intended
	if step "build prog with pkg-config" \
		"$CC" "${SAN_FLAGS[@]}" $pc_cflags "$WORK/prog.c" -o "$WORK/prog_pc" $pc_libs; then
		run_prog "prog (pkg-config, shared) runs" LD_LIBRARY_PATH="$libdir" "$WORK/prog_pc"
		got=$(libtips_of LD_LIBRARY_PATH="$libdir" ldd "$WORK/prog_pc")
		[[ $got -ef $libdir/libtips.so.0 ]] && pass "prog_pc loads $got" ||
			fail "prog_pc loads libtips from '$got', not $libdir"
	fi
fi
unset PKG_CONFIG_PATH

# (b) find_package(tips) in a CMake project, shared and static.
mkdir -p "$WORK/proj"
cp "$WORK/prog.c" "$WORK/proj/prog.c"
cat >"$WORK/proj/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.20)
project(tips_consumer LANGUAGES C)
find_package(tips REQUIRED)
message(STATUS "tips_DIR=${tips_DIR} tips_VERSION=${tips_VERSION}")
foreach(t tips::tips tips::tips_static)
  if(NOT TARGET ${t})
    message(FATAL_ERROR "find_package(tips) did not define ${t}")
  endif()
endforeach()
add_executable(prog_shared prog.c)
target_link_libraries(prog_shared PRIVATE tips::tips)
add_executable(prog_static prog.c)
target_link_libraries(prog_static PRIVATE tips::tips_static)
if(SAN_FLAGS)
  target_compile_options(prog_shared PRIVATE ${SAN_FLAGS})
  target_compile_options(prog_static PRIVATE ${SAN_FLAGS})
  target_link_options(prog_shared PRIVATE ${SAN_FLAGS})
  target_link_options(prog_static PRIVATE ${SAN_FLAGS})
endif()
EOF
PROJ_BUILD=$WORK/proj/build
if step "configure the find_package(tips) project" "$CMAKE" -S "$WORK/proj" -B "$PROJ_BUILD" \
	-DCMAKE_PREFIX_PATH="$PREFIX" -DCMAKE_C_COMPILER="$CC" -DCMAKE_BUILD_TYPE=Release \
	"-DSAN_FLAGS=${SAN_FLAGS[*]:-}"; then
	found=$(sed -nE 's/^-- tips_DIR=(.*) tips_VERSION=.*/\1/p' "$LOG")
	[[ $found -ef $libdir/cmake/tips ]] && pass "find_package found $found" ||
		fail "find_package(tips) found '$found', not $libdir/cmake/tips"
	cm_version=$(sed -nE 's/^-- tips_DIR=.* tips_VERSION=(.*)/\1/p' "$LOG")
	pc_version=$(PKG_CONFIG_PATH=$libdir/pkgconfig "$PKG_CONFIG" --modversion tips 2>/dev/null || true)
	[[ -n $cm_version && $cm_version == "$pc_version" ]] &&
		pass "CMake package and tips.pc agree on version $cm_version" ||
		fail "versions differ: CMake package '$cm_version', tips.pc '$pc_version'"
	if step "build prog_shared and prog_static" "$CMAKE" --build "$PROJ_BUILD"; then
		run_prog "prog_shared (find_package, tips::tips) runs" "$PROJ_BUILD/prog_shared"
		got=$(libtips_of ldd "$PROJ_BUILD/prog_shared")
		[[ $got -ef $libdir/libtips.so.0 ]] && pass "prog_shared loads $got" ||
			fail "prog_shared loads libtips from '$got', not $libdir"
		run_prog "prog_static (find_package, tips::tips_static) runs" "$PROJ_BUILD/prog_static"
		got=$(libtips_of ldd "$PROJ_BUILD/prog_static")
		[[ -z $got ]] && pass "prog_static does not load libtips.so" ||
			fail "prog_static loads $got although it links tips::tips_static"
	fi
fi
# A version the package cannot satisfy must be refused.
mkdir -p "$WORK/proj2"
cat >"$WORK/proj2/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.20)
project(tips_too_new LANGUAGES C)
find_package(tips 99.0 REQUIRED)
EOF
if "$CMAKE" -S "$WORK/proj2" -B "$WORK/proj2/build" -DCMAKE_PREFIX_PATH="$PREFIX" \
	-DCMAKE_C_COMPILER="$CC" >"$LOG" 2>&1; then
	fail "find_package(tips 99.0 REQUIRED) succeeded"
else
	pass "find_package(tips 99.0 REQUIRED) is refused"
fi

if [[ $failures -ne 0 ]]; then
	echo "install_test: $failures failure(s)" >&2
	exit 1
fi
echo "install_test: all passed"
