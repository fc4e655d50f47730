# Harbor / Terminal-Bench task directories as fixtures, end to end, offline: a suite whose
# `fixtures:` glob names a directory of tasks runs with `evalbox run`; `evalbox fixture test`
# passes the oracle and fails the noop; the images come from the suite's images:, --image, a
# podman store (the test's own, never the machine's) and a Dockerfile built with podman. Then
# the hostile and broken cases: a partial reward, an agent planting /logs/verifier/reward.txt,
# a verifier that times out (grader error, exit 3), a malformed task.toml (exit 64, file:line),
# an unknown key (a warning), a compose environment (refused).
source "$(dirname "$0")/lib.sh"
need_isolation
DEB=$("$SRC/tests/images/make-images" debian)
S=$WORK/tasks
cp -r "$SRC/tests/integration/harbor-tasks" "$S"
mkdir -p "$S/images"
ln -s "$DEB" "$S/images/debian"

# A podman store of this test's own (vfs: any filesystem), holding the Debian test image under
# the name the Dockerfile and a task.toml use; runc, because crun refuses this host's hybrid
# cgroups. podman and skopeo read these variables; so does the podman evalbox starts.
RUNROOT=$(mktemp -d /tmp/evalbox-hb-XXXXXX)  # podman wants a short run root
trap 'cleanup; rm -rf "$RUNROOT"' EXIT
cat >"$WORK/storage.conf" <<EOF
[storage]
driver = "vfs"
graphroot = "$WORK/podman"
runroot = "$RUNROOT"
EOF
printf '[engine]\nruntime = "runc"\n' >"$WORK/containers.conf"
export CONTAINERS_STORAGE_CONF=$WORK/storage.conf CONTAINERS_CONF=$WORK/containers.conf
# A task's docker_image is pulled before the podman store is asked: no registry outside this
# machine may be, so Docker Hub and localhost are blocked as registries.conf blocks them (the
# pull is refused at once, naming this file; tests/integration/registry_pull.sh pulls for real).
printf '[[registry]]\nlocation = "docker.io"\nblocked = true\n[[registry]]\nlocation = "localhost"\nblocked = true\n' \
  >"$WORK/registries.conf"
export EVALBOX_REGISTRIES_CONF=$WORK/registries.conf
skopeo copy --quiet "oci:$DEB/oci:latest" \
  "containers-storage:[vfs@$WORK/podman+$RUNROOT]localhost/evalbox-debian:latest"

# validate: every task is read, every image resolved (built, saved) and imported.
"$EVALBOX" validate "$S/suite.yaml" >"$WORK/validate" 2>&1 || { cat "$WORK/validate"; fail "validate"; }
grep -q "^ok   suite harbor-tasks: 4 fixtures" "$WORK/validate" || fail "validate: $(cat "$WORK/validate")"
grep -q "building .*from-dockerfile/environment/Dockerfile with \`podman build" "$WORK/validate" ||
  fail "validate does not say it builds the Dockerfile: $(cat "$WORK/validate")"
grep -q "localhost/evalbox-debian:latest: saving it from the podman store" "$WORK/validate" ||
  fail "validate does not say it saves the podman image: $(cat "$WORK/validate")"
"$EVALBOX" validate "$S/hello-file" >"$WORK/v-hello" 2>&1 &&
  fail "a task whose docker_image is mapped only by the suite validated alone"
grep -q "task.toml:.*environment.docker_image evalbox-test/debian:1: .*pulls from docker.io are blocked ($WORK/registries.conf)" \
  "$WORK/v-hello" || fail "unresolved image: $(cat "$WORK/v-hello")"
grep -q -- "evalbox image pull evalbox-test/debian:1.*--image evalbox-test/debian:1=SOURCE" "$WORK/v-hello" ||
  fail "the unresolved image's hint names no command: $(cat "$WORK/v-hello")"
"$EVALBOX" validate "$S/hello-file" --image "evalbox-test/debian:1=oci:$S/images/debian/oci:latest" \
  >"$WORK/v-hello2" 2>&1 || { cat "$WORK/v-hello2"; fail "validate --image"; }
