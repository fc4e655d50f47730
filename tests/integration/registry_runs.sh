# Registry images in suites and Harbor tasks, end to end against a real registry on 127.0.0.1
# (tests/registry/registry-env): a Harbor task whose docker_image names the registry passes
# `evalbox fixture test` with no --image and no podman on PATH; `--pull never` with an empty
# store stops before anything runs, naming the reference; a suite whose fixture names a tag
# that then moves resumes on the old digest (--pull missing), makes new runs on the new one
# (--pull always), and replays the old one from images.lock on an empty store elsewhere
# (--images-lock).
source "$(dirname "$0")/lib.sh"
for tool in docker-registry skopeo; do
  command -v "$tool" >/dev/null || fail "$tool is missing (scripts/bootstrap --tests installs it)"
done
need_isolation
REGENV=$SRC/tests/registry/registry-env
REAL_HOME=${HOME:-/root}
DEB=$("$SRC/tests/images/make-images" debian)

export HOME=$WORK/home
mkdir -p "$HOME"
unset XDG_RUNTIME_DIR DOCKER_CONFIG REGISTRY_AUTH_FILE EVALBOX_REGISTRY_MIRROR \
  EVALBOX_REGISTRY_INSECURE HTTPS_PROXY https_proxy HTTP_PROXY http_proxy NO_PROXY no_proxy
: >"$WORK/registries.conf"
export EVALBOX_REGISTRIES_CONF=$WORK/registries.conf

REG=$WORK/reg
trap 'HOME=$REAL_HOME "$REGENV" stop "$REG" >/dev/null 2>&1 || true; cleanup' EXIT
HOME=$REAL_HOME "$REGENV" start "$REG" >/dev/null 2>"$WORK/regenv.err" ||
  { cat "$WORK/regenv.err" >&2; fail "registry-env start"; }
HOME=$REAL_HOME "$REGENV" push "$REG" >/dev/null 2>"$WORK/regenv.err" ||
  { cat "$WORK/regenv.err" >&2; fail "registry-env push"; }
# shellcheck source=/dev/null
. "$REG/env"
export EVALBOX_REGISTRY_CA=$REGISTRY_CA
skopeo copy --quiet --dest-cert-dir "$REGISTRY_CERT_DIR" "oci:$DEB/oci:latest" \
  "docker://$REGISTRY/evalbox-test/debian:1" || fail "push the Debian test image"

# A PATH without podman or buildah: the task's image can only come from the registry.
mkdir -p "$WORK/bin"
for d in /usr/local/sbin /usr/local/bin /usr/sbin /usr/bin /sbin /bin; do
  for f in "$d"/*; do
    case ${f##*/} in podman | buildah) continue ;; esac
    [ -e "$WORK/bin/${f##*/}" ] || ln -s "$f" "$WORK/bin/${f##*/}" 2>/dev/null || true
  done
done
NOPODMAN=$WORK/bin

# ---- a Harbor task whose docker_image names the registry ----
cp -r "$SRC/tests/integration/harbor-tasks/hello-file" "$WORK/task"
sed -i "s|^docker_image = .*|docker_image = \"$REGISTRY/evalbox-test/debian:1\"|" "$WORK/task/task.toml"
grep -q "docker_image = \"$REGISTRY/evalbox-test/debian:1\"" "$WORK/task/task.toml" ||
  fail "the task names no registry image"

export EVALBOX_STATE_DIR=$WORK/state-empty
PATH=$NOPODMAN "$EVALBOX" fixture test "$WORK/task" --pull never >"$WORK/never.out" 2>&1 &&
  fail "--pull never with an empty store ran: $(cat "$WORK/never.out")"
rc=0
PATH=$NOPODMAN "$EVALBOX" fixture test "$WORK/task" --pull never >/dev/null 2>&1 || rc=$?
[ "$rc" = 64 ] || fail "--pull never with an empty store: exit $rc, not 64"
grep -q "docker://$REGISTRY/evalbox-test/debian:1 is not in the image store and pulling is off" \
  "$WORK/never.out" || fail "--pull never does not name the reference: $(cat "$WORK/never.out")"
[ -z "$(ls -A "$EVALBOX_STATE_DIR/images/layers" 2>/dev/null)" ] ||
  fail "--pull never downloaded something"

export EVALBOX_STATE_DIR=$WORK/state
PATH=$NOPODMAN "$EVALBOX" fixture test "$WORK/task" --results "$WORK/task-results" \
  >"$WORK/ft.out" 2>&1 || { cat "$WORK/ft.out" >&2; fail "fixture test of a task pulled from the registry"; }
grep -q "^ok .*oracle 1/1 passed" "$WORK/ft.out" || fail "fixture test: $(cat "$WORK/ft.out")"
grep -q "evalbox: image docker://$REGISTRY/evalbox-test/debian:1: .*layer 1/1" "$WORK/ft.out" ||
  fail "the pull's progress was not shown: $(cat "$WORK/ft.out")"
deb_digest=$(skopeo inspect --cert-dir "$REGISTRY_CERT_DIR" --format '{{.Digest}}' \
  "docker://$REGISTRY/evalbox-test/debian:1")
python3 - "$WORK/task-results" "docker://$REGISTRY/evalbox-test/debian@$deb_digest" <<'PY' ||
import json, pathlib, sys
runs = list(pathlib.Path(sys.argv[1], "runs").glob("*/run.json"))
assert len(runs) == 2, runs
for r in runs:
    env = json.loads(r.read_text())["environment"]
    assert env["image"] == sys.argv[2], (env["image"], sys.argv[2])
