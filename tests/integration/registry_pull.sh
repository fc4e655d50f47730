# `evalbox image pull` against a real registry (tests/registry/registry-env: Debian's
# docker-registry on 127.0.0.1, TLS with a test CA), as a user types it: an anonymous pull that
# runs, a second image on the same base that downloads only its own layer, a stored image that
# runs without asking the registry, a multi-platform index, a tag that moves, Ctrl-C mid-layer,
# two pulls of one image at once, mirrors and aliases from registries.conf, then Basic and token
# auth (auth files, a Docker credential helper, a token that lapses mid-pull). What the registry
# was asked is read from its access log (one line per request; evalbox's say "evalbox").
# Everything runs on 127.0.0.1.
source "$(dirname "$0")/lib.sh"
for tool in docker-registry skopeo htpasswd curl; do
  command -v "$tool" >/dev/null || fail "$tool is missing (scripts/bootstrap --tests installs it)"
done
need_isolation
REGENV=$SRC/tests/registry/registry-env
REAL_HOME=${HOME:-/root}
regenv() { HOME=$REAL_HOME "$REGENV" "$@"; }

# Hermetic: no credentials, registries.conf, mirror or proxy of the host's.
export HOME=$WORK/home
mkdir -p "$HOME"
unset XDG_RUNTIME_DIR DOCKER_CONFIG REGISTRY_AUTH_FILE EVALBOX_REGISTRY_MIRROR \
  EVALBOX_REGISTRY_INSECURE HTTPS_PROXY https_proxy HTTP_PROXY http_proxy ALL_PROXY all_proxy \
  NO_PROXY no_proxy
: >"$WORK/registries.conf"
export EVALBOX_REGISTRIES_CONF=$WORK/registries.conf
export EVALBOX_REGISTRY_TIMEOUT=20s

# What this test starts in the background (pulls, the throttling relay), stopped on exit with
# the registries.
BG=()
stop_all() {
  local pid d
  for pid in "${BG[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  for pid in "${BG[@]}"; do wait "$pid" 2>/dev/null || true; done
  for d in "$WORK"/reg-*; do
    if [ -d "$d" ]; then regenv stop "$d" >/dev/null 2>&1 || true; fi
  done
}
trap 'stop_all; cleanup' EXIT

# start_registry NAME [registry-env start options]: a registry of its own under $WORK/reg-NAME
# with the test images pushed; its env (REGISTRY, REGISTRY_LOG, ...) read into this shell.
start_registry() {
  local name=$1; shift
  REG=$WORK/reg-$name
  regenv start "$REG" "$@" 2>"$WORK/regenv.err" || { cat "$WORK/regenv.err" >&2; fail "registry-env start $*"; }
  regenv push "$REG" 2>"$WORK/regenv.err" || { cat "$WORK/regenv.err" >&2; fail "registry-env push"; }
  # shellcheck source=/dev/null
  . "$REG/env"
  export EVALBOX_REGISTRY_CA=$REGISTRY_CA
}
stop_registry() { regenv stop "$REG" || fail "registry-env stop $REG"; }
digest_of() {  # the manifest digest registry-env pushed NAME:TAG as
  python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$REG/digests.json" "$1"
}
fresh_store() { export EVALBOX_STATE_DIR=$WORK/$1; }
layers_dir() { echo "$EVALBOX_STATE_DIR/images/layers"; }