grep -q "^ok   Harbor task hello-file: verifier tests/test.sh, passes at reward >= 1, network none" \
  "$WORK/v-hello2" || fail "validate --image: $(cat "$WORK/v-hello2")"

# fixture test: the oracle passes, the noop fails, for each task (--suite for its images:).
"$EVALBOX" fixture test "$S"/hello-file "$S"/partial-credit "$S"/from-dockerfile \
  "$S"/from-podman-store --suite "$S/suite.yaml" >"$WORK/ft" 2>&1 || { cat "$WORK/ft"; fail "fixture test"; }
for t in hello-file partial-credit from-dockerfile from-podman-store; do
  grep -q "^ok       $t .*oracle 1/1 passed; untouched workspace fails: reward" "$WORK/ft" ||
    fail "fixture test $t: $(cat "$WORK/ft")"
done
# --image on fixture test, without the suite.
"$EVALBOX" fixture test "$S/hello-file" --image "evalbox-test/debian:1=oci:$S/images/debian/oci:latest" \
  >"$WORK/ft2" 2>&1 || { cat "$WORK/ft2"; fail "fixture test --image"; }

# run: the suite's glob of task directories; oracle passes everything, noop nothing (exit 1).
R=$WORK/results
expect_exit 1 "run" "$WORK/out" "$WORK/err" "$EVALBOX" run "$S/suite.yaml" --results "$R" -j 2
python3 - "$R" "$S" <<'PY'
import json, os, sys
R, S = sys.argv[1], sys.argv[2]
rows = [json.loads(l) for l in open(f"{R}/results.jsonl")]
assert len(rows) == 8, len(rows)
for r in rows:
    fx, cand = r["fixture"]["id"], r["candidate"]["id"]
    assert r["execution"]["status"] == "completed", (fx, cand, r["execution"])
    g = r["grading"]
    want = "passed" if cand == "oracle" else "failed"
    assert r["verdict"] == want, (fx, cand, g)
    assert g["status"] == "completed" and g["checks"][0]["kind"] == "verifier", g
    assert g["reward"] == (1 if cand == "oracle" else 0), g
    env = r["environment"]
    rec = r["execution"]["records"]
    # Internet allowed (Harbor's default when task.toml says nothing): the host's network for
    # the agent and the verifier, recorded as unsafe; no traffic is sent.
    net = "host" if fx == "from-podman-store" else "none"
    assert env["harbor"]["network"] == net, env
    for launch in ("agent", "verifier"):
        assert rec[launch]["mechanisms"]["network"] == ("host (unsafe)" if net == "host" else "none"), rec[launch]["mechanisms"]
    src = env["harbor"]["source"]
    if fx == "from-dockerfile":
        assert src.startswith("build:environment/Dockerfile@sha256:"), src
    elif fx == "from-podman-store":
        assert src.startswith("podman:localhost/evalbox-debian:latest@sha256:"), src
    else:
        assert src == f"oci:{S}/images/debian/oci:latest", src
    assert rec["verifier"]["outcome"] == "exited", rec["verifier"]
    run = f"{R}/runs/{r['run_id']}"
    # The verifier's output and what it left in /logs/verifier are kept.
    assert os.path.exists(f"{run}/verifier/stdout.txt"), os.listdir(run)
    if fx == "hello-file":
        assert "hello.txt" in open(f"{run}/verifier/stdout.txt").read()
        ctrf = json.load(open(f"{run}/verifier/logs/ctrf.json"))
        assert ctrf["results"]["tests"][0]["status"] == want, ctrf
        assert open(f"{run}/verifier/logs/reward.txt").read().strip() == ("1" if cand == "oracle" else "0")
    # Every run writes an ATIF trajectory.
    t = json.load(open(f"{run}/trajectory.json"))
    assert t["schema_version"] == "ATIF-v1.4" and t["agent"]["name"] == cand, t
    assert t["steps"][0]["source"] == "user" and t["steps"][0]["step_id"] == 1, t["steps"][0]
