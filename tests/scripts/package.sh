#!/bin/bash
# scripts/package: the Debian package installs and evalbox runs from where it was installed
# (its helper found beside it, not in the build tree), `cmake --install` gives the same, and
# the OCI image layout holds what its index says: every blob under its digest, the manifest's
# config and layers, the config's diff_ids those of the uncompressed layers, and a root file
# system in which the packaged evalbox runs and dpkg knows it is installed. Then a real
# container runtime starts the image, offline: podman runs the packaged `evalbox doctor`, and
# with the security context docs/scale-out.md gives a Kubernetes pod, a sandboxed command;
# without each part of that context, the failure the docs describe.
# usage: package.sh SOURCE_DIR BUILD_DIR EVALBOX_HELPER
set -euo pipefail
src=$1 build=$2 build_helper=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/evalbox-package-XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
skip() {
  if [ "${EVALBOX_REQUIRE_ISOLATION:-0}" = 1 ]; then
    echo "FAIL: $1 (EVALBOX_REQUIRE_ISOLATION=1: this test may not skip)" >&2; exit 1
  fi
  echo "SKIP: $1" >&2; exit 77
}
[ "$(id -u)" = 0 ] || skip "needs root (dpkg --root, chroot, mounts)"

set +e
EVALBOX_BUILD_DIR=$build "$src/scripts/package" --no-build --out "$work/pkg" >"$work/out" 2>"$work/err"
rc=$?
set -e
[ "$rc" = 3 ] && skip "the Debian mirror is unreachable (mmdebstrap)"
[ "$rc" = 0 ] || { cat "$work/err" >&2; fail "scripts/package exited $rc"; }
deb=$(ls "$work"/pkg/evalbox_*_amd64.deb)
[ "$(dpkg-deb -f "$deb" Package)" = evalbox ] || fail "the package is not named evalbox"
dpkg-deb -c "$deb" >"$work/contents"
grep -q '\./usr/bin/evalbox$' "$work/contents" || fail "no /usr/bin/evalbox in the package"
grep -q '\./usr/bin/evalbox-sandbox$' "$work/contents" || fail "no helper in the package"
grep -q '\./usr/share/evalbox/examples/suite.yaml$' "$work/contents" || fail "no examples"

# evalbox run from a prefix, with the build tree's helper hidden: it must use the one beside it.
mkdir -p "$work/ws"
echo hello >"$work/ws/a.txt"
from_prefix() {  # from_prefix BIN_DIR: doctor, then one command in the sandbox
  env -u EVALBOX_HELPER EVALBOX_STATE_DIR="$work/state" \
    unshare --mount --propagation private sh -c '
    mount -t tmpfs none "$(dirname "$1")" || exit 90
    "$2/evalbox" doctor >/dev/null || exit 91
    exec "$2/evalbox" sandbox exec --workspace "$3" -- /bin/cat a.txt' \
    sh "$build_helper" "$1" "$work/ws"
}
root=$work/root
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates"
touch "$root/var/lib/dpkg/status"
dpkg --root="$root" --force-depends -i "$deb" >"$work/dpkg.log" 2>&1 ||
  { cat "$work/dpkg.log" >&2; fail "dpkg -i failed"; }
out=$(from_prefix "$root/usr/bin") ||
  fail "evalbox from the installed package failed ($?)"
[ "$out" = hello ] || fail "unexpected output from the installed evalbox: $out"
cmake --install "$build" --prefix "$work/prefix" >/dev/null
out=$(from_prefix "$work/prefix/bin") ||
  fail "evalbox from cmake --install failed ($?)"
[ "$out" = hello ] || fail "unexpected output from cmake --install's evalbox: $out"

# The OCI layout, checked against its own digests, then unpacked and run.
python3 - "$work/pkg/evalbox-oci" "$work/rootfs" <<'PY'
import gzip, hashlib, json, os, sys, tarfile
layout, rootfs = sys.argv[1], sys.argv[2]
def blob(digest):
    algo, hexd = digest.split(":")
    assert algo == "sha256", digest
    data = open(os.path.join(layout, "blobs", algo, hexd), "rb").read()
    assert hashlib.sha256(data).hexdigest() == hexd, "blob %s does not match its digest" % digest
    return data
