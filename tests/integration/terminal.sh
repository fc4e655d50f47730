# The shell commands through a real terminal: tmux (on a private socket) runs them in a pane,
# the test types with send-keys and reads the screen with capture-pane. `sandbox shell` gets a
# pseudo-terminal of its own (tty, window size and its changes, vi, Ctrl-C, the exit status),
# the host terminal is the same afterwards on every way out (exit, the wall limit, the helper
# killed, evalbox terminated); `fixture shell` runs the setup, hides /grader and grades what was
# left; `run --keep-workspaces failed` keeps exactly the failed runs' workspaces and `runs shell`
# opens a copy of one.
source "$(dirname "$0")/lib.sh"
need_isolation
command -v tmux >/dev/null || fail "tmux is missing (scripts/bootstrap --tests installs it)"
command -v busybox >/dev/null || fail "busybox is missing (scripts/bootstrap --tests installs it)"

SOCK=$WORK/tmux.sock
T() { tmux -S "$SOCK" "$@"; }
stop_tmux() { T kill-server 2>/dev/null || true; cleanup; }
trap stop_tmux EXIT
screen() { T capture-pane -p -J -t t -S -300; }
# wait_for REGEX [SECONDS]: until the pane shows REGEX (bounded), else fail showing the pane.
wait_for() {
  local deadline=$((SECONDS + ${2:-30}))
  while [ $SECONDS -lt $deadline ]; do
    screen | grep -qE -- "$1" && return 0
    sleep 0.1
  done
  screen >&2
  fail "the terminal did not show /$1/ within ${2:-30}s"
}
# type TEXT: types TEXT and Enter.
type() { T send-keys -t t -l -- "$1"; T send-keys -t t Enter; }
# The shell in the pane and the window's size, as tmux sees it.
pane_size() { T display -p -t t '#{pane_height} #{pane_width}'; }

# A workspace, and a fixture with a setup, bin/, a grader and one check.
mkdir -p "$WORK/ws" "$WORK/fx/workspace" "$WORK/fx/bin" "$WORK/fx/grader"
echo hello > "$WORK/ws/file.txt"
echo "not yet" > "$WORK/fx/workspace/out.txt"
printf '#!/bin/sh\necho from-bin\n' > "$WORK/fx/bin/fixture-tool"
chmod +x "$WORK/fx/bin/fixture-tool"
echo 42 > "$WORK/fx/grader/answer"
cat > "$WORK/fx/fixture.yaml" <<'YAML'
schema: evalbox.fixture.v1
id: by-hand
prompt: Write the answer into out.txt.
setup: ["echo prepared > setup.txt"]
limits: {wall: 2m}
checks:
  - {id: answer, shell: "test \"$(cat out.txt)\" = \"$(cat /grader/answer)\""}
YAML

# The host shell in the pane: plain bash, a prompt to wait for, the test's environment.
T -f /dev/null new-session -d -s t -x 100 -y 30 "env PS1='host\$ ' bash --norc --noprofile"
T set-option -t t status off
wait_for 'host\$'
type "stty -a > $WORK/stty.before; echo SAVED-\$?"
wait_for 'SAVED-0'

# ---- sandbox shell: a terminal of its own ----
type "$EVALBOX sandbox shell --workspace $WORK/ws --wall 5m; echo SHELL-EXIT-\$?"
type "PS1='sbx> '; echo IN-\$?"
wait_for 'IN-0'
type 'tty; echo TTY-$?'
wait_for 'TTY-0'
screen | grep -qE '^/dev/pts/[0-9]+$' || { screen >&2; fail "tty did not print a /dev/pts path"; }
type 'test -c "$(tty)" && echo PTS-RESOLVES'
wait_for '^PTS-RESOLVES'
read -r rows cols <<<"$(pane_size)"
type 'echo SIZE=$(stty size)'
wait_for "^SIZE=$rows $cols\$"
T resize-window -t t -x 80 -y 20
read -r rows2 cols2 <<<"$(pane_size)"
[ "$rows2 $cols2" != "$rows $cols" ] || fail "tmux did not resize the window"
type 'echo RESIZED=$(stty size)'
wait_for "^RESIZED=$rows2 $cols2\$"
# A full-screen program: busybox vi opens (its status line names the file) and quits.
type 'busybox vi /tmp/notes.txt'
# vi's own status line ("- /tmp/notes.txt ..."), not the command line typed above: keys sent
# before vi has the terminal are lost.
wait_for '^- /tmp/notes\.txt'
# (a pause after Escape: an Escape followed at once by ':' would read as Alt-:)
T send-keys -t t Escape
sleep 0.5
T send-keys -t t -l ':q!'
T send-keys -t t Enter
type 'echo VI-$?'
wait_for '^VI-0'
# Ctrl-C interrupts the foreground job inside and the shell survives it.
type 'sleep 100'
sleep 0.5
T send-keys -t t C-c
type 'echo AFTER-SLEEP-$?'
wait_for '^AFTER-SLEEP-130' 10
# Job control: Ctrl-Z stops the job, fg brings it back, Ctrl-C ends it.
type 'sleep 100'
sleep 0.5
T send-keys -t t C-z
wait_for 'Stopped' 10
type 'fg'
sleep 0.5
T send-keys -t t C-c
type 'echo JOBS-DONE'
wait_for '^JOBS-DONE' 10
# The shell's exit status is evalbox's.
type 'exit 7'
wait_for '^SHELL-EXIT-7' 30
T resize-window -t t -x 100 -y 30  # the size it had when stty.before was taken
type "stty -a > $WORK/stty.after1; echo S1-\$?"
wait_for 'S1-0'
cmp -s "$WORK/stty.before" "$WORK/stty.after1" || fail "the host terminal changed after exit"

