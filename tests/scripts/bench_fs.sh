#!/usr/bin/env bash
# scripts/bench-fs, which scripts/bench's report names the benchmarks' filesystem with: an ext4
# with a journal, one without (whose recently freed inodes tax every file created), a tmpfs, and
# a directory below a mount point. Needs root and loop devices (skips, 77, without them).
set -euo pipefail
src=$1
if [ "$(id -u)" -ne 0 ] || ! losetup -f > /dev/null 2>&1 || ! command -v mkfs.ext4 > /dev/null; then
  echo "skip: needs root, a free loop device and mkfs.ext4"
  exit 77
fi
tmp=$(mktemp -d)
cleanup() {
  for m in "$tmp"/journal "$tmp"/nojournal "$tmp"/tmpfs; do
    mountpoint -q "$m" && umount "$m"
  done
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
mkdir "$tmp"/journal "$tmp"/nojournal "$tmp"/tmpfs
truncate -s 16M "$tmp"/journal.img "$tmp"/nojournal.img
mkfs.ext4 -q -F "$tmp"/journal.img
mkfs.ext4 -q -F -O ^has_journal "$tmp"/nojournal.img
mount -o loop "$tmp"/journal.img "$tmp"/journal
mount -o loop "$tmp"/nojournal.img "$tmp"/nojournal
mount -t tmpfs -o size=1M evalbox-test "$tmp"/tmpfs
mkdir -p "$tmp"/nojournal/below/deeper
got=$("$src"/scripts/bench-fs "$tmp"/journal); [ "$got" = ext4 ] || fail "journaled ext4: $got"
got=$("$src"/scripts/bench-fs "$tmp"/nojournal)
[ "$got" = "ext4 without a journal" ] || fail "ext4 without a journal: $got"
got=$("$src"/scripts/bench-fs "$tmp"/nojournal/below/deeper)
[ "$got" = "ext4 without a journal" ] || fail "a directory below the mount point: $got"
got=$("$src"/scripts/bench-fs "$tmp"/tmpfs); [ "$got" = tmpfs ] || fail "tmpfs: $got"
# A wrong call is a usage error, on stderr, not a filesystem name.
set +e
out=$("$src"/scripts/bench-fs 2> /dev/null); rc=$?
set -e
[ $rc -eq 64 ] && [ -z "$out" ] || fail "no argument: rc $rc, stdout '$out'"
echo "ok"
