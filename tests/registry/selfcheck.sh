#!/usr/bin/env bash
# Checks the test registries of this directory on their own (no evalbox involved): the real
# registry of registry-env in its three auth modes, with the pushed images, and a few of
# hostile_registry.py's faults, with curl (--cacert) and skopeo (--cert-dir). Everything runs on
# 127.0.0.1; nothing is left running, whatever fails.
#
#   tests/registry/selfcheck.sh        prints one line per check; exit status 1 if any failed
#
# Needs scripts/bootstrap --tests (docker-registry, skopeo, apache2-utils, python3-cryptography,
# curl). About 30 s.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
env_tool=$here/registry-env
work=$(mktemp -d /tmp/evalbox-registry-selfcheck-XXXXXX)
hostile_pids=()
failures=0

cleanup() {
  local d pid
  for d in "$work"/reg-*; do
    if [ -d "$d" ]; then "$env_tool" stop "$d" || true; fi
  done
  for pid in "${hostile_pids[@]}"; do
    kill "$pid" 2>/dev/null || true
    timeout 5 tail --pid="$pid" -f /dev/null 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT

pass() { echo "ok    $1"; }
fail() { echo "FAIL  $1${2:+: $2}"; failures=$((failures + 1)); }
# check NAME COMMAND...: COMMAND's success is the check's.
check() {
  local name=$1; shift
  if "$@" >"$work/last.out" 2>&1; then
    pass "$name"
  else
    fail "$name" "$(tail -n 3 "$work/last.out")"
  fi
}
not() { ! "$@"; }
equal() { [ "$1" = "$2" ] || { echo "got '$1', want '$2'"; return 1; }; }
# HTTP status of a curl request (curl arguments as given).
status() { curl -s -o /dev/null -w '%{http_code}' --max-time 10 "$@" || true; }
# headers_match PATTERN CURL_ARGS...: a response header matches PATTERN (grep -i).
headers_match() {
  local pattern=$1; shift
  curl -s --max-time 10 -D - -o /dev/null "$@" | grep -qi -- "$pattern"
}
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }
json() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
alive_pid() {  # any of PIDS alive (zombies count as gone)
  local pid
  for pid in "$@"; do
    [ -n "$pid" ] && [ -e "/proc/$pid" ] && [ "$(awk '{print $3}' "/proc/$pid/stat")" != Z ] &&
      return 0
  done
  return 1
}

# --- the real registry -----------------------------------------------------------------------

inspect() {  # REF [skopeo inspect options]: with the registry's CA and credentials
  local ref=$1; shift
  skopeo inspect --cert-dir "$REGISTRY_CERT_DIR" --authfile "$REGISTRY_AUTH_JSON" "$@" \
    "docker://$REGISTRY/$ref"
}
anonymous_inspect() {
  skopeo inspect --cert-dir "$REGISTRY_CERT_DIR" --no-creds "docker://$REGISTRY/$1"
}

image_checks() {  # what every auth mode must serve
  check "$auth: skopeo inspect test/busybox" inspect test/busybox:latest
  check "$auth: test/multi is an index of linux/amd64 and linux/arm64" equal \
    "$(inspect test/multi:latest --raw |
       json '" ".join(sorted(m["platform"]["architecture"] for m in d["manifests"]))')" \
    "amd64 arm64"
  check "$auth: test/derived = test/busybox's layers + 1" equal \
    "$(inspect test/derived:latest | json '" ".join(d["Layers"][:-1])')" \
    "$(inspect test/busybox:latest | json '" ".join(d["Layers"])')"
  check "$auth: test/five has 5 layers" equal \
    "$(inspect test/five:latest | json 'len(d["Layers"])')" 5
}

none_checks() {
  check "none: anonymous GET /v2/ is 200" equal \
    "$(status --cacert "$REGISTRY_CA" "$REGISTRY_URL/v2/")" 200
  check "none: TLS is verified (no --cacert: refused)" equal "$(status "$REGISTRY_URL/v2/")" 000
  local before after
  before=$(json 'd["test/moving:v1"]' <"$REGISTRY_DIR/digests.json")
  "$env_tool" retag "$REGISTRY_DIR" test/moving:v1 test/derived:latest
  after=$(inspect test/moving:v1 | json 'd["Digest"]')
  check "none: retag moves test/moving:v1 from busybox to derived" equal "$before $after" \
    "$(json 'd["test/busybox:latest"] + " " + d["test/derived:latest"]' \
       <"$REGISTRY_DIR/digests.json")"
}