# The registry's access log since `mark`: evalbox's requests only. The log line is written once
# the answer is sent, which can be a moment after the client has it: `settle` first.
mark() { MARK=$(lines "$REGISTRY_LOG"); }
settle() { sleep 0.5; }
since_mark() { tail -n +$((MARK + 1)) "$REGISTRY_LOG" | grep -E '^127\.0\.0\.1 .*"evalbox[^"]*"$' || true; }
# The digests of the blobs evalbox GET (status 200) since `mark`, one per request.
blob_gets() {
  since_mark | sed -n 's|.*"GET /v2/[^ ]*/blobs/\(sha256:[0-9a-f]*\) HTTP/[0-9.]*" 200 .*|\1|p'
}
manifest_gets() { since_mark | grep -c '"GET /v2/[^ ]*/manifests/' || true; }
# pull_ok WHAT NAME [image pull options...]: `evalbox image pull NAME` succeeds; its output in
# $WORK/pull.out and .err.
pull_ok() {
  local what=$1; shift
  expect_exit 0 "$what" "$WORK/pull.out" "$WORK/pull.err" "$EVALBOX" image pull "$@"
}
json_get() {  # FILE PYTHON-EXPR over `d`
  python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}
# wait_exit PID SECONDS: waits for PID (our child) at most SECONDS, its status in $rc.
wait_exit() {
  local pid=$1 i
  for ((i = 0; i < $2 * 10; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$pid" 2>/dev/null && { kill -KILL "$pid"; wait "$pid" || true; fail "pid $pid still running after $2 s"; }
  rc=0
  wait "$pid" || rc=$?
}

# A TCP relay on 127.0.0.1 to the registry that sends its bytes on at RATE bytes/s per
# connection (evalbox never sends loopback traffic through HTTPS_PROXY): a pull through
# $SLOW (127.0.0.1:PORT, the registry's certificate is for 127.0.0.1) is slow enough to
# interrupt mid-layer, to overlap with another, or to outlive a token. One line per connection
# in $WORK/relay.log.
cat >"$WORK/relay.py" <<'PY'
import os, socket, sys, threading, time
rate, target, port_file, log = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen(32)
def pipe(src, dst, limit):
    try:
        while True:
            data = src.recv(16384)
            if not data:
                break
            dst.sendall(data)
            if limit:
                time.sleep(len(data) / limit)
    except OSError:
        pass
    for s in (src, dst):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
def handle(c):
    u = socket.create_connection(("127.0.0.1", target))
    with open(log, "a") as f:
        f.write("connection\n")
    threading.Thread(target=pipe, args=(c, u, 0), daemon=True).start()
    pipe(u, c, rate)
with open(port_file + ".tmp", "w") as f:
    f.write(str(srv.getsockname()[1]))
os.rename(port_file + ".tmp", port_file)
while True:
    conn, _ = srv.accept()
    threading.Thread(target=handle, args=(conn,), daemon=True).start()
PY
RELAY_PID=''
start_relay() {  # RATE: sets SLOW (127.0.0.1:PORT, relayed to $REGISTRY)
  stop_relay
  rm -f "$WORK/relay.port"
  : >"$WORK/relay.log"
  python3 "$WORK/relay.py" "$1" "${REGISTRY#127.0.0.1:}" "$WORK/relay.port" "$WORK/relay.log" \
    2>"$WORK/relay.err" &
  RELAY_PID=$!
  BG+=("$RELAY_PID")
  for _ in $(seq 1 100); do [ -s "$WORK/relay.port" ] && break; sleep 0.05; done
  [ -s "$WORK/relay.port" ] || { cat "$WORK/relay.err" >&2; fail "the throttling relay did not start"; }
  SLOW=127.0.0.1:$(cat "$WORK/relay.port")
}
stop_relay() {
  [ -n "$RELAY_PID" ] || return 0
  kill "$RELAY_PID" 2>/dev/null || true
  wait "$RELAY_PID" 2>/dev/null || true
  RELAY_PID=''
}

start_registry anon
BB_DIGEST=$(digest_of test/busybox:latest)
BB_REF=docker://$REGISTRY/test/busybox:latest

# --- an anonymous pull, and the image runs ---------------------------------------------------
fresh_store state
pull_ok "anonymous pull of test/busybox" "$REGISTRY/test/busybox"
grep -qx "$BB_REF@$BB_DIGEST" "$WORK/pull.out" || fail "pull names no pinned reference: $(cat "$WORK/pull.out")"
grep -q "downloaded 2 layer(s) .*0 already present" "$WORK/pull.out" || fail "first pull: $(cat "$WORK/pull.out")"
grep -q "layer 1/2 .* downloading" "$WORK/pull.err" || fail "no per-layer progress: $(cat "$WORK/pull.err")"
BB_ID=$(sed -n 's/^image \(sha256:[0-9a-f]\{64\}\): .*/\1/p' "$WORK/pull.out")
[ -n "$BB_ID" ] || fail "no image id in: $(cat "$WORK/pull.out")"

mark
out=$("$EVALBOX" sandbox exec --image "docker://$REGISTRY/test/busybox" -- \
  /bin/busybox sh -c 'grep ^ID= /etc/os-release; /bin/busybox true && echo ran' 2>"$WORK/exec.err") ||
  { cat "$WORK/exec.err" >&2; fail "sandbox exec --image docker://$REGISTRY/test/busybox"; }
[ "$out" = "$(printf 'ID=evalbox-busybox\nran')" ] || fail "the pulled image's run: $out"
# Default policy (missing): the store answers, the registry is not asked.
settle
[ -z "$(since_mark)" ] || fail "sandbox exec of a stored image asked the registry: $(since_mark)"

"$EVALBOX" image ls >"$WORK/ls" || fail "image ls"
grep "^${BB_ID:7:12} " "$WORK/ls" | grep -qF "$BB_REF, docker://$REGISTRY/test/busybox@$BB_DIGEST" ||
  fail "image ls does not show the tag and its @sha256 form: $(cat "$WORK/ls")"

# `image pull` (policy always) of an image the store has: the manifest is asked again (has the
# tag moved?); no layer blob (the config, a small JSON naming the layers' diff_ids, may be).
mark
pull_ok "pull --json of a stored image" --json "$REGISTRY/test/busybox"
python3 - "$WORK/pull.out" "$BB_REF" "$BB_DIGEST" "$BB_ID" <<'PY' || fail "pull --json: $(cat "$WORK/pull.out")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["reference"] == sys.argv[2], d["reference"]
assert d["reference_digest"] == sys.argv[3], d["reference_digest"]
assert d["id"] == sys.argv[4], d["id"]
assert (d["layers_downloaded"], d["layers_present"], d["bytes_downloaded"]) == (0, 2, 0), d
assert d["config"]["os"] == "linux", d["config"]
PY
settle
[ "$(manifest_gets)" = 1 ] || fail "a pull of a stored image: manifest GETs: $(since_mark)"
[ -z "$(blob_gets | grep -vx "$BB_ID")" ] || fail "a pull of a stored image GETs a layer: $(since_mark)"

# --- an image on the same base downloads only its own layer ----------------------------------
mark
pull_ok "pull test/derived" "$REGISTRY/test/derived"
grep -q "downloaded 1 layer(s) .*2 already present" "$WORK/pull.out" || fail "test/derived: $(cat "$WORK/pull.out")"
DERIVED_ID=$(sed -n 's/^image \(sha256:[0-9a-f]\{64\}\): .*/\1/p' "$WORK/pull.out")
"$EVALBOX" image ls --json >"$WORK/ls.json"
own=$(python3 - "$WORK/ls.json" "$BB_ID" "$DERIVED_ID" <<'PY'
import json, sys
images = {i["id"]: i for i in json.load(open(sys.argv[1]))["images"]}
base, derived = images[sys.argv[2]]["layers"], images[sys.argv[3]]["layers"]
assert [l["diff_id"] for l in derived[:2]] == [l["diff_id"] for l in base], (base, derived)
print(derived[2]["digest"])
PY
) || fail "test/derived's record: $(cat "$WORK/ls.json")"
settle
layer_gets=$(blob_gets | grep -vx "$DERIVED_ID" || true)
[ "$layer_gets" = "$own" ] || fail "test/derived: layer blobs GET: '$layer_gets', expected only its own $own"
mark
out=$("$EVALBOX" sandbox exec --image "docker://$REGISTRY/test/derived" -- /bin/busybox cat /etc/derived 2>"$WORK/exec.err") ||
  { cat "$WORK/exec.err" >&2; fail "sandbox exec --image docker://$REGISTRY/test/derived"; }
[ -n "$out" ] || fail "/etc/derived is empty"
settle
[ -z "$(since_mark)" ] || fail "sandbox exec of stored test/derived asked the registry: $(since_mark)"

# --- a multi-platform index: this host's platform, or --platform's ---------------------------
case "$(uname -m)" in
  x86_64) host_arch=amd64 other_arch=arm64 ;;
  aarch64) host_arch=arm64 other_arch=amd64 ;;
  *) fail "test/multi holds linux/amd64 and linux/arm64 only; this host is $(uname -m)" ;;
