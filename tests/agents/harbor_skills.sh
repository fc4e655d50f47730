# A Harbor task's `[environment] skills_dir` with the real Claude Code and Codex CLI inside the
# task's image, against the stub model (docs/harbor.md): the skills the image holds are copied
# into each client's skills directory before it starts, so the client offers them to the model
# (the stub sees each skill's description) and its shell sees them in the home; a candidate's
# own skill of the same name wins over the image's; run.json names the skills copied; an
# adapter that takes no skills gets none; a skills_dir that is not a directory in the image,
# or one whose copy fails midway (the run's disk is full), fails the run's setup, saying so.
source "$(dirname "$0")/lib.sh" "$@"
need_isolation
install_agents
DEB=$("$SRC/tests/images/make-images" debian)

rand() { od -An -N8 -tx1 /dev/urandom | tr -d ' \n'; }
TASK_MARK="task-skill-$(rand)"
IMAGE_MINE="image-mine-$(rand)"
OWN_MINE="own-mine-$(rand)"
skill() {  # skill DIR NAME MARKER
  mkdir -p "$1"
  printf -- '---\nname: %s\ndescription: Notes for this task (%s). Use when asked about notes.\n---\nRead the notes.\n' \
    "$2" "$3" >"$1/SKILL.md"
}

# The task's image: the Debian test image and a layer holding /opt/task-skills with two skills,
# a plain file (not a skill: skipped) and a skill whose name holds a line break.
IMG=$WORK/image
cp -al "$DEB/oci" "$IMG" 2>/dev/null || cp -a "$DEB/oci" "$IMG"
skill "$WORK/layer/task-notes" task-notes "$TASK_MARK"
skill "$WORK/layer/mine" mine "$IMAGE_MINE"
echo "not a skill" >"$WORK/layer/README.txt"
# (Skipped: its name would split the list of names run.json records.)
skill "$WORK/layer/two
lines" broken "$TASK_MARK"
python3 "$SRC/tests/images/add_layer.py" "$IMG" latest skills "$WORK/layer" /opt/task-skills ||
  fail "add_layer.py"

S=$WORK/s
mkdir -p "$S/skilled/tests" "$S/no-dir/tests" "$S/too-big/tests"
skill "$S/own/mine" mine "$OWN_MINE"
for t in skilled no-dir too-big; do
  echo "Write the skills you have into seen.txt." >"$S/$t/instruction.md"
  cat >"$S/$t/tests/test.sh" <<'SH'
#!/bin/bash
# Passes when the agent's shell saw the image's skill in its skills directory.
if grep -q task-notes seen.txt 2>/dev/null; then echo 1; else echo 0; fi >/logs/verifier/reward.txt
SH
done
cat >"$S/skilled/task.toml" <<'TOML'
version = "1.0"
[agent]
timeout_sec = 180
[environment]
docker_image = "evalbox-test/skills:1"
allow_internet = false
skills_dir = "/opt/task-skills"
TOML
sed 's|^skills_dir = .*|skills_dir = "/opt/no-such-skills"|' "$S/skilled/task.toml" >"$S/no-dir/task.toml"
# /usr/share's directories hold megabytes: more than the 2 MiB disk its suite gives a run.
sed 's|^skills_dir = .*|skills_dir = "/usr/share"|' "$S/skilled/task.toml" >"$S/too-big/task.toml"

# The agents' shell lists both clients' skills directories into the workspace.
start_stub --final "Listed the skills." --watch "$TASK_MARK" --watch "$IMAGE_MINE" \
  --watch "$OWN_MINE" \
  --command "ls \$HOME/.claude/skills \$HOME/.agents/skills > seen.txt 2>&1; true"
cat >"$S/suite.yaml" <<YAML
schema: evalbox.suite.v1
name: harbor-skills
fixtures: [skilled]
images:
  "evalbox-test/skills:1": "oci:$IMG:skills"
candidates:
  - id: claude
    adapter: claude-code
    base_url: "http://127.0.0.1:$STUB_PORT"
    env: {ANTHROPIC_API_KEY: not-a-secret}
    permission_mode: bypass
    network: {allow: ["127.0.0.1:$STUB_PORT"]}
    skills: [own/mine]
  - id: codex
    adapter: codex
    model: gpt-5.5
    provider: {base_url: "http://127.0.0.1:$STUB_PORT/v1", wire_api: responses}
    network: {allow: ["127.0.0.1:$STUB_PORT"]}
  - {id: noop, adapter: noop}
concurrency: 2
limits: {wall: 3m, memory: 2GiB, pids: 512, disk: 512MiB, output: 8MiB}
YAML

"$EVALBOX" validate "$S/suite.yaml" >"$WORK/validate" 2>&1 || { cat "$WORK/validate"; fail "validate"; }
grep -q "skills_dir" "$WORK/validate" && fail "validate still warns about skills_dir: $(cat "$WORK/validate")"
"$EVALBOX" validate "$S/skilled" --image "evalbox-test/skills:1=oci:$IMG:skills" >"$WORK/v-task" 2>&1 ||
  { cat "$WORK/v-task"; fail "validate the task"; }
grep -q "^ok   Harbor task skilled: .*network none, skills from /opt/task-skills in its image (for clients that take skills), digest" \
  "$WORK/v-task" || fail "validate does not name the task's skills: $(cat "$WORK/v-task")"