basic_checks() {
  check "basic: anonymous GET /v2/ is 401 Basic" headers_match '^www-authenticate: Basic' \
    --cacert "$REGISTRY_CA" "$REGISTRY_URL/v2/"
  check "basic: with the password it is 200" equal "$(status --cacert "$REGISTRY_CA" \
    -u "$REGISTRY_USER:$REGISTRY_PASSWORD" "$REGISTRY_URL/v2/")" 200
  check "basic: skopeo without credentials is refused" not anonymous_inspect test/busybox:latest
}

token_checks() {
  check "token: anonymous GET /v2/ is 401 Bearer with the token server's realm" headers_match \
    "^www-authenticate: Bearer realm=\"$TOKEN_URL\"" --cacert "$REGISTRY_CA" "$REGISTRY_URL/v2/"
  check "token: anonymous pull refused by default" not anonymous_inspect test/busybox:latest
  "$env_tool" token-config "$REGISTRY_DIR" --anonymous-pull yes --lifetime 2
  check "token: anonymous pull once allowed" anonymous_inspect test/busybox:latest
  local token read_manifest
  token=$(curl -sS --max-time 10 --cacert "$REGISTRY_CA" -u "$REGISTRY_USER:$REGISTRY_PASSWORD" \
    "$TOKEN_URL?service=$TOKEN_SERVICE&scope=repository:test/busybox:pull" | json 'd["token"]')
  read_manifest=(--cacert "$REGISTRY_CA" -H "Authorization: Bearer $token"
    -H "Accept: application/vnd.oci.image.manifest.v1+json"
    "$REGISTRY_URL/v2/test/busybox/manifests/latest")
  check "token: a fresh token reads the manifest" equal "$(status "${read_manifest[@]}")" 200
  sleep 2.5
  check "token: the same token 2.5 s later (lifetime 2) is refused: refresh needed" equal \
    "$(status "${read_manifest[@]}")" 401
  check "token: the token server logged the user" grep -q "\"user\": \"$REGISTRY_USER\"" \
    "$TOKEN_LOG"
  check "token: ... and never the password" not grep -qF "$REGISTRY_PASSWORD" "$TOKEN_LOG"
}

registry_checks() {  # AUTH
  auth=$1
  local dir="$work/reg-$1" t0 t1
  t0=$(date +%s.%N)
  "$env_tool" start "$dir" --auth "$auth" 2>/dev/null
  t1=$(date +%s.%N)
  "$env_tool" push "$dir"
  echo "      ($auth: start $(elapsed "$t0" "$t1") s, push $(elapsed "$t1" "$(date +%s.%N)") s)"
  # shellcheck source=/dev/null
  . "$dir/env"
  image_checks
  "${auth}_checks"
  "$env_tool" stop "$dir"
  check "$auth: stop leaves no process" not alive_pid "$REGISTRY_PID" "$TOKEN_SERVER_PID"
}

# --- the hostile registry --------------------------------------------------------------------

start_hostile() {  # DIR ARGS...: starts it; sets url, ca, port, log
  local dir=$1 i ready; shift
  mkdir -p "$dir"
  python3 "$here/hostile_registry.py" --image "$busybox_oci" --log "$dir/requests.jsonl" \
    --ready-file "$dir/ready.json" "$@" >/dev/null 2>"$dir/stderr" &
  hostile_pids+=($!)
  for ((i = 0; i < 100; i++)); do [ -s "$dir/ready.json" ] && break; sleep 0.1; done
  [ -s "$dir/ready.json" ] || { cat "$dir/stderr" >&2; return 1; }
  ready=$(cat "$dir/ready.json")
  url=$(json 'd["url"]' <<<"$ready") ca=$(json 'd["ca"]' <<<"$ready")
  port=$(json 'd["port"]' <<<"$ready") log=$(json 'd["log"]' <<<"$ready")
}