assert json.load(open(os.path.join(layout, "oci-layout"))) == {"imageLayoutVersion": "1.0.0"}
index = json.load(open(os.path.join(layout, "index.json")))
assert index["schemaVersion"] == 2 and len(index["manifests"]) == 1, index
desc = index["manifests"][0]
assert desc["mediaType"] == "application/vnd.oci.image.manifest.v1+json"
assert desc["annotations"]["org.opencontainers.image.ref.name"] == "0.1.0"
raw = blob(desc["digest"])
assert len(raw) == desc["size"]
manifest = json.loads(raw)
assert manifest["schemaVersion"] == 2
cfg_raw = blob(manifest["config"]["digest"])
assert len(cfg_raw) == manifest["config"]["size"]
config = json.loads(cfg_raw)
assert config["os"] == "linux" and config["architecture"] == "amd64"
layers = manifest["layers"]
assert len(layers) == len(config["rootfs"]["diff_ids"]) == 2
os.makedirs(rootfs)
for layer, diff_id in zip(layers, config["rootfs"]["diff_ids"]):
    assert layer["mediaType"] == "application/vnd.oci.image.layer.v1.tar+gzip"
    data = blob(layer["digest"])
    assert len(data) == layer["size"]
    tar = gzip.decompress(data)
    assert "sha256:" + hashlib.sha256(tar).hexdigest() == diff_id, "diff_id of " + layer["digest"]
    path = os.path.join(rootfs, "..", "layer.tar")
    open(path, "wb").write(tar)
    with tarfile.open(path) as t:  # built here, no whiteouts: unpacked in order
        t.extractall(rootfs, filter=lambda m, p: m if not m.isdev() else None)
    os.unlink(path)
status = open(os.path.join(rootfs, "var/lib/dpkg/status")).read()
assert "Package: evalbox\nStatus: install ok installed" in status, "dpkg does not know evalbox"
assert "Package: python3\n" in status and "Package: git\n" in status
print("oci layout: ok")
PY
chroot "$work/rootfs" /usr/bin/evalbox --version | grep -q '^evalbox 0.1.0$' ||
  fail "the image's evalbox does not run"
chroot "$work/rootfs" /usr/bin/evalbox validate /usr/share/evalbox/examples/suite.yaml >/dev/null ||
  fail "the image's evalbox cannot load its example suite"
[ -x "$work/rootfs/usr/bin/evalbox-sandbox" ] || fail "no helper in the image"

# ---- the image in a container runtime: podman, offline ----
# Its storage is the test's own (never the host's image store), the image comes from the
# archive scripts/package wrote (never from a registry), and the containers have no network.
# runc, not podman's default crun: crun refuses a host whose cgroup v2 hierarchy holds a
# controller while v1 holds the others ("cgroups in hybrid mode not supported"), as this one
# does. Modest limits are given explicitly: podman otherwise raises RLIMIT_NOFILE and
# RLIMIT_NPROC to its defaults, which needs CAP_SYS_RESOURCE (root here may lack it).
for tool in podman runc; do
  command -v $tool >/dev/null || skip "$tool is not installed (scripts/bootstrap --tests)"
done
podman=(podman --root "$work/podman/root" --runroot "$work/podman/run" --storage-driver vfs
        --cgroup-manager cgroupfs --events-backend file --runtime "$(command -v runc)")
