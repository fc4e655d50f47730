# Fixtures in images, as a user runs them: `evalbox validate` imports the images and says what
# runs will use; `evalbox fixture test` accepts a fixture whose tests need the Debian image's
# Python and one whose workspace is the busybox image's /opt/data (the solution writes into the
# image's root, the shell check sees it, the untouched run does not); `evalbox run` records
# which image each run used; bad `environment:` input is refused with FILE:LINE and a hint.
source "$(dirname "$0")/lib.sh"
need_isolation
BB=$("$SRC/tests/images/make-images" busybox)
DEB=$("$SRC/tests/images/make-images" debian)
S=$WORK/suite
cp -r "$SRC/tests/integration/image-fixtures" "$S"
mkdir -p "$S/images"
ln -s "$BB" "$S/images/busybox"
ln -s "$DEB" "$S/images/debian"

"$EVALBOX" validate "$S/suite.yaml" >"$WORK/validate" 2>&1 || { cat "$WORK/validate"; fail "validate"; }
grep -q "^ok   suite image-fixtures" "$WORK/validate" || fail "validate: $(cat "$WORK/validate")"
grep -q "image oci:$S/images/debian/oci:latest: sha256:" "$WORK/validate" ||
  fail "validate does not say which image: $(cat "$WORK/validate")"
grep -q "PATH /bin" "$WORK/validate" || fail "validate does not show the busybox image's PATH"

for fx in py-in-debian busybox-workdir; do
  "$EVALBOX" fixture test "$S/$fx" --suite "$S/suite.yaml" >"$WORK/ft-$fx" 2>&1 ||
    { cat "$WORK/ft-$fx"; fail "fixture test $fx"; }
done

R=$WORK/results
set +e
"$EVALBOX" run "$S/suite.yaml" --results "$R" >"$WORK/out" 2>"$WORK/err"
rc=$?
set -e
[ "$rc" = 1 ] || { cat "$WORK/err"; fail "run: exit $rc, expected 1 (noop fails)"; }
python3 - "$R" "$S" <<'PY'
import json, sys
R, S = sys.argv[1], sys.argv[2]
rows = [json.loads(l) for l in open(f"{R}/results.jsonl")]
assert len(rows) == 4, len(rows)
for r in rows:
    assert r["execution"]["status"] == "completed", r["execution"]
    env = r["environment"]
    want = "busybox" if r["fixture"]["id"] == "busybox-workdir" else "debian"
    assert env["image"] == f"oci:{S}/images/{want}/oci:latest", env
    assert env["id"].startswith("sha256:") and env["layers"], env
    assert env["from_suite"] == (want == "debian"), env
    assert env["workdir"] == ("/opt/data" if want == "busybox" else "/workspace"), env
    root = r["execution"]["records"]["agent"]["mechanisms"]["root"]
    assert root["kind"] == "image" and root["image"] == env["id"], root
    expect = "passed" if r["candidate"]["id"] == "oracle" else "failed"
    assert r["verdict"] == expect, (r["fixture"]["id"], r["candidate"]["id"], r["grading"])
PY
no_residue

# Graded again from what the runs kept (docs/results.md, "Grading again"): the oracle's
# /bin/greet lives in the image root's writable layer, which its final state holds and a
# regrade stacks back under the checks; every verdict comes out the same.
python3 - "$R" <<'PY'
import json, sys
R = sys.argv[1]
for line in open(f"{R}/results.jsonl"):
    r = json.loads(line)
    if (r["fixture"]["id"], r["candidate"]["id"]) != ("busybox-workdir", "oracle"):
        continue
    m = json.load(open(f"{R}/{r['final_state']['path']}"))
    root = {e["path"]: e for t in m["trees"] if t["name"] == "root" for e in t["entries"]}
    assert root["bin/greet"]["type"] == "file" and root["bin/greet"]["mode"] == 0o755, root
    ws = {e["path"]: e for t in m["trees"] if t["name"] == "workspace" for e in t["entries"]}
    assert "answer.txt" in ws, ws
PY
regrade_reproduces "$R"
no_residue

# A command agent named by a bare name runs the image's program, found on the sandbox's PATH —
# never the caller's (here a shim in the home directory, a protected root, comes first on it).
mkdir -p "$WORK/home/.pyenv/shims"
printf '#!/bin/sh\necho host shim >&2; exit 3\n' >"$WORK/home/.pyenv/shims/python3"
chmod +x "$WORK/home/.pyenv/shims/python3"
cat >"$S/bare.yaml" <<'YAML'
schema: evalbox.suite.v1
name: bare
fixtures: ["*/"]
environment: {image: "oci:images/debian/oci:latest"}
candidates:
  - id: py
    adapter: command
    argv: [python3, -c, "open('stats.py', 'w').write('def mean(xs):\\n    return sum(xs) / len(xs)\\n')"]
YAML
set +e
HOME=$WORK/home PATH=$WORK/home/.pyenv/shims:$PATH \
  "$EVALBOX" run "$S/bare.yaml" --results "$WORK/bare" >"$WORK/bare.out" 2>"$WORK/bare.err"