pull() {  # REPOSITORY[:TAG|@DIGEST] [skopeo copy options]
  local ref=$1; shift
  timeout 30 skopeo copy --quiet --src-cert-dir "$work/hostile/certs" "$@" \
    "docker://127.0.0.1:$port/$ref" "oci:$work/hostile/pulled:x"
}

storage_saw_no_authorization() {
  grep '"server": "storage"' "$log" | grep -q '"status": 200' &&
    ! grep '"server": "storage"' "$log" | grep -q '"authorization": true'
}

dropmid_resumes() {  # the first GET stops halfway; a Range GET brings the rest
  local part="$work/part" got
  curl -s --max-time 10 -o "$part" "$url/v2/dropmid/img/blobs/$layer" || true
  got=$(stat -c %s "$part")
  [ "$got" -gt 0 ] &&
    curl -s --max-time 10 -D "$part.h" -H "Range: bytes=$got-" \
      "$url/v2/dropmid/img/blobs/$layer" >>"$part" &&
    grep -q '^HTTP/1.1 206' "$part.h" &&
    equal "sha256:$(sha256sum <"$part" | cut -c1-64)" "$layer" &&
    grep -q "\"Range\": \"bytes=$got-\"" "$log"
}

hostile_checks() {
  local manifest
  busybox_oci="$("$here/../images/make-images" busybox)/oci"
  manifest=$(json 'd["manifests"][0]["digest"]' <"$busybox_oci/index.json")
  layer=$(json 'd["layers"][0]["digest"]' <"$busybox_oci/blobs/sha256/${manifest#sha256:}")

  start_hostile "$work/hostile" --auth bearer
  check "hostile: skopeo copies good/img through the Bearer flow" pull good/img:latest
  check "hostile: unknown repository is 404 NAME_UNKNOWN" grep -q NAME_UNKNOWN \
    <(curl -s --max-time 10 --cacert "$ca" "$url/v2/nosuch/img/manifests/latest")
  check "hostile: bearerauth refuses an anonymous token" not pull bearerauth/img:latest \
    --src-no-creds
  check "hostile: bearerauth with credentials" pull bearerauth/img:latest \
    --src-creds evalbox:hostile-secret
  check "hostile: token500 fails the pull" not pull token500/img:latest
  # (by digest: skopeo checks Docker-Content-Digest against nothing when it pulls a tag)
  check "hostile: manifestdigest is refused by skopeo" not pull "manifestdigest/img@$manifest"
  check "hostile: blobdigest is refused by skopeo" not pull blobdigest/img:latest
  check "hostile: redirectok: skopeo follows to blob storage" pull redirectok/img:latest
  check "hostile: redirectok: blob storage got no Authorization" storage_saw_no_authorization
  check "hostile: the log never holds a token" not grep -q 'hostile-[A-Za-z0-9_-]\{20,\}' "$log"
  check "hostile: hang does not answer" equal \
    "$(status --cacert "$ca" --max-time 2 "$url/v2/hang/img/manifests/latest")" 000

  # Faults that need no auth, on a second server in plain HTTP.
  start_hostile "$work/plain" --plain
  check "hostile --plain: /v2/ is 200 over HTTP" equal "$(status "$url/v2/")" 200
  check "hostile: ratelimit answers 429 with Retry-After: 1" headers_match '^retry-after: 1' \
    "$url/v2/ratelimit/img/blobs/$layer"
  check "hostile: ... then 200" equal "$(status "$url/v2/ratelimit/img/blobs/$layer")" 200
  check "hostile: dropmid closes halfway, then honours Range (206), logged" dropmid_resumes
  check "hostile: slowdripblob sends headers, then next to nothing" equal "$(curl -s \
    --max-time 3 -o /dev/null -w '%{http_code} %{size_download}' \
    "$url/v2/slowdripblob/img/blobs/$layer" || true)" "200 2"
}

registry_checks none
registry_checks basic
registry_checks token
hostile_checks
if [ $failures -ne 0 ]; then echo "selfcheck: $failures check(s) failed" >&2; exit 1; fi
echo "selfcheck: all checks passed"
