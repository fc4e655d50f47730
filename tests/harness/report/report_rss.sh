#!/bin/bash
# The peak RSS of `evalbox report` grows with the runs by a small index entry only: from 100
# to 2,000 runs it may grow by less than 1.5 KiB per run (measured about 0.9 KiB: the index
# and its allocator's slack; holding the parsed records would be about 16 KB per run, and the
# reports were 2.5 times larger at 2,000 runs than at 100 before they were written from an
# index). A bound per run, not a ratio of the two peaks: the ratio moves with the binary's
# fixed footprint (linking evalbox statically took 1.1 MB off both peaks). No timing involved.
# usage: report_rss.sh EVALBOX SOURCE_DIR
set -euo pipefail
evalbox=$1 src=$2
gen=$src/tests/harness/report/make_results.py
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# 4 candidates × fixtures × 1 trial, a diff and a transcript per run, ~2% errors.
python3 "$gen" "$work/small" --fixtures 25 --trials 1 --seed 3 >/dev/null
python3 "$gen" "$work/large" --fixtures 500 --trials 1 --seed 3 >/dev/null

# GNU time measures the child alone: its maximum RSS is evalbox's own peak (VmHWM). A parent
# in Python would not do: a child's peak includes the RSS it had before exec.
skip() {
  if [ "${EVALBOX_REQUIRE_ISOLATION:-0}" = 1 ]; then
    echo "FAIL: $1 (EVALBOX_REQUIRE_ISOLATION=1: this test may not skip)" >&2
    exit 1
  fi
  echo "SKIP: $1" >&2
  exit 77
}
if [ ! -x /usr/bin/time ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "installing Debian's time (apt-get)..." >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends time \
    >"$work/apt.log" 2>&1 || { tail -5 "$work/apt.log" >&2; true; }
fi
[ -x /usr/bin/time ] || skip "GNU time (/usr/bin/time) is not installed"

peak_kb() {
  /usr/bin/time -f %M -o "$work/rss" "$evalbox" report "$1" --baseline baseline >/dev/null ||
    { echo "FAIL: evalbox report $1 exited $?" >&2; exit 1; }
  cat "$work/rss"
}

small=$(peak_kb "$work/small")
large=$(peak_kb "$work/large")
echo "evalbox report peak RSS: ${small} KB at 100 runs, ${large} KB at 2000 runs"
for f in summary.json report.md report.html junit.xml; do
  [ -s "$work/large/$f" ] || { echo "FAIL: $f not written" >&2; exit 1; }
done
per_run=$(((large - small) * 1024 / 1900))
echo "growth: $per_run bytes per run"
if [ "$per_run" -gt 1536 ]; then
  echo "FAIL: the peak grew by $per_run bytes per run from 100 to 2000 runs (at most 1536)" >&2
  exit 1
fi
echo ok