# The wall limit ends the session; the host terminal is as it was.
type "clear; $EVALBOX sandbox shell --workspace $WORK/ws --wall 3s; echo WALL-EXIT-\$?"
wait_for '^WALL-EXIT-124' 40
wait_for 'wall-time limit'
type "stty -a > $WORK/stty.after2; echo S2-\$?"
wait_for 'S2-0'
cmp -s "$WORK/stty.before" "$WORK/stty.after2" || fail "the host terminal changed after the wall limit"

# The sandbox's helper killed (SIGKILL): the session ends, the terminal is restored.
type "clear; $EVALBOX sandbox shell --workspace $WORK/ws --wall 5m; echo KILLED-EXIT-\$?"
type 'echo READY-TO-DIE'
wait_for '^READY-TO-DIE'
helper=$(ps -eo pid=,args= | awk -v h="$EVALBOX_HELPER" -v s="$EVALBOX_STATE_DIR" \
  'index($0, h) && index($0, s) {print $1; exit}')
[ -n "$helper" ] || fail "no helper process of this test found"
kill -KILL "$helper"
wait_for '^KILLED-EXIT-' 30
type "stty -a > $WORK/stty.after3; echo S3-\$?"
wait_for 'S3-0'
cmp -s "$WORK/stty.before" "$WORK/stty.after3" || fail "the host terminal changed after SIGKILL"

# evalbox itself terminated (SIGTERM): the run is cancelled and the terminal restored.
type "clear; $EVALBOX sandbox shell --workspace $WORK/ws --wall 5m; echo TERM-EXIT-\$?"
type 'echo READY-FOR-TERM'
wait_for '^READY-FOR-TERM'
shell_pid=$(T display -p -t t '#{pane_pid}')
evalbox_pid=$(ps -o pid= --ppid "$shell_pid" | head -1 | tr -d ' ')
[ -n "$evalbox_pid" ] || fail "evalbox is not running in the pane"
kill -TERM "$evalbox_pid"
wait_for '^TERM-EXIT-' 30
type "stty -a > $WORK/stty.after4; echo S4-\$?"
wait_for 'S4-0'
cmp -s "$WORK/stty.before" "$WORK/stty.after4" || fail "the host terminal changed after SIGTERM"

# Without a terminal on stdin: the pipe behaviour of before.
out=$(echo 'echo piped-$((6*7)); tty' | "$EVALBOX" sandbox shell --workspace "$WORK/ws" 2>/dev/null || true)
grep -q '^piped-42$' <<<"$out" || fail "a piped shell did not run its input: $out"
grep -q 'not a tty' <<<"$out" || fail "a piped shell got a terminal: $out"