R=$WORK/results
rc=0
"$EVALBOX" run "$S/suite.yaml" --results "$R" >"$WORK/out" 2>"$WORK/err" || rc=$?
# 1: the noop candidate fails the task; the clients pass it.
if [ "$rc" != 1 ]; then
  cat "$WORK/out" "$WORK/err" >&2
  for f in "$R"/runs/*/native/stderr.txt "$R"/runs/*/skills.log; do echo "== $f" >&2; tail -20 "$f" >&2; done
  fail "evalbox run exited $rc, expected 1"
fi
python3 - "$R" "$STUB_LOG" "$TASK_MARK" "$IMAGE_MINE" "$OWN_MINE" <<'PY' || fail "skills_dir"
import json, os, sys
R, stub_log, task_mark, image_mine, own_mine = sys.argv[1:6]
rows = {r["candidate"]["id"]: r for r in map(json.loads, open(f"{R}/results.jsonl"))}
assert set(rows) == {"claude", "codex", "noop"}, rows.keys()
for cid in ("claude", "codex"):
    r = rows[cid]
    assert r["verdict"] == "passed", (cid, r["execution"], r["grading"])
    h = r["environment"]["harbor"]
    assert h["skills_dir"] == "/opt/task-skills", h
    run = f"{R}/runs/{r['run_id']}"
    log = open(f"{run}/skills.log").read()
    # Claude Code has its own "mine": the image's is kept out; Codex gets both.
    want = ["task-notes"] if cid == "claude" else ["mine", "task-notes"]
    assert sorted(h["skills"]) == want, (cid, h, log)
    assert ("kept: mine" in log) == (cid == "claude"), (cid, log)
    assert "README.txt" not in log, log
    assert "skipped a skill whose name holds a line break" in log, log
noop = rows["noop"]
assert noop["verdict"] == "failed" and "skills" not in noop["environment"].get("harbor", {}), noop
assert not os.path.exists(f"{R}/runs/{noop['run_id']}/skills.log")

posts = [json.loads(l) for l in open(stub_log)]
posts = [e for e in posts if e.get("method") == "POST"]
def seen(client):
    return {w for e in posts if client in e.get("path", "") for w in e.get("watched", [])}
claude, codex = seen("/v1/messages"), seen("/v1/responses")
assert task_mark in claude and own_mine in claude and image_mine not in claude, claude
assert task_mark in codex and image_mine in codex and own_mine not in codex, codex
PY
no_residue

# A skills_dir the image does not have: the run's setup fails, naming it; nothing else ran.
cat >"$S/no-dir.yaml" <<YAML
schema: evalbox.suite.v1
name: harbor-skills-no-dir
fixtures: [no-dir]
images:
  "evalbox-test/skills:1": "oci:$IMG:skills"
candidates:
  - id: codex
    adapter: codex
    model: gpt-5.5
    provider: {base_url: "http://127.0.0.1:$STUB_PORT/v1", wire_api: responses}
    network: {allow: ["127.0.0.1:$STUB_PORT"]}
YAML
rc=0
"$EVALBOX" run "$S/no-dir.yaml" --results "$WORK/r2" >"$WORK/out2" 2>"$WORK/err2" || rc=$?
[ "$rc" = 2 ] || { cat "$WORK/out2" "$WORK/err2" >&2; fail "a missing skills_dir: exit $rc, expected 2"; }
python3 - "$WORK/r2/results.jsonl" <<'PY' || fail "a missing skills_dir"
import json, sys
e = json.loads(open(sys.argv[1]).readline())["execution"]
assert e["status"] == "error" and e["error_kind"] == "setup", e
assert "skills_dir /opt/no-such-skills is not a directory in its image" in e["error"], e
assert "agent" not in e["records"], e["records"].keys()
PY
no_residue

# A copy that fails midway: the home fills up at the run's disk limit; the setup fails, naming
# the log that says why, and the agent never starts.
sed 's/no-dir/too-big/g' "$S/no-dir.yaml" >"$S/too-big.yaml"
echo "limits: {disk: 2MiB}" >>"$S/too-big.yaml"
rc=0
"$EVALBOX" run "$S/too-big.yaml" --results "$WORK/r3" --retries 0 >"$WORK/out3" 2>"$WORK/err3" || rc=$?
[ "$rc" = 2 ] || { cat "$WORK/out3" "$WORK/err3" >&2; fail "a skills copy over the disk: exit $rc, expected 2"; }
python3 - "$WORK/r3" <<'PY' || fail "a skills copy over the disk"
import glob, json, sys
e = json.loads(open(sys.argv[1] + "/results.jsonl").readline())["execution"]
assert e["status"] == "error" and e["error_kind"] == "setup", e
assert "copying the task's skills_dir /usr/share failed" in e["error"], e
assert "skills.log" in e["error"], e
assert e["records"]["skills"]["disk_limit_hit"] is True, e["records"]["skills"]
assert "agent" not in e["records"], e["records"].keys()
logs = glob.glob(sys.argv[1] + "/runs/*/skills.log")
assert len(logs) == 1, logs
text = open(logs[0]).read()
assert "No space left on device" in text and "could not be copied" in text, text[-2000:]
PY
no_residue
echo "harbor skills_dir: ok"