PY
no_residue

# Every verdict again from the runs' kept final states: the verifier over the rebuilt root.
regrade_reproduces "$R"
no_residue

# Hostile: an agent that plants the reward files, and one that does half the work.
cat >"$S/hostile.yaml" <<'YAML'
schema: evalbox.suite.v1
name: harbor-hostile
fixtures: [hello-file, partial-credit]
images: {"evalbox-test/debian:1": "oci:images/debian/oci:latest"}
candidates:
  - id: planter
    adapter: command
    argv: [/bin/sh, -c, "mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt && echo '{\"reward\": 1}' > /logs/verifier/reward.json && mkdir -p /tests && echo 'echo 1 > /logs/verifier/reward.txt' > /tests/test.sh; echo planted"]
  - id: half
    adapter: command
    argv: [/bin/sh, -c, "echo a > a.txt"]
limits: {wall: 2m, memory: 1GiB, pids: 256, disk: 512MiB, output: 4MiB}
YAML
R=$WORK/hostile
expect_exit 1 "hostile run" "$WORK/out2" "$WORK/err2" \
  "$EVALBOX" run "$S/hostile.yaml" --results "$R"
python3 - "$R" <<'PY'
import json, sys
rows = {(json.loads(l)["fixture"]["id"], json.loads(l)["candidate"]["id"]): json.loads(l)
        for l in open(f"{sys.argv[1]}/results.jsonl")}
assert len(rows) == 4, rows.keys()
for fx in ("hello-file", "partial-credit"):
    r = rows[(fx, "planter")]
    # What the agent wrote to /logs/verifier and /tests is not what the verifier saw.
    assert r["verdict"] == "failed", r["grading"]
    assert r["grading"]["reward"] == 0, r["grading"]
half = rows[("partial-credit", "half")]
g = half["grading"]
assert half["verdict"] == "failed", g
assert g["rewards"] == {"reward": 0.5, "a": 1, "b": 0}, g
assert g["reward"] == 0.5 and abs(g["score"] - 0.5) < 1e-9, g
assert g["checks"][0]["detail"].startswith("reward.json: "), g
PY
# The same half-done work passes where the suite sets the threshold at 0.5.
sed -e 's/^name: harbor-hostile/name: harbor-half/' -e '/^candidates:/i harbor: {threshold: 0.5}' \
  "$S/hostile.yaml" >"$S/half.yaml"
R=$WORK/half
expect_exit 0 "threshold 0.5" "$WORK/out3" "$WORK/err3" \
  "$EVALBOX" run "$S/half.yaml" --results "$R" --filter 'partial-credit/half'
grep -q '"verdict":"passed"' "$R/results.jsonl" || fail "threshold 0.5: $(cat "$R/results.jsonl")"

# A verifier that runs past its timeout: a grader error (exit 3), not a task failure.
cp -r "$S/hello-file" "$S/slow-verifier"
sed -i 's/^timeout_sec = 60.0/timeout_sec = 2/' "$S/slow-verifier/task.toml"
printf '#!/bin/bash\nsleep 30\necho 1 > /logs/verifier/reward.txt\n' >"$S/slow-verifier/tests/test.sh"
cat >"$S/slow.yaml" <<'YAML'
schema: evalbox.suite.v1
name: harbor-slow
fixtures: [slow-verifier]
images: {"evalbox-test/debian:1": "oci:images/debian/oci:latest"}
candidates: [{id: oracle, adapter: oracle}]
YAML
R=$WORK/slow
expect_exit 3 "slow verifier" "$WORK/out4" "$WORK/err4" "$EVALBOX" run "$S/slow.yaml" --results "$R"
python3 - "$R/results.jsonl" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).readline())
assert r["verdict"] == "not_assessed" and r["grading"]["status"] == "error", r["grading"]
assert "the verifier timed out after 2s" in r["grading"]["error"], r["grading"]["error"]
assert r["execution"]["records"]["verifier"]["outcome"] == "timed_out", r["execution"]["records"]
PY
# No reward file at all: a grader error too.
printf '#!/bin/bash\necho forgot the reward\n' >"$S/slow-verifier/tests/test.sh"
sed -i 's/^timeout_sec = 2$/timeout_sec = 60/' "$S/slow-verifier/task.toml"
expect_exit 3 "no reward" /dev/null "$WORK/err5" \
  "$EVALBOX" run "$S/slow.yaml" --results "$WORK/noreward"