esac
MULTI_DIGEST=$(digest_of test/multi:latest)
pull_ok "pull test/multi" --json "$REGISTRY/test/multi"
cp "$WORK/pull.out" "$WORK/multi-host.json"
pull_ok "pull test/multi --platform linux/$other_arch" --json --platform "linux/$other_arch" "$REGISTRY/test/multi"
cp "$WORK/pull.out" "$WORK/multi-other.json"
python3 - "$WORK/multi-host.json" "$WORK/multi-other.json" "$host_arch" "$other_arch" "$MULTI_DIGEST" "$BB_ID" <<'PY' ||
import json, sys
host, other = (json.load(open(f)) for f in sys.argv[1:3])
host_arch, other_arch, index, busybox = sys.argv[3:7]
assert host["config"]["architecture"] == host_arch, host["config"]
assert other["config"]["architecture"] == other_arch, other["config"]
# Both came through the index; each through its own platform's manifest.
assert host["reference_digest"] == other["reference_digest"] == index, (host, other)
assert host["id"] != other["id"] and set(host["manifest_digests"]).isdisjoint(other["manifest_digests"])
# linux/amd64 is busybox's own manifest; linux/arm64 has the same layers under another config:
# nothing to download either way.
if host_arch == "amd64":
    assert host["id"] == busybox, host["id"]
