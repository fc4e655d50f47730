# Ctrl-C (SIGINT) stops the run: exit 130, running sandboxes killed and torn down, nothing
# unfinished recorded, no mount or run directory left.
source "$(dirname "$0")/lib.sh"
need_isolation
mkdir -p "$WORK/slow/fx/workspace" "$WORK/slow/agents"
cat > "$WORK/slow/fx/fixture.yaml" <<'YAML'
schema: evalbox.fixture.v1
id: slow
prompt: take your time
checks:
  - {id: done, file: {path: done.txt, exists: true}}
YAML
printf '#!/bin/sh\nsleep 30\ntouch done.txt\n' > "$WORK/slow/agents/slow.sh"
chmod +x "$WORK/slow/agents/slow.sh"
cat > "$WORK/slow/suite.yaml" <<'YAML'
schema: evalbox.suite.v1
name: slow
fixtures: [fx]
candidates:
  - {id: sleeper, adapter: command, argv: [agents/slow.sh]}
trials: 2
concurrency: 2
YAML
R=$WORK/results
"$EVALBOX" run "$WORK/slow/suite.yaml" --results "$R" >/dev/null 2>&1 &
pid=$!
# Both agents must be running inside their sandboxes before the interrupt.
running=0
for _ in $(seq 1 200); do
  running=$(pgrep -fc "$WORK/slow/agents/slow.sh" || true)
  [ "$running" -ge 2 ] && break
  sleep 0.05
done
[ "$running" -ge 2 ] || fail "the agents never started"
kill -INT "$pid"
start=$(date +%s)
set +e
wait "$pid"; rc=$?
set -e
[ "$rc" = 130 ] || fail "exit $rc, expected 130"
[ $(( $(date +%s) - start )) -lt 20 ] || fail "stopping took too long"
[ "$(lines "$R/results.jsonl")" = 0 ] || fail "an interrupted run was recorded"
pgrep -f "$WORK/slow/agents/slow.sh" >/dev/null && fail "the agent is still running"
no_residue
echo "interrupt: ok"
