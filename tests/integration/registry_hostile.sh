# `evalbox image pull` against a registry that misbehaves on purpose
# (tests/registry/hostile_registry.py, over TLS with its own CA): every fault ends the pull with
# the exit status of its error kind, a message naming the reference and what was wrong, within
# a bound, with nothing of the image in the store and no credential in any output; the faults a
# client must ride out (429, 503, a dropped connection, a redirect to blob storage, tokens that
# expire mid-pull, Basic and Bearer with credentials) end with the image complete; Ctrl-C
# mid-download exits 130 and leaves no temporary.
source "$(dirname "$0")/lib.sh"
BB=$("$SRC/tests/images/make-images" busybox)
# The digest of the image's manifest: what every pull that succeeds is pinned to.
good_digest=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["manifests"][0]["digest"])' "$BB/oci/index.json")
# "evalbox:" and a 21-character password: 29 bytes, so the auth value ends in '=' (padded
# base64 must decode as well as unpadded).
PASSWORD="hostile-pw-$(printf '%010d' "$((RANDOM * 32768 + RANDOM))")"
USER_B64=$(printf 'evalbox:%s' "$PASSWORD" | base64 -w0)
case "$USER_B64" in *=) ;; *) fail "the auth value is not padded: $USER_B64" ;; esac

# ---- the registries ----
# Each runs in the background with its own log and CA; killed on exit (before lib.sh's cleanup).
server_pids=()
stop_servers() {
  local p
  for p in "${server_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${server_pids[@]}"; do
    for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
  done
}
trap 'stop_servers; cleanup' EXIT