assert other["layers_downloaded"] == 0 and [l["diff_id"] for l in other["layers"]] == [l["diff_id"] for l in host["layers"]], other
PY
  fail "test/multi: $(cat "$WORK/multi-host.json" "$WORK/multi-other.json")"
# The index's digest names both images now; a run pinned to it gets this host's, from the store.
host_id=$(json_get "$WORK/multi-host.json" 'd["id"]')
other_id=$(json_get "$WORK/multi-other.json" 'd["id"]')
mark
"$EVALBOX" sandbox exec --record "$WORK/multi.rec" --image "docker://$REGISTRY/test/multi@$MULTI_DIGEST" -- \
  /bin/busybox true 2>"$WORK/exec.err" || { cat "$WORK/exec.err" >&2; fail "a run pinned to test/multi's index"; }
[ "$(json_get "$WORK/multi.rec" 'd["mechanisms"]["root"]["image"]')" = "$host_id" ] ||
  fail "a run pinned to test/multi's index got $(json_get "$WORK/multi.rec" 'd["mechanisms"]["root"]["image"]'), not this host's $host_id"
settle
[ -z "$(since_mark)" ] || fail "a run pinned to a stored index asked the registry: $(since_mark)"
# The other platform's image cannot run here: removed again; the layers it shares stay.
"$EVALBOX" image rm "$other_id" >"$WORK/rm.out" || fail "image rm $other_id"
grep -qx "removed $other_id" "$WORK/rm.out" || fail "image rm: $(cat "$WORK/rm.out")"
[ "$(find "$(layers_dir)" -mindepth 1 -maxdepth 1 | wc -l)" = 3 ] || fail "after rm: $(ls -a "$(layers_dir)")"

