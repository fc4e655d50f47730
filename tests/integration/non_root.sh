# Without root evalbox still isolates (its own user namespace; no idmap, overlay, tmpfs quota
# or cgroups: the workspace is copied and the record says what was not enforced) and a suite
# grades exactly as it does as root: the example suite as `nobody` gives the same verdicts
# (oracle 6/6, noop 0/6, scripted 3/6), every run completes, nothing is left behind.
source "$(dirname "$0")/lib.sh"
need_isolation
# `nobody` runs copies of the binaries, side by side in a directory of this test's own: the
# build tree may be out of its reach (a clone in a 0700 directory such as `mktemp -d` under
# /root), and side by side is how an installed evalbox finds its helper (no EVALBOX_HELPER).
as_nobody() {
  setpriv --reuid=65534 --regid=65534 --clear-groups \
    env -u EVALBOX_HELPER HOME="$NR" XDG_STATE_HOME="$NR/state" EVALBOX_STATE_DIR= "$@"
}
# The work directory is made where TMPDIR says; if that is closed to nobody too (TMPDIR in a
# private directory), a directory of its own under /tmp, removed with the rest.
chmod 0711 "$WORK"  # others may pass through, not list
BASE=$WORK
if ! setpriv --reuid=65534 --regid=65534 --clear-groups test -x "$WORK"; then
  BASE=$(mktemp -d /tmp/evalbox-nr-XXXXXX)
  chmod 0711 "$BASE"
  trap 'cleanup; rm -rf "$BASE"' EXIT
fi
NR=$BASE/nr
BIN=$BASE/bin
mkdir -p "$NR" "$BIN"
chown 65534:65534 "$NR"
install -m 0755 "$EVALBOX" "$BIN/evalbox"
install -m 0755 "$EVALBOX_HELPER" "$BIN/evalbox-sandbox"
NB_EVALBOX=$BIN/evalbox
as_nobody test -x "$NB_EVALBOX" || fail "nobody cannot reach $NB_EVALBOX"
if ! as_nobody unshare -Ur true 2>/dev/null; then
  # Host policy (kernel.unprivileged_userns_clone=0, user.max_user_namespaces=0), not evalbox.
  [ "${EVALBOX_REQUIRE_ISOLATION:-}" = 1 ] &&
    fail "this host gives unprivileged users no user namespaces (required under EVALBOX_REQUIRE_ISOLATION=1)"
  echo "SKIP: this host gives unprivileged users no user namespaces"; exit 0
fi
cp -r "$SRC/fixtures/examples" "$NR/ex"
chown -R 65534:65534 "$NR/ex"

set +e
as_nobody "$NB_EVALBOX" run "$NR/ex/suite.yaml" --results "$NR/res" >"$WORK/out" 2>"$WORK/err"
rc=$?
set -e
# 1: some task failed (noop and half of scripted, by design); anything else is not that.
[ "$rc" = 1 ] || { tail -20 "$WORK/err" >&2; fail "evalbox run as nobody exited $rc"; }
python3 - "$NR/res/results.jsonl" <<'PY'
import collections, json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == 24, len(rows)
passed = collections.Counter()
for r in rows:
    assert r["execution"]["status"] != "error", (r["candidate"]["id"], r["fixture"]["id"], r["execution"])
    assert r["grading"]["status"] == "completed", r["grading"]
    passed[r["candidate"]["id"]] += r["verdict"] == "passed"
assert dict(passed) == {"oracle": 6, "scripted": 3, "loop": 3, "noop": 0}, passed
PY

# One command: its exit code comes through, the host workspace is not written.
mkdir -p "$NR/ws" && echo hello >"$NR/ws/a.txt" && chown -R 65534:65534 "$NR/ws"
set +e
out=$(as_nobody "$NB_EVALBOX" sandbox exec --workspace "$NR/ws" -- /bin/sh -c 'cat a.txt; id -u; echo x > b.txt; exit 7' 2>"$WORK/err-exec")
rc=$?
set -e
[ "$rc" = 7 ] || { cat "$WORK/err-exec" >&2; fail "sandbox exec as nobody exited $rc, not 7"; }
[ "$out" = "$(printf 'hello\n0')" ] || fail "unexpected output: $out"
[ ! -e "$NR/ws/b.txt" ] || fail "the host workspace was written"
# The record says what was enforced, and by what: no cgroup, no disk quota (no tmpfs).
as_nobody "$NB_EVALBOX" sandbox exec --workspace "$NR/ws" --record "$NR/rec.json" -- /bin/true
python3 - "$NR/rec.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))["mechanisms"]
assert m["cgroup"] == "none", m["cgroup"]
assert m["limits"]["memory_bytes"]["by"] == [], m["limits"]["memory_bytes"]
assert m["limits"]["disk_bytes"]["by"] == ["RLIMIT_FSIZE"], m["limits"]["disk_bytes"]
PY

