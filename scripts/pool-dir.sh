#!/usr/bin/env bash
# pool-dir.sh - print the directory benchmarks should put their emulated-PM pools in.
#
# Real PM is mapped through a DAX file system with 2 MiB pages; a tmpfs file is mapped
# with 4 KiB pages unless its mount says huge=. The dram-* twins the tips-* indexes are
# compared with put their big arrays on 2 MiB pages (src/util/hugepage.h), so on
# /dev/shm a tips-* lookup pays a page walk its twin does not (docs/bench.md, "Pool
# directory"). This script therefore prints TIPS_PM_DIR (default /mnt/tips-pm) when it
# is a tmpfs mounted huge=always, mounting it first if it is not mounted and root (or
# password-less sudo) may (size=100% of RAM, as /dev/shm has here: a pool sized for
# 100M inserts reserves 16 GB); otherwise it prints /dev/shm, and says why on stderr.
# Usage: export TIPS_BENCH_POOL_DIR=$(scripts/pool-dir.sh)
set -euo pipefail
dir=${TIPS_PM_DIR:-/mnt/tips-pm}

# The topmost mount at $1 (the last line of /proc/mounts for it) is a huge=always tmpfs.
huge_tmpfs() { awk -v d="$1" '$2 == d { ok = ($3 == "tmpfs" && $4 ~ /huge=always/) } END { exit !ok }' /proc/mounts; }
# Something is mounted at $1.
mounted() { awk -v d="$1" '$2 == d { found = 1 } END { exit !found }' /proc/mounts; }

if huge_tmpfs "$dir"; then
	echo "$dir"
	exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
	if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo="sudo -n"; else
		echo "pool-dir: $dir is not a huge-page tmpfs and mounting one needs root: pools in /dev/shm (4 KiB pages)" >&2
		echo /dev/shm
		exit 0
	fi
fi
if ! mounted "$dir" && $sudo mkdir -p "$dir" &&
	$sudo mount -t tmpfs -o huge=always,size=100%,mode=1777 tips-pm "$dir" 2>/dev/null && huge_tmpfs "$dir"; then
	echo "pool-dir: mounted $dir (tmpfs, huge=always)" >&2
	echo "$dir"
	exit 0
fi
echo "pool-dir: could not mount a huge-page tmpfs at $dir: pools in /dev/shm (4 KiB pages)" >&2
echo /dev/shm