# --- a tag that moves -------------------------------------------------------------------------
pull_ok "pull test/moving:v1" "$REGISTRY/test/moving:v1"
grep -q "^image $BB_ID: " "$WORK/pull.out" || fail "test/moving:v1 is busybox's image: $(cat "$WORK/pull.out")"
OLD_DIGEST=$BB_DIGEST
regenv retag "$REG" test/moving:v1 test/derived:latest 2>"$WORK/regenv.err" || { cat "$WORK/regenv.err" >&2; fail "retag"; }
NEW_DIGEST=$(digest_of test/moving:v1)
[ "$NEW_DIGEST" != "$OLD_DIGEST" ] || fail "retag did not move test/moving:v1"
pull_ok "pull test/moving:v1 again" "$REGISTRY/test/moving:v1"
grep -qx "docker://$REGISTRY/test/moving:v1@$NEW_DIGEST" "$WORK/pull.out" || fail "moved tag: $(cat "$WORK/pull.out")"
grep -q "^image $DERIVED_ID: " "$WORK/pull.out" || fail "moved tag: not the new image: $(cat "$WORK/pull.out")"
"$EVALBOX" image ls --json >"$WORK/ls.json"
python3 - "$WORK/ls.json" "docker://$REGISTRY/test/moving" "$OLD_DIGEST" "$NEW_DIGEST" "$BB_ID" "$DERIVED_ID" <<'PY' ||
import json, sys
name, old, new, old_id, new_id = sys.argv[2:7]
refs = {i["id"]: i["references"] for i in json.load(open(sys.argv[1]))["images"]}
tagged = [i for i, r in refs.items() if name + ":v1" in r]
assert tagged == [new_id], ("the tag is on", tagged)
assert name + "@" + new in refs[new_id], refs[new_id]
assert name + "@" + old in refs[old_id], ("the old image lost its pinned reference", refs[old_id])
PY
  fail "image ls --json after the tag moved: $(cat "$WORK/ls.json")"
mark
"$EVALBOX" sandbox exec --image "docker://$REGISTRY/test/moving@$OLD_DIGEST" -- /bin/busybox test ! -e /etc/derived \
  2>"$WORK/exec.err" || { cat "$WORK/exec.err" >&2; fail "the old image by its pinned reference"; }
"$EVALBOX" sandbox exec --image "docker://$REGISTRY/test/moving:v1" -- /bin/busybox test -e /etc/derived \
  2>"$WORK/exec.err" || { cat "$WORK/exec.err" >&2; fail "the moved tag runs the new image"; }
settle
[ -z "$(since_mark)" ] || fail "running stored images asked the registry: $(since_mark)"

# --- Ctrl-C while a layer downloads -----------------------------------------------------------
# Through the relay at 1 MiB/s a connection, a 3.3 MiB layer takes seconds: SIGINT as soon as
# the first one starts lands mid-layer.
fresh_store state-int
start_relay $((1024 * 1024))
"$EVALBOX" image pull "$SLOW/test/five" >"$WORK/int.out" 2>"$WORK/int.err" &
pid=$!
BG+=("$pid")
for _ in $(seq 1 200); do grep -q downloading "$WORK/int.err" && break; sleep 0.05; done
grep -q downloading "$WORK/int.err" || fail "the pull of test/five never started a layer: $(cat "$WORK/int.err")"
kill -INT "$pid"
wait_exit "$pid" 20
[ "$rc" = 130 ] || fail "interrupted pull: exit $rc ($(cat "$WORK/int.err"))"
grep -q "interrupted; no partial layer was kept" "$WORK/int.err" || fail "interrupted pull: $(cat "$WORK/int.err")"
[ -s "$WORK/relay.log" ] || fail "the interrupted pull did not go through the throttling relay"
# Nothing of it stays: no temporary, no layer (none could finish at that rate), no lock file.
[ -z "$(find "$(layers_dir)" -mindepth 1 -maxdepth 1 -print -quit)" ] || fail "left in the store: $(ls -a "$(layers_dir)")"
[ -z "$(find "$EVALBOX_STATE_DIR/images/locks" -mindepth 1 -print -quit)" ] ||
  fail "lock files left: $(ls -a "$EVALBOX_STATE_DIR/images/locks")"
