#!/usr/bin/env bash
# bench/report.py (scripts/bench's table): a suite none of whose benchmarks matched the filter
# (`scripts/bench --filter scaling` leaves cycle_bench.json empty) is absent from the report, and
# the suites that ran are reported with their ratio to the floor.
set -euo pipefail
src=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
: > "$tmp/cycle_bench.json"
cat > "$tmp/prepare_bench.json" <<'JSON'
{"benchmarks": [
  {"name": "floor/fork_exec_true/real_time", "run_name": "floor/fork_exec_true/real_time",
   "real_time": 0.5, "time_unit": "ms"},
  {"name": "prepare/overlay/small/real_time", "run_name": "prepare/overlay/small/real_time",
   "real_time": 1.0, "time_unit": "ms"}
]}
JSON
report=$(python3 "$src/bench/report.py" "$tmp/cycle_bench.json" "$tmp/prepare_bench.json")
fail() { echo "FAIL: $*"; echo "$report"; exit 1; }
grep -q '| `prepare/overlay/small` | 1.00 | 2.0 |' <<<"$report" || fail "the suite that ran"
grep -q 'cycle/' <<<"$report" && fail "a row of the empty suite"
# Nothing matched at all: an empty report, not a crash.
python3 "$src/bench/report.py" "$tmp/cycle_bench.json" > /dev/null || fail "only empty suites"
echo "ok"