archive=$(ls "$work"/pkg/evalbox-oci-*.tar)
"${podman[@]}" load -q -i "$archive" >"$work/load" 2>&1 || { cat "$work/load" >&2; fail "podman load"; }
image=$("${podman[@]}" images -q | head -1)
[ -n "$image" ] || fail "podman load gave no image"
run() {  # run PODMAN_RUN_OPTIONS... -- COMMAND...: output in $work/out, status in $rc
  local opts=()
  while [ "$1" != -- ]; do opts+=("$1"); shift; done
  shift
  set +e
  timeout 120 "${podman[@]}" run --rm --network none --pull never \
    --ulimit nofile=1024:1024 --ulimit nproc=4096:4096 \
    "${opts[@]}" "$image" "$@" >"$work/out" 2>&1
  rc=$?
  set -e
}
# The binary that runs is the package's: the same bytes as /usr/bin/evalbox in the .deb.
want=$(dpkg-deb --fsys-tarfile "$deb" | tar -xO ./usr/bin/evalbox | sha256sum | cut -d' ' -f1)
run -- sh -c 'sha256sum "$(command -v evalbox)"; evalbox --version'
[ "$rc" = 0 ] || { cat "$work/out" >&2; fail "podman could not start the image ($rc)"; }
grep -q "^$want  /usr/bin/evalbox$" "$work/out" || { cat "$work/out" >&2; fail "not the packaged evalbox"; }
grep -qx 'evalbox 0.1.0' "$work/out" || { cat "$work/out" >&2; fail "evalbox --version in the image"; }
# `evalbox doctor`, the image started with no more than a user: the package's report of what
# the container allows.
run --user 1000:1000 -- evalbox doctor
grep -q '^evalbox doctor — kernel .*, running as uid 1000$' "$work/out" ||
  { cat "$work/out" >&2; fail "no doctor report from the image"; }
grep -q '^  ok   landlock ' "$work/out" || { cat "$work/out" >&2; fail "doctor's feature lines"; }
# The pod security context of docs/scale-out.md, less hostUsers (a user namespace for the
# container, which needs subordinate ids the test does not set up): doctor passes and a
# command runs in evalbox's sandbox inside the container.
base=(--user 1000:1000 --cap-drop ALL --security-opt no-new-privileges)
unconfined=(--security-opt seccomp=unconfined)
unmasked=(--security-opt unmask=ALL)
in_sandbox='mkdir -p /tmp/ws && echo from-the-sandbox >/tmp/ws/a &&
  EVALBOX_STATE_DIR=/tmp/state evalbox sandbox exec --workspace /tmp/ws -- /bin/cat a'
run "${base[@]}" "${unconfined[@]}" "${unmasked[@]}" -- sh -c "evalbox doctor && $in_sandbox"
[ "$rc" = 0 ] || { cat "$work/out" >&2; fail "the documented security context: exit $rc"; }
grep -q '^The default sandbox can run on this host\.$' "$work/out" || fail "doctor in the documented context"
grep -qx 'from-the-sandbox' "$work/out" || { cat "$work/out" >&2; fail "no output from the sandbox"; }
# Without procMount: Unmasked, the runtime's masks over /proc stop every run at its /proc.
run "${base[@]}" "${unconfined[@]}" -- sh -c "$in_sandbox"
[ "$rc" = 125 ] && grep -q 'proc /proc: EPERM' "$work/out" ||
  { cat "$work/out" >&2; fail "masked /proc: exit $rc"; }
# Without an unconfined seccomp profile: podman's default profile lets the namespaces be made
# (doctor passes) but refuses what only CAP_SYS_ADMIN may do, sethostname among it.
run "${base[@]}" "${unmasked[@]}" -- sh -c "$in_sandbox"
[ "$rc" = 125 ] && grep -q 'step sethostname: EPERM' "$work/out" ||
  { cat "$work/out" >&2; fail "the runtime's default seccomp profile: exit $rc"; }

# ---- evalbox k8s's Jobs, as pods of this image ----
# The manifests of `evalbox k8s` for the example suite in 2 shards, each pod started the way a
# kubelet would: its command, env and volumes, and its security context translated field by
# field to podman's flags (a field the translation does not know fails the test, so a change
# to the manifest's context is tried here before it is documented). Not translated: hostUsers
# (a user namespace per pod needs subordinate ids the test does not set up) and AppArmor (this
# host has none).
"$root/usr/bin/evalbox" k8s "$root/usr/share/evalbox/examples/suite.yaml" --shards 2 \
  --image "$image" --suite-in-pod /usr/share/evalbox/examples/suite.yaml -j 2 \
  --out "$work/k8s" >/dev/null 2>&1 || fail "evalbox k8s"