pull_ok "a pull after the interrupted one" "$REGISTRY/test/five"
grep -q "downloaded 5 layer(s)" "$WORK/pull.out" || fail "after Ctrl-C: $(cat "$WORK/pull.out")"

# --- two pulls of one image at once -----------------------------------------------------------
# What the store guarantees (store.h, locks/<hex>.unpack): a layer is unpacked under an
# exclusive lock, and a second importer of it waits for that lock, then finds the layer
# published and never opens its blob (a blob's GET is sent at its first read, inside the lock).
# So across both processes each layer blob is fetched exactly once, the layers downloaded add
# up to 5, and each process reports all 5 layers (downloaded or present). Each fetches the
# manifest (and at most once the config) itself. The relay (2 MiB/s a connection) makes the pulls overlap.
fresh_store state-two
start_relay $((2 * 1024 * 1024))
FIVE_DIGEST=$(digest_of test/five:latest)
mark
"$EVALBOX" image pull --json "$SLOW/test/five" >"$WORK/a.json" 2>"$WORK/a.err" &
pa=$!
BG+=("$pa")
"$EVALBOX" image pull --json "$SLOW/test/five" >"$WORK/b.json" 2>"$WORK/b.err" &
pb=$!
BG+=("$pb")
for _ in $(seq 1 200); do
  grep -q "5 layer(s), image" "$WORK/a.err" && grep -q "5 layer(s), image" "$WORK/b.err" && break
  sleep 0.05
done
kill -0 "$pa" 2>/dev/null && kill -0 "$pb" 2>/dev/null ||
  fail "the two pulls did not overlap: $(cat "$WORK/a.err" "$WORK/b.err")"
wait_exit "$pa" 60
[ "$rc" = 0 ] || fail "first concurrent pull: exit $rc: $(cat "$WORK/a.err")"
wait_exit "$pb" 60
[ "$rc" = 0 ] || fail "second concurrent pull: exit $rc: $(cat "$WORK/b.err")"
settle
python3 - "$WORK/a.json" "$WORK/b.json" "$FIVE_DIGEST" <(blob_gets) <<'PY' ||
import collections, json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
gets = collections.Counter(open(sys.argv[4]).read().split())
assert a["id"] == b["id"] and a["reference_digest"] == b["reference_digest"] == sys.argv[3]
layers = [l["digest"] for l in a["layers"]]
assert len(layers) == 5, layers
for d in layers:
    assert gets[d] == 1, ("layer blob", d, "fetched", gets[d], "times")
assert gets[a["id"]] <= 2 and sum(gets.values()) == 5 + gets[a["id"]], gets
assert a["layers_downloaded"] + b["layers_downloaded"] == 5, (a["layers_downloaded"], b["layers_downloaded"])
for p in (a, b):
    assert p["layers_downloaded"] + p["layers_present"] == 5, p
PY
  fail "concurrent pulls: $(blob_gets | sort | uniq -c)"
[ "$(manifest_gets)" = 2 ] || fail "concurrent pulls: manifest GETs: $(since_mark)"
[ "$(find "$(layers_dir)" -mindepth 1 -maxdepth 1 | wc -l)" = 5 ] || fail "concurrent pulls: $(ls -a "$(layers_dir)")"
stop_relay

# --- registries.conf: a mirror tried first, a failing mirror passed over, an alias ------------
fresh_store state-conf
cat >"$WORK/mirror.conf" <<EOF
[[registry]]
location = "mirror.invalid.test:1234"
[[registry.mirror]]
location = "$REGISTRY"
EOF
mark
trace=()
command -v strace >/dev/null && trace=(strace -f -qq -e trace=connect -o "$WORK/mirror.trace")
expect_exit 0 "pull through a mirror" "$WORK/pull.out" "$WORK/pull.err" \
  env EVALBOX_REGISTRIES_CONF="$WORK/mirror.conf" "${trace[@]}" "$EVALBOX" image pull mirror.invalid.test:1234/test/busybox