# ---- fixture shell: as the agent starts, then the grading ----
type "clear; $EVALBOX fixture shell $WORK/fx; echo FIXTURE-EXIT-\$?"
type "PS1='fx> '; cat setup.txt; fixture-tool; ls /grader; echo FX-\$?"
wait_for '^FX-[0-9]'
screen | grep -q '^prepared$' || { screen >&2; fail "the setup's file is not there"; }
screen | grep -q '^from-bin$' || { screen >&2; fail "bin/ is not on PATH"; }
screen | grep -q 'No such file or directory' || { screen >&2; fail "/grader is visible"; }
type 'echo 42 > out.txt; exit'
wait_for '^FIXTURE-EXIT-' 60
screen | grep -qE '^  pass  answer' || { screen >&2; fail "the check did not pass"; }
wait_for '^verdict: passed'
wait_for '^FIXTURE-EXIT-0'
# Leaving it unsolved: the verdict says so.
type "clear; $EVALBOX fixture shell $WORK/fx; echo UNSOLVED-EXIT-\$?"
type 'exit 0'
wait_for '^UNSOLVED-EXIT-1' 60
screen | grep -q '^verdict: failed' || { screen >&2; fail "an unsolved fixture did not fail"; }
# The workspace of the fixture itself was never written.
[ "$(cat "$WORK/fx/workspace/out.txt")" = "not yet" ] || fail "fixture shell wrote the fixture"

# ---- run --keep-workspaces failed, then runs shell ----
mkdir -p "$WORK/s/agents"
cat > "$WORK/s/agents/answer.sh" <<'SH'
#!/bin/sh
echo "$ANSWER" > out.txt
SH
chmod +x "$WORK/s/agents/answer.sh"
cat > "$WORK/s/suite.yaml" <<YAML
schema: evalbox.suite.v1
name: keep
fixtures: [$WORK/fx]
candidates:
  - {id: right, adapter: command, argv: [agents/answer.sh], env: {ANSWER: "42"}}
  - {id: wrong, adapter: command, argv: [agents/answer.sh], env: {ANSWER: "41"}}
YAML
R=$WORK/r
expect_exit 1 "run with a failing candidate" "$WORK/out" "$WORK/err" \
  "$EVALBOX" run "$WORK/s/suite.yaml" --results "$R" --keep-workspaces failed
read -r passed_id failed_id <<<"$(python3 - "$R" <<'PY'
import json, os, sys
root = sys.argv[1]
recs = {json.loads(l)["candidate"]["id"]: json.loads(l) for l in open(root + "/results.jsonl")}
ok, bad = recs["right"], recs["wrong"]
assert ok["verdict"] == "passed" and bad["verdict"] == "failed", (ok["verdict"], bad["verdict"])
assert "kept_workspace" not in ok, ok.get("kept_workspace")
k = bad["kept_workspace"]
assert k["path"] == "runs/%s/workspace" % bad["run_id"], k
assert os.path.isdir(os.path.join(root, k["path"])), k
assert not os.path.exists(os.path.join(root, "runs", ok["run_id"], "workspace"))
assert open(os.path.join(root, k["path"], "out.txt")).read() == "41\n"
assert open(os.path.join(root, k["path"], "setup.txt")).read() == "prepared\n"
print(ok["run_id"], bad["run_id"])
PY
)"
"$EVALBOX" gc --results "$R" | grep -q "kept workspaces: $R: 1 run(s)" || fail "gc does not count it"
# Clear errors: a run that kept nothing, and an unknown run.
expect_exit 64 "runs shell on a passed run" "$WORK/out" "$WORK/err" \
  "$EVALBOX" runs shell "$R" "$passed_id"
grep -q -- '--keep-workspaces' "$WORK/err" || fail "no hint at --keep-workspaces: $(cat "$WORK/err")"
expect_exit 64 "runs shell on an unknown run" "$WORK/out" "$WORK/err" \
  "$EVALBOX" runs shell "$R" 0000000000000000
grep -q 'no run 0000000000000000' "$WORK/err" || fail "unknown run: $(cat "$WORK/err")"
# The failed run, entered: its final state, the grader mounted, rerun by hand and fixed.
type "clear; $EVALBOX runs shell $R $failed_id; echo RUNS-EXIT-\$?"
type "PS1='run> '; cat out.txt; cat /grader/answer; echo RS-\$?"
wait_for '^RS-0'
screen | grep -q '^41$' || { screen >&2; fail "the kept workspace is not what the agent left"; }
type 'echo 42 > out.txt; exit'
wait_for '^RUNS-EXIT-0' 60
screen | grep -q '^verdict: passed' || { screen >&2; fail "runs shell did not grade the fix"; }
[ "$(cat "$R/runs/$failed_id/workspace/out.txt")" = "41" ] || fail "the kept workspace was modified"
type "stty -a > $WORK/stty.after5; echo S5-\$?"
wait_for 'S5-0'
cmp -s "$WORK/stty.before" "$WORK/stty.after5" || fail "the host terminal changed"
no_residue
echo "terminal: ok"