pod_args() {  # pod_args MANIFEST VOLUME_ROOT: podman run options, then -- and argv, NUL-separated
  python3 - "$@" <<'PY'
import os, sys, yaml
manifest, volumes = sys.argv[1:3]
job = yaml.safe_load(open(manifest))
pod = job["spec"]["template"]["spec"]
(c,) = pod["containers"]
out = []
psc, csc = pod.get("securityContext", {}), c.get("securityContext", {})
known_pod = {"runAsUser", "runAsGroup", "fsGroup", "seccompProfile", "appArmorProfile"}
known_container = {"allowPrivilegeEscalation", "capabilities", "procMount", "runAsNonRoot"}
assert set(psc) <= known_pod, "pod securityContext: %s" % (set(psc) - known_pod)
assert set(csc) <= known_container, "container securityContext: %s" % (set(csc) - known_container)
assert set(pod) <= {"containers", "hostUsers", "restartPolicy", "securityContext", "volumes"}, pod
uid, gid = psc["runAsUser"], psc.get("runAsGroup", psc["runAsUser"])
assert not csc.get("runAsNonRoot") or uid != 0
out += ["--user", "%d:%d" % (uid, gid)]
if "fsGroup" in psc:
    out += ["--group-add", str(psc["fsGroup"])]
if psc.get("seccompProfile", {}).get("type") == "Unconfined":
    out += ["--security-opt", "seccomp=unconfined"]
for cap in csc.get("capabilities", {}).get("drop", []):
    out += ["--cap-drop", cap]
assert not csc.get("capabilities", {}).get("add"), "capabilities added"
if csc.get("allowPrivilegeEscalation") is False:
    out += ["--security-opt", "no-new-privileges"]
if csc.get("procMount") == "Unmasked":
    out += ["--security-opt", "unmask=ALL"]
for e in c.get("env", []):
    out += ["-e", "%s=%s" % (e["name"], e["value"])]
claims = {v["name"]: v for v in pod.get("volumes", [])}
for m in c.get("volumeMounts", []):
    host = os.path.join(volumes, m["name"])
    os.makedirs(host, exist_ok=True)
    os.chown(host, uid, gid)
    out += ["-v", "%s:%s" % (host, m["mountPath"])]
out += ["--"] + c["command"]
sys.stdout.write("\0".join(out) + "\0")
PY
}
pod() {  # pod MANIFEST INDEX: runs the pod of that index (all pods share the results claim)
  rm -rf "$work/volumes/state"  # an emptyDir: new for every pod
  mapfile -d '' -t args < <(pod_args "$1" "$work/volumes")
  [ ${#args[@]} -gt 2 ] || fail "could not translate $1"
  run -e "JOB_COMPLETION_INDEX=$2" "${args[@]}"
  cat "$work/out" >>"$work/pods.log"
}
for k in 0 1; do
  pod "$work/k8s/evalbox-examples.yaml" $k
  [ "$rc" = 0 ] || { cat "$work/pods.log" >&2; fail "the pod of shard $k exited $rc"; }
done
pod "$work/k8s/evalbox-examples-merge.yaml" 0
[ "$rc" = 0 ] || { cat "$work/pods.log" >&2; fail "the merge pod exited $rc"; }
merged=$work/volumes/results/examples
python3 - "$merged" <<'PY' || { cat "$work/pods.log" >&2; fail "the pods' merged results"; }
import json, os, sys
d = sys.argv[1]
plan = json.load(open(os.path.join(d, "plan.json")))
assert plan["merged"] == [0, 1], plan["merged"]
summary = json.load(open(os.path.join(d, "summary.json")))
assert summary["runs"]["total"] == 24 and "missing" not in summary["runs"], summary["runs"]
ids = [json.loads(l)["run_id"] for l in open(os.path.join(d, "results.jsonl"))]
assert len(ids) == len(set(ids)) == 24, len(ids)
verdicts = {}
for l in open(os.path.join(d, "results.jsonl")):
    r = json.loads(l)
    verdicts.setdefault(r["candidate"]["id"], []).append(r["verdict"])
assert set(verdicts["oracle"]) == {"passed"}, verdicts["oracle"]
assert "passed" not in verdicts["noop"], verdicts["noop"]
assert verdicts["scripted"].count("passed") == 3, verdicts["scripted"]  # it solves 3 of the 6
PY
echo "package: deb, cmake --install, OCI layout, podman and the k8s pods ok"