grep -qx "docker://mirror.invalid.test:1234/test/busybox:latest@$BB_DIGEST" "$WORK/pull.out" ||
  fail "mirror pull: $(cat "$WORK/pull.out")"
! grep -qi "failed\|trying the next" "$WORK/pull.err" || fail "the mirror was passed over: $(cat "$WORK/pull.err")"
settle
[ "$(manifest_gets)" = 1 ] && [ "$(blob_gets | wc -l)" = 3 ] || fail "the mirror ($REGISTRY) was not asked: $(since_mark)"
# The mirror answered: the registry's own name was never looked up (no DNS query) nor reached.
if [ ${#trace[@]} -gt 0 ]; then
  ! grep -q "htons(53)\|htons(1234)" "$WORK/mirror.trace" ||
    fail "the unreachable registry was tried: $(grep "htons(53)\|htons(1234)" "$WORK/mirror.trace")"
else
  echo "note: no strace here; the mirror's DNS check is left out"
fi
cat >"$WORK/badmirror.conf" <<EOF
[[registry]]
location = "$REGISTRY"
[[registry.mirror]]
location = "127.0.0.1:1"
EOF
expect_exit 0 "pull past a failing mirror" "$WORK/pull.out" "$WORK/pull.err" \
  env EVALBOX_REGISTRIES_CONF="$WORK/badmirror.conf" "$EVALBOX" image pull "$REGISTRY/test/derived"
grep -q "mirror 127.0.0.1:1 failed" "$WORK/pull.err" || fail "no word of the failing mirror: $(cat "$WORK/pull.err")"
printf '[aliases]\n"bb" = "%s/test/busybox"\n' "$REGISTRY" >"$WORK/alias.conf"
expect_exit 0 "pull an alias" "$WORK/pull.out" "$WORK/pull.err" \
  env EVALBOX_REGISTRIES_CONF="$WORK/alias.conf" "$EVALBOX" image pull bb
grep -qx "$BB_REF@$BB_DIGEST" "$WORK/pull.out" || fail "alias bb: $(cat "$WORK/pull.out")"
stop_registry

# --- authentication ---------------------------------------------------------------------------
# A fake Docker credential helper: says which server it was asked for, answers the credentials.
mkdir -p "$WORK/bin" "$WORK/docker"
# auth_checks WHAT: without credentials the pull fails (exit 2, the host's side: permission),
# naming the registry and every credential file read; with REGISTRY_AUTH_FILE, and with a
# credential helper named by DOCKER_CONFIG's credHelpers, it succeeds. Each success in a fresh
# store, so the layer blobs too need the credentials.
auth_checks() {
  local what=$1
  fresh_store "state-$what-none"
  expect_exit 2 "$what: a pull without credentials" "$WORK/$what-none.out" "$WORK/$what-none.err" \
    env REGISTRY_AUTH_FILE="$WORK/absent-auth.json" XDG_RUNTIME_DIR="$WORK/xdg" \
    "$EVALBOX" image pull "$REGISTRY/test/busybox"
  for f in "$REGISTRY" "files read" "$WORK/absent-auth.json" "$WORK/xdg/containers/auth.json" \
    "$HOME/.config/containers/auth.json" "$HOME/.docker/config.json"; do
    grep -qF "$f" "$WORK/$what-none.err" || fail "$what: the error does not name '$f': $(cat "$WORK/$what-none.err")"
  done
  fresh_store "state-$what-file"
  expect_exit 0 "$what: a pull with REGISTRY_AUTH_FILE" "$WORK/$what-file.out" "$WORK/$what-file.err" \
    env REGISTRY_AUTH_FILE="$REGISTRY_AUTH_JSON" "$EVALBOX" image pull "$REGISTRY/test/busybox"
  grep -q "downloaded 2 layer(s)" "$WORK/$what-file.out" || fail "$what: $(cat "$WORK/$what-file.out")"
  cat >"$WORK/bin/docker-credential-evtest" <<EOF
#!/bin/sh
[ "\$1" = get ] || exit 1
cat >>"$WORK/helper.calls"
echo >>"$WORK/helper.calls"
printf '{"ServerURL": "%s", "Username": "%s", "Secret": "%s"}\n' "$REGISTRY" "$REGISTRY_USER" "$REGISTRY_PASSWORD"
EOF
  chmod 0755 "$WORK/bin/docker-credential-evtest"
  printf '{"credHelpers": {"%s": "evtest"}}\n' "$REGISTRY" >"$WORK/docker/config.json"
  rm -f "$WORK/helper.calls"
  fresh_store "state-$what-helper"
  expect_exit 0 "$what: a pull through docker-credential-evtest" "$WORK/$what-helper.out" "$WORK/$what-helper.err" \
    env DOCKER_CONFIG="$WORK/docker" PATH="$WORK/bin:$PATH" "$EVALBOX" image pull "$REGISTRY/test/busybox"
  [ "$(grep -v '^$' "$WORK/helper.calls" 2>/dev/null)" = "$REGISTRY" ] ||
    fail "$what: the credential helper was not asked for $REGISTRY (once): $(cat "$WORK/helper.calls" 2>/dev/null)"
  # The secret is in no output and nowhere in the stores.
  local secret64
  secret64=$(printf '%s:%s' "$REGISTRY_USER" "$REGISTRY_PASSWORD" | base64 -w0)
  for s in "$REGISTRY_PASSWORD" "$secret64"; do
    ! grep -rqF -- "$s" "$WORK/$what"-*.out "$WORK/$what"-*.err "$WORK/state-$what"-* ||
      fail "$what: the password shows in $(grep -rlF -- "$s" "$WORK/$what"-*.out "$WORK/$what"-*.err "$WORK/state-$what"-*)"
  done
}

start_registry basic --auth basic
auth_checks basic
stop_registry

start_registry token --auth token
auth_checks token
grep -q '"authorization": false.*"status": 401' "$TOKEN_LOG" || fail "no anonymous token request refused: $(cat "$TOKEN_LOG")"
# A token that lapses mid-pull: 2 s of life, test/five through the relay at 1 MiB/s a
# connection (three layers at once, the last two opened after the first three, 3 s or more in):
# a new token is asked for and the pull completes.
regenv token-config "$REG" --lifetime 2
fresh_store state-token-refresh
start_relay $((1024 * 1024))
sed "s/$REGISTRY/$SLOW/" "$REGISTRY_AUTH_JSON" >"$WORK/slow-auth.json"  # the same login, for $SLOW
tokens=$(lines "$TOKEN_LOG")
expect_exit 0 "a pull that outlives its token" "$WORK/refresh.out" "$WORK/refresh.err" \
  env REGISTRY_AUTH_FILE="$WORK/slow-auth.json" "$EVALBOX" image pull --json "$SLOW/test/five"
python3 - "$WORK/refresh.out" <(tail -n +$((tokens + 1)) "$TOKEN_LOG") <<'PY' ||
import json, sys
pull = json.load(open(sys.argv[1]))
assert pull["layers_downloaded"] == 5 and pull["seconds"] > 2, pull
granted = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
granted = [t for t in granted if t["status"] == 200]
assert len(granted) >= 2, ("token requests granted", granted)
assert all(t["authorization"] for t in granted), granted
PY
  fail "token refresh: $(cat "$WORK/refresh.err"); token log: $(tail -n +$((tokens + 1)) "$TOKEN_LOG")"
stop_relay
stop_registry
echo "registry pull: ok"