PY
  fail "run.json does not name the image by its digest"

# ---- a suite whose fixture names a tag that moves ----
mkdir -p "$WORK/suite"
cp -r "$SRC/tests/integration/image-fixtures/busybox-workdir" "$WORK/suite/"
sed -i "s|^  image: .*|  image: docker://$REGISTRY/test/moving:v1|" "$WORK/suite/busybox-workdir/fixture.yaml"
cat >"$WORK/suite/suite.yaml" <<'EOF'
schema: evalbox.suite.v1
name: moving-tag
fixtures: ["*/"]
candidates:
  - {id: oracle, adapter: oracle}
  - {id: noop, adapter: noop}
baseline: noop
EOF
R=$WORK/results
# `evalbox run` of the suite: exit 1 is expected (the noop candidate fails its task).
run_suite() {
  local out=$1 rc=0
  shift
  "$EVALBOX" run "$WORK/suite/suite.yaml" "$@" >"$out" 2>&1 || rc=$?
  [ "$rc" -le 1 ] || { cat "$out" >&2; return 1; }
}
records() { wc -l <"$R/results.jsonl" | tr -d ' '; }
images_in_runs() {  # the images the records of RESULTS name, sorted and unique
  python3 - "$1" <<'PY'
import json, pathlib, sys
seen = set()
for r in pathlib.Path(sys.argv[1], "runs").glob("*/run.json"):
    seen.add(json.loads(r.read_text())["environment"]["image"])
print("\n".join(sorted(seen)))
PY
}
lock_digest() {
  python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["images"][sys.argv[2]])' \
    "$1" "docker://$REGISTRY/test/moving:v1"
}

old=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' \
  "$REG/digests.json" "test/moving:v1")
run_suite "$WORK/run1.out" --results "$R" || fail "run on the registry image"
[ "$(records)" = 2 ] || fail "first run: $(records) records"
[ "$(lock_digest "$R/images.lock")" = "$old" ] || fail "images.lock: $(cat "$R/images.lock")"
cp "$R/images.lock" "$WORK/old.lock"

HOME=$REAL_HOME "$REGENV" retag "$REG" test/moving:v1 test/derived:latest >/dev/null 2>&1 ||
  fail "retag"
new=$(skopeo inspect --cert-dir "$REGISTRY_CERT_DIR" --format '{{.Digest}}' \
  "docker://$REGISTRY/test/moving:v1")
[ "$new" != "$old" ] || fail "the tag did not move"

# --pull missing: the store's image for the tag; the runs resume (nothing new).
run_suite "$WORK/run2.out" --results "$R" || fail "resume"
[ "$(records)" = 2 ] || fail "a resume under --pull missing made new runs"
grep -q "2 run(s) were already recorded" "$WORK/run2.out" || fail "resume: $(cat "$WORK/run2.out")"

# --pull always: the registry says the tag moved; the new digest makes new runs.
run_suite "$WORK/run3.out" --results "$R" --pull always || fail "run after the tag moved"
[ "$(records)" = 4 ] || fail "the moved tag did not make new runs: $(records) records"
[ "$(lock_digest "$R/images.lock")" = "$new" ] || fail "images.lock after the move: $(cat "$R/images.lock")"
[ "$(images_in_runs "$R")" = "$(printf 'docker://%s/test/moving@%s\ndocker://%s/test/moving@%s' \
  "$REGISTRY" "$(printf '%s\n%s\n' "$old" "$new" | sort | head -1)" \
  "$REGISTRY" "$(printf '%s\n%s\n' "$old" "$new" | sort | tail -1)")" ] ||
  fail "the runs do not name both digests: $(images_in_runs "$R")"

# --images-lock: the old digest, on another machine (an empty store, new results): pulled by
# digest, and every run names it.
export EVALBOX_STATE_DIR=$WORK/state-elsewhere
run_suite "$WORK/run4.out" --results "$WORK/replay" --images-lock "$WORK/old.lock" ||
  fail "replay from images.lock"
[ "$(images_in_runs "$WORK/replay")" = "docker://$REGISTRY/test/moving@$old" ] ||
  fail "the replay did not run on the locked digest: $(images_in_runs "$WORK/replay")"
# The same run ids as the first run: the lock reproduces the plan, not only the bytes.
run_ids() {  # the run ids of the first N records of a results.jsonl
  python3 -c 'import json, sys
print(sorted(json.loads(l)["run_id"] for l in open(sys.argv[1]).readlines()[:int(sys.argv[2])]))' "$1" "$2"
}
[ "$(run_ids "$WORK/replay/results.jsonl" 2)" = "$(run_ids "$R/results.jsonl" 2)" ] ||
  fail "the replay's run ids differ from the first run's"

# A malformed lock is refused before anything runs.
echo '{"schema": "evalbox.images-lock.v1", "images": {"x": "md5:0"}}' >"$WORK/bad.lock"
rc=0
"$EVALBOX" run "$WORK/suite/suite.yaml" --results "$WORK/bad" --images-lock "$WORK/bad.lock" \
  >"$WORK/bad.out" 2>&1 || rc=$?
[ "$rc" = 64 ] || fail "a malformed images.lock: exit $rc"
grep -q "bad.lock" "$WORK/bad.out" || fail "the error does not name the lock: $(cat "$WORK/bad.out")"
echo "PASS registry_runs"