# An image fixture, as nobody: the store is nobody's, the overlay is mounted inside the
# sandbox's own user namespace (userxattr), the workspace (the image's /opt/data) is copied.
BB=$("$SRC/tests/images/make-images" busybox)
mkdir -p "$NR/img/images"
cp -r "$SRC/tests/integration/image-fixtures/busybox-workdir" "$NR/img/"
ln -s "$BB" "$NR/img/images/busybox"
chown -R 65534:65534 "$NR/img"
as_nobody "$NB_EVALBOX" fixture test "$NR/img/busybox-workdir" >"$WORK/out-img" 2>"$WORK/err-img" ||
  { cat "$WORK/out-img" "$WORK/err-img" >&2; fail "fixture test of an image fixture as nobody"; }
grep -q "^ok       busybox-workdir" "$WORK/out-img" || fail "image fixture as nobody: $(cat "$WORK/out-img")"
out=$(as_nobody "$NB_EVALBOX" sandbox exec --image "oci:$BB/oci:latest" -- sh -c 'id -u; grep ^ID= /etc/os-release; echo x > /bin/mine && echo wrote' 2>"$WORK/err-img2") ||
  { cat "$WORK/err-img2" >&2; fail "sandbox exec --image as nobody"; }
[ "$out" = "$(printf '0\nID=evalbox-busybox\nwrote')" ] || fail "sandbox exec --image as nobody: $out"
[ "$(stat -c %u "$NR/state/evalbox/images/store.json")" = 65534 ] || fail "the store is not nobody's"

# A registry image, as nobody: `image pull` from the test registry (tests/registry/registry-env,
# on 127.0.0.1, TLS with its test CA) into a store of nobody's own, every file of it nobody's,
# then run from there with `sandbox exec --image docker://...`.
command -v docker-registry >/dev/null ||
  fail "docker-registry is missing (scripts/bootstrap --tests installs it)"
REGENV=$SRC/tests/registry/registry-env
trap '"$REGENV" stop "$BASE/reg" >/dev/null 2>&1 || true; cleanup; [ "$BASE" = "$WORK" ] || rm -rf "$BASE"' EXIT
"$REGENV" start "$BASE/reg" 2>"$WORK/err-reg" && "$REGENV" push "$BASE/reg" 2>>"$WORK/err-reg" ||
  { cat "$WORK/err-reg" >&2; fail "starting the test registry"; }
# shellcheck source=/dev/null
. "$BASE/reg/env"
install -m 0644 "$REGISTRY_CA" "$NR/registry-ca.pem"
install -m 0644 /dev/null "$NR/registries.conf"
as_nobody_pulling() {
  as_nobody env EVALBOX_STATE_DIR="$NR/pulled" EVALBOX_REGISTRY_CA="$NR/registry-ca.pem" \
    EVALBOX_REGISTRIES_CONF="$NR/registries.conf" "$@"
}
as_nobody_pulling "$NB_EVALBOX" image pull "$REGISTRY/test/busybox" >"$WORK/out-pull" 2>"$WORK/err-pull" ||
  { cat "$WORK/err-pull" >&2; fail "image pull as nobody"; }
grep -q "downloaded 2 layer(s)" "$WORK/out-pull" || fail "image pull as nobody: $(cat "$WORK/out-pull")"
out=$(as_nobody_pulling "$NB_EVALBOX" sandbox exec --image "docker://$REGISTRY/test/busybox" -- \
  sh -c 'id -u; grep ^ID= /etc/os-release' 2>"$WORK/err-pull2") ||
  { cat "$WORK/err-pull2" >&2; fail "sandbox exec --image docker://... as nobody"; }
[ "$out" = "$(printf '0\nID=evalbox-busybox')" ] || fail "the pulled image's run as nobody: $out"
[ -z "$(find "$NR/pulled/images" ! -user 65534 -print -quit)" ] ||
  fail "not nobody's in the pulled store: $(find "$NR/pulled/images" ! -user 65534 | head -5)"
"$REGENV" stop "$BASE/reg" || fail "stopping the test registry"
EVALBOX_STATE_DIR=$NR/pulled no_residue

EVALBOX_STATE_DIR=$NR/state/evalbox
no_residue
echo "non-root: ok"