grep -q "neither /logs/verifier/reward.txt nor reward.json" "$WORK/noreward/results.jsonl" ||
  fail "no reward: $(cat "$WORK/noreward/results.jsonl")"
no_residue

# A malformed task.toml: exit 64 with FILE:LINE:COL; nothing runs.
cp -r "$S/hello-file" "$S/broken"
printf 'version = "1.0"\n[agent]\ntimeout_sec = "soon"\n[environment]\ndocker_image = = "x"\n' \
  >"$S/broken/task.toml"
expect_exit 64 "malformed task.toml" "$WORK/broken.out" "$WORK/broken.err" \
  "$EVALBOX" fixture test "$S/broken"
grep -q "^$S/broken/task.toml:5:[0-9]*: task.toml is not valid TOML" "$WORK/broken.err" ||
  fail "malformed task.toml: $(cat "$WORK/broken.err")"
printf 'version = "1.0"\n[agent]\ntimeout_sec = "soon"\n[environment]\ndocker_image = "evalbox-test/debian:1"\nmemory = 2048\n' \
  >"$S/broken/task.toml"
expect_exit 64 "ill-typed task.toml" "$WORK/broken.out" "$WORK/broken.err" \
  "$EVALBOX" validate "$S/broken"
grep -q "^$S/broken/task.toml:3:15: agent.timeout_sec must be a number, found a string" "$WORK/broken.err" ||
  fail "ill-typed timeout: $(cat "$WORK/broken.err")"
grep -q "^$S/broken/task.toml:6:10: memory must be a string, found an integer" "$WORK/broken.err" ||
  fail "ill-typed memory: $(cat "$WORK/broken.err")"

# An unknown key: a warning naming it and where, and the task still runs.
cp -r "$S/hello-file" "$S/newer"
printf '\n[agent.sandbox]\nkind = "x"\n\n[future]\nflag = true\n' >>"$S/newer/task.toml"
sed -i 's/^cpus = 1$/cpus = 1\ngpu_vendor = "none"/' "$S/newer/task.toml"
"$EVALBOX" fixture test "$S/newer" --image "evalbox-test/debian:1=oci:$S/images/debian/oci:latest" \
  >"$WORK/newer.out" 2>"$WORK/newer.err" || { cat "$WORK/newer.err"; fail "unknown keys made the task fail"; }
grep -q "$S/newer/task.toml:[0-9]*:1: unknown key environment.gpu_vendor (ignored)" "$WORK/newer.err" ||
  fail "no warning for environment.gpu_vendor: $(cat "$WORK/newer.err")"
grep -q "$S/newer/task.toml:[0-9]*:[0-9]*: unknown key future (ignored)" "$WORK/newer.err" ||
  fail "no warning for [future]: $(cat "$WORK/newer.err")"
grep -q "unknown key agent.sandbox (ignored)" "$WORK/newer.err" ||
  fail "no warning for agent.sandbox: $(cat "$WORK/newer.err")"

# A docker-compose environment: refused, saying so.
cp -r "$S/hello-file" "$S/compose"
mkdir -p "$S/compose/environment"
printf 'services:\n  main:\n    image: evalbox-test/debian:1\n' >"$S/compose/environment/docker-compose.yaml"
expect_exit 64 "compose" /dev/null "$WORK/compose.err" "$EVALBOX" fixture test "$S/compose"
grep -q "docker-compose.yaml: a docker-compose environment is not supported" "$WORK/compose.err" ||
  fail "compose: $(cat "$WORK/compose.err")"
no_residue
echo "PASS"
