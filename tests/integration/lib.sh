# Shared by the integration scripts: arguments, a private state dir, assertions, skip rules.
set -euo pipefail
EVALBOX=$1
export EVALBOX_HELPER=$2
SRC=$3
WORK=$(mktemp -d "${TMPDIR:-/tmp}/evalbox-it-XXXXXX")
export EVALBOX_STATE_DIR=$WORK/state
cleanup() {
  "$EVALBOX" gc >/dev/null 2>&1 || true
  # A test that killed evalbox leaves its mounts (the next user would reclaim them): take them
  # down too.
  while grep -q " $WORK/" /proc/self/mountinfo; do
    umount -l "$(grep " $WORK/" /proc/self/mountinfo | awk '{print $5}' | sort -r | head -1)" || break
  done
  [ -n "${KEEP_WORK:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# expect_exit CODE WHAT OUT ERR CMD...: runs CMD, its stdout to OUT and stderr to ERR, and fails
# (showing ERR) unless it exits CODE.
expect_exit() {
  local want=$1 what=$2 out=$3 err=$4 rc=0
  shift 4
  "$@" >"$out" 2>"$err" || rc=$?
  [ "$rc" = "$want" ] || { cat "$err" >&2; fail "$what: exit $rc, expected $want"; }
}
need_isolation() {
  if ! "$EVALBOX" doctor >/dev/null 2>&1 || [ "$(id -u)" != 0 ]; then
    [ "${EVALBOX_REQUIRE_ISOLATION:-}" = 1 ] && fail "the sandbox cannot run here (evalbox doctor)"
    echo "SKIP: needs root and a working sandbox (evalbox doctor)"; exit 0
  fi
}
lines() { [ -f "$1" ] && wc -l < "$1" | tr -d ' ' || echo 0; }
no_residue() {
  # Nothing stays mounted once evalbox is done, not even the runs tmpfs (docs/state.md).
  if grep -q " $EVALBOX_STATE_DIR/" /proc/self/mountinfo; then
    grep " $EVALBOX_STATE_DIR/" /proc/self/mountinfo >&2; fail "mounts left under the state dir"
  fi
  local left; left=$(find "$EVALBOX_STATE_DIR/runs" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
  if [ "$left" != 0 ]; then
    ls -la "$EVALBOX_STATE_DIR/runs" >&2
    for f in "$WORK"/err*; do [ -f "$f" ] && tail -5 "$f" >&2; done
    fail "$left run directories left in the state dir"
  fi
  # No cgroup of a recorded run's sandbox session is left.
  if [ -f "${R:-/nonexistent}/results.jsonl" ]; then
    # A torn line (a crash mid-append) is no record: skipped, as evalbox's readers skip it.
    for sid in $(python3 -c '
import json, sys
for line in open(sys.argv[1], "rb"):
    try:
        print(json.loads(line)["execution"]["session"] or "")
    except ValueError:
        pass' "$R/results.jsonl"); do
      for c in memory pids; do
        for d in "/sys/fs/cgroup/$c/evalbox/$sid" "/sys/fs/cgroup/$c/evalbox/$sid"@*; do
          [ -e "$d" ] && fail "cgroup $d of session $sid left"
        done
      done
    done
  fi
  return 0
}
# regrade_reproduces RESULTS [EXTRA-ARGS...]: `evalbox regrade RESULTS --all` grades every
# recorded run again from its kept final state (docs/results.md, "Grading again") and every
# verdict comes out as the run's own grading had it.
regrade_reproduces() {
  local r=$1
  shift
  local newest='
import json, sys
newest = {}
for line in open(sys.argv[1]):
    rec = json.loads(line)
    newest[rec["run_id"]] = rec
for rec in sorted(newest.values(), key=lambda x: x["run_id"]):
    if sys.argv[2] == "after":
        assert "regraded" in rec or rec["execution"]["status"] != "completed", rec["run_id"]
    print(rec["run_id"], rec["fixture"]["id"], rec["candidate"]["id"], rec["verdict"])'
  python3 -c "$newest" "$r/results.jsonl" before >"$WORK/verdicts-before"
  "$EVALBOX" regrade "$r" --all "$@" >"$WORK/regrade.out" 2>"$WORK/regrade.err" ||
    { cat "$WORK/regrade.err" >&2; fail "regrade --all of $r"; }
  ! grep -q "not runs of the suite as it is now" "$WORK/regrade.err" ||
    { cat "$WORK/regrade.err" >&2; fail "regrade --all of $r planned other run ids than the run"; }
  grep -q "(0 verdict(s) changed)" "$WORK/regrade.err" ||
    { cat "$WORK/regrade.err" >&2; fail "regrade --all of $r changed verdicts"; }
  python3 -c "$newest" "$r/results.jsonl" after >"$WORK/verdicts-after" ||
    fail "a run of $r was not graded again"
  diff "$WORK/verdicts-before" "$WORK/verdicts-after" >&2 || fail "regrade --all of $r: verdicts differ"
}
