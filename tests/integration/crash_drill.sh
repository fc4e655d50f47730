# The crash drill (docs/reliability.md): `evalbox run` of the example suite (24 trials, 576
# runs, concurrency 2) killed with SIGKILL at random moments, over and over; in every third
# round results.jsonl is also cut inside its last line, as a crash mid-append would leave it.
# Each round resumes from what the last one recorded. Then one run to the end, and
# `evalbox gc`:
#  - every planned run is recorded exactly once, and no partial line is ever read as a record;
#  - no mount, run directory, cgroup or sandbox process is left.
# A runner that finishes the plan before its kill point (a fast machine) completes a campaign:
# it is checked like the last run, and the next round starts a new one in a fresh results
# directory, so that every one of the kills lands on work.
# EVALBOX_DRILL_ROUNDS (kills that must land on a running evalbox, default 24) and
# EVALBOX_DRILL_SEED (default: from the clock) repeat it.
source "$(dirname "$0")/lib.sh"
need_isolation
ROUNDS=${EVALBOX_DRILL_ROUNDS:-24}
SEED=${EVALBOX_DRILL_SEED:-$(date +%s)}
RANDOM=$SEED
echo "crash drill: $ROUNDS kills, seed $SEED"
SUITE=$SRC/fixtures/examples/suite.yaml
PLANNED=576
campaign=1
R=$WORK/results-$campaign
run_args() { printf '%s\0' "$SUITE" --results "$R" --trials 24 -j 2 --retries 0; }

# Whole records in results.jsonl, by run id, and the lines that are not records (torn).
count() {
  python3 - "$R/results.jsonl" <<'PY'
import collections, json, os, sys
p = sys.argv[1]
ids, torn = collections.Counter(), 0
if os.path.exists(p):
    for line in open(p, "rb").read().split(b"\n"):
        if not line:
            continue
        try:
            r = json.loads(line)
            assert r["schema"] == "evalbox.run.v1"
            ids[r["run_id"]] += 1
        except Exception:
            torn += 1
print(len(ids), sum(v - 1 for v in ids.values()), torn)
PY
}

# check_campaign RC ERR: the runner that ended the campaign in $R exited RC (stderr in ERR): every
# planned run recorded once, the torn lines only those cut, and the reports count each run once.
check_campaign() {
  local rc=$1 err=$2 recorded dups torn
  # The example suite's scripted agent fails some fixtures: 1; anything else is a failure here.
  [ "$rc" = 1 ] || { tail -20 "$err"; fail "campaign $campaign: the last run exited $rc"; }
  read -r recorded dups torn < <(count)
  [ "$recorded" = "$PLANNED" ] || fail "campaign $campaign: $recorded of $PLANNED planned runs recorded"
  [ "$dups" = 0 ] || fail "campaign $campaign: $dups runs recorded twice"
  [ "$torn" -le "$cuts" ] || fail "campaign $campaign: $torn torn lines for $cuts cuts"
  # The reports read results.jsonl as the runner does: every planned run, the torn lines skipped.
  python3 - "$R/summary.json" "$PLANNED" <<'PY' || fail "summary.json does not count every run once"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["runs"]["total"] == int(sys.argv[2]), s["runs"]
PY
}

kills=0 cuts=0 round=0
while [ "$kills" -lt "$ROUNDS" ]; do
  round=$((round + 1))
  [ "$round" -le $((3 * ROUNDS)) ] || fail "only $kills of $ROUNDS kills landed in $round rounds"
  # A kill point from 50 ms to 2.5 s after the start: during start-up and reclaim,
  # preparation, agents, grading and recording (a run takes 0.1-2 s here).
  delay_ms=$((50 + RANDOM % 2450))
  mapfile -d '' args < <(run_args)
  "$EVALBOX" run "${args[@]}" >/dev/null 2>"$WORK/err-round" &
  pid=$!
  sleep "$(printf '%d.%03d' $((delay_ms / 1000)) $((delay_ms % 1000)))"
  if kill -9 "$pid" 2>/dev/null; then
    kills=$((kills + 1))
    wait "$pid" 2>/dev/null || true
  else
    # A runner that already finished is no kill: it ended its campaign; the next starts afresh.
    rc=0
    wait "$pid" || rc=$?
    check_campaign "$rc" "$WORK/err-round"
    echo "round $round: campaign $campaign complete before its kill point (${delay_ms} ms)"
    campaign=$((campaign + 1)) cuts=0
    R=$WORK/results-$campaign
    continue
  fi
  cat "$WORK/err-round" >>"$WORK/err-rounds"
  # Every third round: cut the file inside its last line, as a crash mid-append would.
  if [ $((round % 3)) = 0 ] && [ -s "$R/results.jsonl" ]; then
    size=$(stat -c %s "$R/results.jsonl")
    last=$(tail -n 1 "$R/results.jsonl" | wc -c)
    if [ "$last" -gt 1 ]; then
      cut=$((1 + RANDOM % (last - 1)))
      truncate -s $((size - cut)) "$R/results.jsonl"
      cuts=$((cuts + 1))
    fi
  fi
  # The killed runner's sessions (run directories, named like their cgroups), to check at the
  # end that none of their cgroups is left; the next round reclaims them.
  ls "$EVALBOX_STATE_DIR/runs" 2>/dev/null | grep -v '^\.new-' >> "$WORK/sessions" || true
  read -r recorded dups torn < <(count)
  echo "round $round: killed after ${delay_ms} ms: $recorded recorded, $torn torn line(s)"
  [ "$dups" = 0 ] || fail "round $round: $dups runs recorded twice"
done

# The last round runs to its end.
mapfile -d '' args < <(run_args)
rc=0
"$EVALBOX" run "${args[@]}" >/dev/null 2>"$WORK/err-final" || rc=$?
check_campaign "$rc" "$WORK/err-final"

"$EVALBOX" gc >/dev/null 2>"$WORK/err-gc" || { cat "$WORK/err-gc"; fail "evalbox gc failed"; }
# No sandbox process of this state root is left (helpers of killed runners included).
for _ in $(seq 1 100); do
  pgrep -f -- "--plan $EVALBOX_STATE_DIR/" >/dev/null || break
  sleep 0.1
done
if pgrep -fa -- "--plan $EVALBOX_STATE_DIR/"; then fail "sandbox processes left"; fi
# Mounts, run directories, and the cgroups of every campaign's recorded sessions.
for R in "$WORK"/results-*; do no_residue; done
# No cgroup of a killed runner's session is left (no_residue checks the recorded ones).
sessions=$(sort -u "$WORK/sessions" 2>/dev/null | wc -l)
for sid in $(sort -u "$WORK/sessions" 2>/dev/null); do
  for c in memory pids cpuacct; do
    # One level (<sid>@<launch>), and the two-level <sid> directory of earlier versions.
    for d in "/sys/fs/cgroup/$c/evalbox/$sid" "/sys/fs/cgroup/$c/evalbox/$sid"@*; do
      [ ! -e "$d" ] || fail "cgroup $d left"
    done
  done
done
echo "crash drill: $sessions sessions of killed runners checked for cgroups"
echo "crash drill: ok ($round rounds, $kills kills, $campaign campaign(s), seed $SEED)"