rc=$?
set -e
# busybox has no python3: that run is an execution error (exit 2), of the adapter's kind (not
# retried as if the host had failed), saying what was searched.
[ "$rc" = 2 ] || { cat "$WORK/bare.err"; fail "bare-name run: exit $rc, expected 2"; }
python3 - "$WORK/bare/results.jsonl" <<'PY'
import json, sys
rows = {json.loads(l)["fixture"]["id"]: json.loads(l) for l in open(sys.argv[1])}
assert rows["py-in-debian"]["verdict"] == "passed", rows["py-in-debian"]["grading"]
bb = rows["busybox-workdir"]["execution"]
assert bb["status"] == "error" and bb["error_kind"] == "adapter", bb
assert "python3" in bb["error"] and "searched PATH=/evalbox/bin:/bin" in bb["error"], bb["error"]
assert rows["busybox-workdir"]["attempts"] == 1, rows["busybox-workdir"]["attempts"]
PY
no_residue

# A dynamically linked host program as the agent, in an image without glibc (busybox): it is
# started through the host's loader and libraries (read-only at /opt/evalbox/host), and what it
# runs is the image's.
mkdir -p "$S/agents"
cp /bin/dash "$S/agents/host-dash"
cat >"$S/hostdyn.yaml" <<'YAML'
schema: evalbox.suite.v1
name: hostdyn
fixtures: [busybox-workdir]
candidates:
  - id: dash
    adapter: command
    argv: [agents/host-dash, -c, "echo $EVALBOX_IMAGE > answer.txt; printf '#!/bin/sh\\necho hello\\n' > /bin/greet; chmod +x /bin/greet; test -e /opt/evalbox/host/ld.so && echo host-loader"]
YAML
"$EVALBOX" run "$S/hostdyn.yaml" --results "$WORK/hostdyn" >"$WORK/hd.out" 2>"$WORK/hd.err" ||
  { cat "$WORK/hd.err"; fail "a dynamic host agent in busybox"; }
python3 - "$WORK/hostdyn" <<'PY'
import json, sys
r = json.loads(open(f"{sys.argv[1]}/results.jsonl").readline())
assert r["verdict"] == "passed", r["grading"]
PY
grep -q host-loader "$WORK"/hostdyn/runs/*/native/stdout.txt || fail "not started through the host's loader"
no_residue

# Ctrl-C while a run's image is unpacked on its first use: the import says what it does,
# stops, keeps no partial layer, and nothing is recorded (exit 130).
fresh=$WORK/fresh-state
EVALBOX_STATE_DIR=$fresh "$EVALBOX" run "$S/suite.yaml" --filter 'py-in-debian/*' \
  --results "$WORK/int" >/dev/null 2>"$WORK/int.err" &
pid=$!
for _ in $(seq 1 600); do grep -q "unpacking layer" "$WORK/int.err" && break; sleep 0.05; done
grep -q "unpacking layer 1/1" "$WORK/int.err" || fail "run does not say it unpacks the image: $(cat "$WORK/int.err")"
sleep 0.3
kill -INT "$pid"
set +e
wait "$pid"; rc=$?
set -e
[ "$rc" = 130 ] || fail "run interrupted during the import: exit $rc ($(cat "$WORK/int.err"))"
[ "$(find "$fresh/images/layers" -mindepth 1 -maxdepth 1 | wc -l)" = 0 ] ||
  fail "a partial layer was kept: $(ls -a "$fresh/images/layers")"
[ "$(lines "$WORK/int/results.jsonl")" = 0 ] || fail "an interrupted run was recorded"
! grep -q " $fresh/" /proc/self/mountinfo || fail "mounts left under $fresh"
[ ! -d "$fresh/runs" ] || [ -z "$(ls -A "$fresh/runs")" ] || fail "runs left in $fresh"

# Bad environment input: each refused at its line, with what to do.
bad() {  # fixture.yaml's environment line, then what the error must say
  local d=$WORK/bad-$RANDOM
  mkdir -p "$d/workspace"
  printf 'schema: evalbox.fixture.v1\nid: bad\nprompt: p\nenvironment: %s\nchecks: [{id: a, shell: "true"}]\n' "$1" >"$d/fixture.yaml"
  set +e
  "$EVALBOX" validate "$d" >"$WORK/bad.out" 2>"$WORK/bad.err"
  local rc=$?
  set -e
  [ "$rc" = 64 ] || fail "environment $1: exit $rc, expected 64"
  grep -qF "$d/fixture.yaml:4:" "$WORK/bad.err" || fail "environment $1: no FILE:LINE: $(cat "$WORK/bad.err")"
  grep -qF -- "$2" "$WORK/bad.err" || fail "environment $1: expected '$2' in: $(cat "$WORK/bad.err")"
}
bad '{image: "oci:nowhere"}' "does not exist"
bad '{image: "ubuntu:24.04"}' "names no image transport"
bad '{image: "oci:.", tag: x}' "unknown key 'tag' in environment"
bad '{workdir: /app}' "environment is missing 'image'"
# An image path that exists but holds no image: validate imports it and says why.
mkdir -p "$WORK/notimage"
bad "{image: \"oci:$WORK/notimage\"}" "oci:$WORK/notimage"
echo "image fixtures: ok"