# start_registry NAME ARGS...: sets PORT_<NAME> and CA_<NAME>.
start_registry() {
  local name=$1 dir=$WORK/reg-$1
  shift
  mkdir -p "$dir"
  python3 "$SRC/tests/registry/hostile_registry.py" --image "$BB/oci" --log "$dir/requests.log" \
    --tls-dir "$dir" --ready-file "$dir/ready" --password "$PASSWORD" "$@" \
    >"$dir/stdout" 2>"$dir/stderr" &
  server_pids+=($!)
  for _ in $(seq 1 300); do [ -f "$dir/ready" ] && break; sleep 0.1; done
  [ -f "$dir/ready" ] || { cat "$dir/stderr" >&2; fail "registry $name did not start in 30 s"; }
  read -r port ca < <(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
print(r["port"], r["ca"])' "$dir/ready")
  printf -v "PORT_$name" '%s' "$port"
  printf -v "CA_$name" '%s' "$ca"
}
# main: every repository open unless its mode requires a scheme. fastexpiry: Bearer required
# everywhere, tokens that live one second.
start_registry main
start_registry fastexpiry --auth bearer --token-lifetime 1

mkdir -p "$WORK/home"
: >"$WORK/registries.conf"
cat >"$WORK/auth.json" <<EOF
{"auths": {"127.0.0.1:$PORT_main": {"auth": "$USER_B64"},
           "127.0.0.1:$PORT_fastexpiry": {"auth": "$USER_B64"}}}
EOF

# ---- one pull ----
# pull CASE SERVER NAME [VAR=VALUE...]: `evalbox image pull 127.0.0.1:PORT/NAME` in a store of
# its own ($WORK/state-CASE), hermetic: no host credential file, registries.conf or proxy, and
# debug logging on (so that a credential in a log line would show). Sets RC, SECS (wall time),
# REF (as normalized), and leaves $WORK/CASE.out and .err.
pull() {
  local case=$1 server=$2 name=$3
  shift 3
  local port_var="PORT_$server" ca_var="CA_$server"
  local ref="127.0.0.1:${!port_var}/$name"
  REF="docker://$ref"
  RC=0
  local start end
  start=$(date +%s%N)
  env -u XDG_RUNTIME_DIR -u DOCKER_CONFIG -u REGISTRY_AUTH_FILE -u HTTPS_PROXY -u https_proxy \
    -u HTTP_PROXY -u http_proxy -u EVALBOX_REGISTRY_MIRROR -u EVALBOX_REGISTRY_INSECURE \
    HOME="$WORK/home" EVALBOX_REGISTRIES_CONF="$WORK/registries.conf" EVALBOX_LOG=debug \
    EVALBOX_STATE_DIR="$WORK/state-$case" EVALBOX_REGISTRY_CA="${!ca_var}" \
    EVALBOX_REGISTRY_TIMEOUT=3s "$@" \
    timeout -k 5 90 "$EVALBOX" image pull "$ref" >"$WORK/$case.out" 2>"$WORK/$case.err" || RC=$?
  end=$(date +%s%N)
  SECS=$(((end - start) / 1000000000))
}

# expect_refused CASE EXIT PHRASE MAX_SECONDS: the last pull failed as it should, saying so, and
# left nothing behind.
expect_refused() {
  local case=$1 want=$2 phrase=$3 max=$4 err=$WORK/$1.err
  [ "$RC" = "$want" ] || { cat "$err" >&2; fail "$case: exit $RC, expected $want"; }
  grep "evalbox: error: " "$err" | grep -qF "$REF" ||
    { cat "$err" >&2; fail "$case: the error does not name $REF"; }
  grep "evalbox: error: " "$err" | grep -qF -- "$phrase" ||
    { cat "$err" >&2; fail "$case: the error does not say '$phrase'"; }
  [ "$SECS" -le "$max" ] || fail "$case: took ${SECS}s, more than ${max}s"
  [ -s "$WORK/$case.out" ] && fail "$case: a failed pull printed on stdout: $(cat "$WORK/$case.out")"
  store_holds_nothing "$case"
}

# No record, no temporary (layers/.tmp-*), no layer and no lock file: a layer the failed pull
# had verified and published whole (a sibling of the bad one) is removed with the failure.
store_holds_nothing() {
  local case=$1 store=$WORK/state-$1/images left
  [ -d "$store" ] || return 0
  left=$(find "$store/records" "$store/layers" "$store/locks" -mindepth 1 2>/dev/null | head -3)
  [ -z "$left" ] || fail "$case: the failed pull left in the store: $left"
}

# expect_pulled CASE: the last pull succeeded and the store holds the whole image, verified
# (the unpacker checks every layer's digest and diff_id) and runnable (bin/busybox is there).
expect_pulled() {
  local case=$1 store=$WORK/state-$1/images
  [ "$RC" = 0 ] || { cat "$WORK/$case.err" >&2; fail "$case: exit $RC"; }
  grep -qxF "$REF@$good_digest" "$WORK/$case.out" ||
    fail "$case: not pinned to $good_digest: $(cat "$WORK/$case.out")"
  [ "$(find "$store/records" -name '*.json' | wc -l)" = 1 ] || fail "$case: no image record"
  [ "$(find "$store/layers" -mindepth 1 -maxdepth 1 ! -name '.*' | wc -l)" = 2 ] ||
    fail "$case: layers: $(ls -A "$store/layers")"
  [ -z "$(find "$store/layers" -mindepth 1 -maxdepth 1 -name '.*')" ] ||
    fail "$case: temporaries left: $(ls -A "$store/layers")"
  [ -n "$(find "$store/layers" -path '*/tree/bin/busybox' -type f)" ] ||
    fail "$case: no layer holds bin/busybox"
}

# log_check SERVER PYTHON: runs PYTHON with `log` (the server's requests, parsed); an assertion
# that fails fails the test.
log_check() {
  local server=$1 code=$2
  python3 -c "
import json, sys
log = [json.loads(l) for l in open(sys.argv[1])]
$code" "$WORK/reg-$server/requests.log" || fail "$server's request log: see above"
}

# ---- every fault: refused ----
# mode, exit status (exit_status_of_error: invalid_argument 64, not_found 1, others 2), what the
# error says ('+' for a space), at most this many seconds (EVALBOX_REGISTRY_TIMEOUT=3s: slow
# servers are cut after a few of those; a dripping blob is resumed `retries` times first).
while read -r mode want phrase max; do
  [ -n "$mode" ] || continue
  pull "$mode" main "$mode/img:latest"
  expect_refused "$mode" "$want" "${phrase//+/ }" "$max"
  echo "refused: $mode (exit $RC, ${SECS}s)"
done <<'MODES'
notjson           64  not+a+JSON+object                      10
hugemanifest      64  larger+than                            10
nomediatype       64  media+type+'text/plain'                10
badmediatype      64  is+not+an+image+index+or+manifest      10
manifestdigest    64  the+registry+announced;+refused        10
blobdigest        64  layer+digest+mismatch                  10
diffid            64  diff_id                                10
bigblob           64  larger+than+the+2129920+bytes          10
noplatform        2   offers+linux/s390x,+windows/amd64+only 10
redirectloop      64  redirect+loop                          10
redirecthttp      64  which+is+not+HTTPS                     10
tokengarbage      64  not+a+token                            10
token500          2   token+endpoint+127.0.0.1               20
tokenhang         2   token+endpoint                         12
badchallenge      64  malformed+WWW-Authenticate             10
slowdripmanifest  2   no+progress+reading+the+body           15
slowdripblob      2   below+the+floor                        35
hang              2   no+progress+waiting+for+the+response   12
nosuchmode        1   not+found+in+the+registry              10
MODES

# A manifest named by its digest whose bytes are other ones.
pull manifestdigest-pinned main "manifestdigest/img@$good_digest"
expect_refused manifestdigest-pinned 64 "do not match the digest $good_digest" 10

# A certificate nothing vouches for (no EVALBOX_REGISTRY_CA): the TLS failure is what the error
# says, not the plain-HTTP attempt a loopback registry also gets.
pull untrusted main good/img:latest EVALBOX_REGISTRY_CA=
expect_refused untrusted 2 "certificate verify failed" 10

# A 401 and no credential: the registry, the files read, and how to log in.
for mode in bearerauth basic; do
  pull "$mode-anonymous" main "$mode/img:latest" REGISTRY_AUTH_FILE="$WORK/no-such-auth.json"
  expect_refused "$mode-anonymous" 2 "requires credentials and none were found" 10
  for what in "$WORK/no-such-auth.json" "$WORK/home/.config/containers/auth.json" \
    "$WORK/home/.docker/config.json" "podman login 127.0.0.1:$PORT_main" \
    "docker login 127.0.0.1:$PORT_main"; do
    grep -qF "$what" "$WORK/$mode-anonymous.err" ||
      fail "$mode without credentials: the message lacks '$what': $(cat "$WORK/$mode-anonymous.err")"
  done
done
# Wrong credentials: the file they came from is named, not the password.
printf '{"auths": {"127.0.0.1:%s": {"auth": "%s"}}}\n' "$PORT_main" \
  "$(printf 'evalbox:wrong-%s' "$PASSWORD" | base64 -w0)" >"$WORK/wrong.json"
pull bearerauth-wrong main bearerauth/img:latest REGISTRY_AUTH_FILE="$WORK/wrong.json"
expect_refused bearerauth-wrong 2 "refused the credentials from $WORK/wrong.json" 10

# ---- what a client rides out ----
pull good main good/img:latest
expect_pulled good

# 429 with Retry-After: 1: each blob asked again, a second or more later.
pull ratelimit main ratelimit/img:latest
expect_pulled ratelimit
log_check main '
got = [r for r in log if r["mode"] == "ratelimit" and "/blobs/" in r["path"]]
assert len({r["path"] for r in got}) == 3, got
for path in {r["path"] for r in got}:
    tries = [r for r in got if r["path"] == path]
    assert [r["status"] for r in tries] == [429, 200], (path, tries)
    assert tries[1]["t"] - tries[0]["t"] >= 0.9, ("Retry-After not honoured", path, tries)'

# 503 twice on each path, then the answer.
pull flaky500 main flaky500/img:latest
expect_pulled flaky500
log_check main '
got = [r["status"] for r in log if r["mode"] == "flaky500" and r["path"].endswith("/manifests/latest")]
assert got == [503, 503, 200], got'

# The connection dropped halfway through each layer: resumed with Range (206), complete.
pull dropmid main dropmid/img:latest
expect_pulled dropmid
log_check main '
got = [r for r in log if r["mode"] == "dropmid" and "/blobs/" in r["path"]]
dropped = [r for r in got if (r["note"] or "").startswith("dropped")]
resumed = [r for r in got if r["status"] == 206 and r["headers"].get("Range", "").startswith("bytes=")]
assert len(dropped) == 2 and len(resumed) == 2, got'

# Bearer with an anonymous token; Basic and Bearer with the credentials of REGISTRY_AUTH_FILE.
pull bearer main bearer/img:latest
expect_pulled bearer
pull basic main basic/img:latest REGISTRY_AUTH_FILE="$WORK/auth.json"
expect_pulled basic
pull bearerauth main bearerauth/img:latest REGISTRY_AUTH_FILE="$WORK/auth.json"
expect_pulled bearerauth
log_check main '
anonymous = [r for r in log if r["path"].startswith("/token") and ":bearer/img:" in r["path"]]
assert anonymous and not any(r["authorization"] for r in anonymous), anonymous
tokens = [r for r in log if r["path"].startswith("/token") and "bearerauth" in r["path"]
          and r["status"] == 200]
assert tokens and all(r["authorization"] for r in tokens), tokens
basic = [r for r in log if r["mode"] == "basic" and r["status"] == 200]
assert basic and all(r["authorization"] for r in basic), basic'

# Blobs redirected to storage on another port: the registry's token stays with the registry.
# (fastexpiry requires a token everywhere, so one is in use when the redirect comes.)
pull redirectok fastexpiry redirectok/img:latest
expect_pulled redirectok
log_check fastexpiry '
hops = [r for r in log if r["mode"] == "redirectok" and r["server"] == "registry" and r["status"] == 307]
stored = [r for r in log if r["server"] == "storage"]
assert len(hops) == 3 and all(r["authorization"] for r in hops), hops
assert len(stored) == 3 and all(r["status"] == 200 for r in stored), stored
assert not any(r["authorization"] or "Authorization" in r["headers"] for r in stored), stored'

# Tokens that live one second, and a pull that lasts longer (each blob is rate limited once):
# the token is asked for again mid-pull, with the credentials each time.
pull refresh fastexpiry ratelimit/img:latest REGISTRY_AUTH_FILE="$WORK/auth.json"
expect_pulled refresh
log_check fastexpiry '
tokens = [r for r in log if r["path"].startswith("/token") and "ratelimit" in r["path"]]
assert len(tokens) >= 2, ("no token refresh during the pull", tokens)
assert all(r["authorization"] and r["status"] == 200 for r in tokens), tokens'
echo "pulled: good ratelimit flaky500 dropmid bearer basic bearerauth redirectok refresh"

# ---- Ctrl-C mid-download ----
# A blob that drips, with a timeout long enough that only the interrupt ends it: exit 130
# within seconds, and no temporary left.
store=$WORK/state-interrupt/images
env -u REGISTRY_AUTH_FILE HOME="$WORK/home" EVALBOX_REGISTRIES_CONF="$WORK/registries.conf" \
  EVALBOX_STATE_DIR="$WORK/state-interrupt" EVALBOX_REGISTRY_CA="$CA_main" \
  EVALBOX_REGISTRY_TIMEOUT=60s \
  "$EVALBOX" image pull "127.0.0.1:$PORT_main/slowdripblob/img:latest" \
  >"$WORK/interrupt.out" 2>"$WORK/interrupt.err" &
pid=$!
for _ in $(seq 1 200); do grep -q "layer 1/2 .* downloading" "$WORK/interrupt.err" && break; sleep 0.05; done
grep -q "layer 1/2 .* downloading" "$WORK/interrupt.err" ||
  { kill -KILL "$pid"; fail "the dripping layer never started: $(cat "$WORK/interrupt.err")"; }
sleep 1
[ -n "$(find "$store/layers" -mindepth 1 -maxdepth 1 -name '.tmp-*')" ] ||
  { kill -KILL "$pid"; fail "no layer being written when interrupted: $(ls -A "$store/layers")"; }
kill -INT "$pid"
for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
if kill -0 "$pid" 2>/dev/null; then
  kill -KILL "$pid"
  fail "the pull still ran 5 s after SIGINT"
fi
rc=0
wait "$pid" || rc=$?
[ "$rc" = 130 ] || fail "interrupted pull: exit $rc ($(cat "$WORK/interrupt.err"))"
grep -q "interrupted; no partial layer was kept" "$WORK/interrupt.err" ||
  fail "interrupted pull: $(cat "$WORK/interrupt.err")"
[ -z "$(find "$store/layers" -mindepth 1 -maxdepth 1 -name '.*')" ] ||
  fail "temporaries left after the interrupt: $(ls -A "$store/layers")"
[ -z "$(find "$store/records" -mindepth 1 2>/dev/null)" ] || fail "a record after the interrupt"
echo "interrupted: exit 130"

# ---- no credential anywhere ----
# Not the password, not its base64, not a bearer token the registry issued: in no output of any
# pull (debug logging on) and nowhere in the stores.
grep -q "answered 429" "$WORK/ratelimit.err" ||
  fail "no debug lines in a pull's stderr (the check below would see less): $(head -3 "$WORK/ratelimit.err")"
outputs=("$WORK"/*.out "$WORK"/*.err)
for secret in "$PASSWORD" "$USER_B64"; do
  leaked=$(grep -rlF -- "$secret" "${outputs[@]}" "$WORK"/state-* 2>/dev/null || true)
  [ -z "$leaked" ] || fail "a credential appears in: $leaked"
done
leaked=$(grep -rlE 'hostile-[A-Za-z0-9_-]{32}' "${outputs[@]}" "$WORK"/state-* 2>/dev/null || true)
[ -z "$leaked" ] || fail "a bearer token appears in: $leaked"

echo "registry hostile: ok"
