#!/usr/bin/env bash
# bench/report.py (scripts/bench's table): a suite none of whose benchmarks matched the filter
# (`scripts/bench --filter scaling` leaves cycle_bench.json empty) is absent from the report, and
# the suites that ran are reported with their ratio to the floor; the scaling rounds with the
# machine's busy cores, with a warm helper and with one started per launch; the paired targets.
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
# The scaling rounds: runs/s, CPU per run and the machine's busy cores per concurrency, and the
# bound that concurrency 1's busy cores put on the speed-up.
cat > "$tmp/harness_bench.json" <<'JSON'
{"benchmarks": [
  {"name": "harness/scaling/runs:200/rounds:3/iterations:1/manual_time",
   "run_name": "harness/scaling/runs:200/rounds:3/iterations:1/manual_time",
   "real_time": 9000, "time_unit": "ms", "load_before": 1.0, "load_after": 2.0,
   "c1_runs_per_s": 80.0, "c1_cpu_ms_per_run": 12.0, "c1_cores_busy": 1.04,
   "c2_runs_per_s": 104.0, "c2_cpu_ms_per_run": 12.5, "c2_cores_busy": 1.47, "c2_speedup": 1.3,
   "c4_runs_per_s": 112.0, "c4_cpu_ms_per_run": 13.0, "c4_cores_busy": 1.69, "c4_speedup": 1.4,
   "speedup_ceiling": 1.92,
   "floor_spin_c1_per_s": 2400.0, "floor_spin_c1_cores_busy": 1.01,
   "floor_spin_c2_speedup": 1.95, "floor_spin_c2_cores_busy": 1.9, "floor_spin_c4_speedup": 1.9,
   "floor_spawn_true_c1_per_s": 550.0, "floor_spawn_true_c1_cores_busy": 1.0,
   "floor_spawn_true_c2_speedup": 1.09, "floor_spawn_true_c2_cores_busy": 1.98,
   "floor_spawn_true_c4_speedup": 1.08,
   "floor_unshare_c1_per_s": 138.0, "floor_unshare_c1_cores_busy": 1.0,
   "floor_unshare_c2_speedup": 1.2, "floor_unshare_c2_cores_busy": 1.87,
   "floor_unshare_c4_speedup": 1.26},
  {"name": "harness/scaling_cold_helper/runs:200/rounds:3/iterations:1/manual_time",
   "run_name": "harness/scaling_cold_helper/runs:200/rounds:3/iterations:1/manual_time",
   "real_time": 9500, "time_unit": "ms", "load_before": 2.0, "load_after": 2.0,
   "c1_runs_per_s": 70.0, "c1_cpu_ms_per_run": 11.0, "c1_cores_busy": 0.98,
   "c2_runs_per_s": 105.0, "c2_cpu_ms_per_run": 11.5, "c2_cores_busy": 1.45, "c2_speedup": 1.5,
   "speedup_ceiling": 2.04}
]}
JSON
report=$(python3 "$src/bench/report.py" "$tmp/harness_bench.json")
grep -q '| 2 | 104.0 | 1.30 | 12.50 | 1.47 |' <<<"$report" || fail "the scaling row of concurrency 2"
# The same rounds with a helper started per launch: a table of their own, after the warm one's;
# the target's line stays the warm helper's.
cold=$(sed -n '/a helper started per launch/,$p' <<<"$report")
grep -q '| 2 | 105.0 | 1.50 | 11.50 | 1.45 |' <<<"$cold" || fail "the cold helper's row"
grep -q '| 2 | 104.0 |' <<<"$cold" && fail "the warm rows under the cold heading"
grep -q 'at most 2.04×' <<<"$report" && fail "the cold rounds' bound taken for the target's"
grep -q 'at most 1.92× with concurrency 1' <<<"$report" || fail "the speed-up's bound"
# The machine's floors from the same rounds: a table of their own (not in the notes column),
# and the speed-up read against `unshare -Urmpn`'s (1.3 ÷ 1.2).
grep -q '| posix_spawn `/bin/true`, waited for | 550.0 | 1.09 | 1.08 | 1.00 / 1.98 |' <<<"$report" \
  || fail "the floors' table"
grep -q 'floor_spin' <<<"$report" && fail "the floors' counters in the notes"
grep -q "at concurrency 2 in the same rounds (1.20×; computing alone 1.95×, posix_spawn \`/bin/true\` 1.09×) | 1.08 | ≥ 1 | scales as the floor does |" \
  <<<"$report" || fail "the speed-up against the floor's"
grep -q 'floor, in the same rounds' <<<"$cold" && fail "the floors' table under the cold heading"
# The cycle's and the launch's targets are judged in pairs (each side's median and the median
# ratio of the pairs); the unpaired ratio is shown beside them with no verdict of its own.
cat > "$tmp/cycle_pairs.json" <<'JSON'
{"benchmarks": [
  {"name": "floor/unshare_Urmpn_true/real_time", "run_name": "floor/unshare_Urmpn_true/real_time",
   "real_time": 2.0, "time_unit": "ms"},
  {"name": "cycle/net_none/medium/real_time", "run_name": "cycle/net_none/medium/real_time",
   "real_time": 4.6, "time_unit": "ms"},
  {"name": "cycle/net_none/medium/against_unshare/manual_time_median",
   "run_name": "cycle/net_none/medium/against_unshare/manual_time", "aggregate_name": "median",
   "real_time": 6.1, "time_unit": "ms", "evalbox_ms": 5.9, "unshare_ms": 3.5, "ratio": 1.68},
  {"name": "launch/agent/against_bwrap/manual_time_median",
   "run_name": "launch/agent/against_bwrap/manual_time", "aggregate_name": "median",
   "real_time": 5.6, "time_unit": "ms", "evalbox_ms": 5.6, "bwrap_agent_ms": 6.8, "ratio": 0.82}
]}
JSON
report=$(python3 "$src/bench/report.py" "$tmp/cycle_pairs.json")
grep -q 'unshare -Urmpn`, in pairs (5.90 against 3.50 ms) | 1.68 | ≤ 2 | met |' <<<"$report" \
  || fail "the cycle's paired target"
grep -q '| full cycle (medium) ÷ `unshare -Urmpn`, unpaired medians | 2.30 | — | judged in pairs' \
  <<<"$report" || fail "the unpaired ratio beside it"
grep -q 'in pairs (5.60 against 6.80 ms) | 0.82 | ≤ 0.8 | MISSED |' <<<"$report" \
  || fail "the launch's paired target"
# Nothing matched at all: an empty report, not a crash.
python3 "$src/bench/report.py" "$tmp/cycle_bench.json" > /dev/null || fail "only empty suites"
echo "ok"
