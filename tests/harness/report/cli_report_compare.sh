#!/bin/bash
# `evalbox report` and `evalbox compare` from the command line, on generated results
# directories (no sandbox needed): which files are written, where the baseline comes from,
# verdicts and exit codes.
# usage: cli_report_compare.sh EVALBOX SOURCE_DIR
set -euo pipefail
evalbox=$1 src=$2
gen=$src/tests/harness/report/make_results.py
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

python3 "$gen" "$work/a" --fixtures 80 --trials 2 --seed 1 --files some
python3 "$gen" "$work/b" --fixtures 80 --trials 2 --seed 2 --files some

# Every report, from results.jsonl alone.
"$evalbox" report "$work/a" --baseline baseline >"$work/out" || fail "report exited $?"
for f in summary.json report.md report.html junit.xml; do
  [ -s "$work/a/$f" ] || fail "$f not written"
done
grep -q "tuned vs baseline: better" "$work/out" || { cat "$work/out"; fail "no verdict line"; }

# One format only; the baseline comes back from summary.json.
rm "$work/a/report.md" "$work/a/junit.xml"
"$evalbox" report "$work/a" --format md >/dev/null || fail "report --format md"
[ -s "$work/a/report.md" ] || fail "report.md not rewritten"
[ ! -e "$work/a/junit.xml" ] || fail "--format md wrote junit.xml"
grep -q "## Paired comparison" "$work/a/report.md" || fail "baseline not taken from summary.json"
"$evalbox" report "$work/a" --format md --no-baseline >/dev/null
! grep -q "## Paired comparison" "$work/a/report.md" || fail "--no-baseline still compared"

# Within one directory, as JSON.
"$evalbox" compare "$work/a" --candidate tuned --baseline baseline --json >"$work/c.json"
python3 - "$work/c.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
assert c["schema"] == "evalbox.compare.v1", c["schema"]
(p,) = c["comparisons"]
assert (p["candidate"], p["baseline"], p["n"]) == ("tuned", "baseline", 80), p
assert p["verdict"] == "better", p["verdict"]
assert len(p["differences"]) == 80
PY

# Across directories: every shared candidate id, B's against A's; same generator, so the
# oracle's 100% vs 100% is no detectable difference.
"$evalbox" compare "$work/a" "$work/b" >"$work/ab" || fail "compare A B exited $?"
for c in baseline oracle tuned; do
  grep -q "^$c ($work/b) vs $c ($work/a): " "$work/ab" || { cat "$work/ab"; fail "no $c line"; }
done
grep -q "^oracle ($work/b) vs oracle ($work/a): no detectable difference at this n" "$work/ab" \
  || fail "oracle vs oracle"
# tuned in B against baseline in A
"$evalbox" compare "$work/a" "$work/b" --candidate tuned --baseline baseline >"$work/x"
grep -q "^tuned ($work/b) vs baseline ($work/a): better" "$work/x" || { cat "$work/x"; fail "cross"; }

# Usage errors exit 64.
set +e
"$evalbox" compare "$work/a" >/dev/null 2>&1; [ $? = 64 ] || fail "one directory without names"
"$evalbox" compare "$work/a" --candidate nobody --baseline baseline >/dev/null 2>&1
[ $? = 64 ] || fail "unknown candidate"
"$evalbox" report "$work/none" >/dev/null 2>&1; [ $? = 64 ] || fail "missing directory"
"$evalbox" report "$work/a" --format pdf >/dev/null 2>&1; [ $? = 64 ] || fail "unknown format"
echo PASS
