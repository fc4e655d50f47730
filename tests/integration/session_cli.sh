# evalbox session start|exec|write|read|ls|info|snapshot|reset|fork|stop, as a user runs them
# (docs/sessions.md): a workspace session (exit codes, stdio, env, cwd, binary-safe stdin and
# files, paths kept inside the sandbox, snapshot/reset/fork, a background process killed by a
# reset), a busybox image session (a writable root that a reset restores), a fixture session
# (setup run, the bug fixed by a write), lifetimes (--ttl, --owner, several stops at once, gc
# after a killed server), a state directory too deep for a socket's path, and nothing left behind: no session, layer, run directory, server
# process or mount.
source "$(dirname "$0")/lib.sh"
need_isolation
BB=$("$SRC/tests/images/make-images" busybox)
STATE=$EVALBOX_STATE_DIR
mkdir -p "$STATE"

# Every session this test starts is stopped on the way out, even on failure; servers that do
# not go are killed by pid (only ours: their environment names our state dir), then lib.sh's
# cleanup (gc, lazy unmounts, rm -r) runs.
our_servers() {
  local p
  for p in $(pgrep -f "session serve --id" || true); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "EVALBOX_STATE_DIR=$STATE" && echo "$p"
  done
  return 0
}
session_cleanup() {
  local rc=$? d p
  trap - EXIT
  for d in "$STATE"/sessions/*/ "${DEEP:-/nonexistent}"/sessions/*/; do
    [ -d "$d" ] || continue
    if [ "$rc" != 0 ] && [ -f "$d/server.log" ]; then
      echo "--- $d/server.log (last 20 lines)" >&2
      tail -20 "$d/server.log" >&2
    fi
    EVALBOX_STATE_DIR=$(dirname "$(dirname "$d")") timeout 20 "$EVALBOX" session stop "$(basename "$d")" >/dev/null 2>&1 || true
  done
  for _ in $(seq 1 100); do [ -z "$(our_servers)" ] && break; sleep 0.1; done
  for p in $(our_servers); do kill -TERM "$p" 2>/dev/null || true; done
  sleep 1
  for p in $(our_servers); do kill -KILL "$p" 2>/dev/null || true; done
  if [ -n "${OWNER_PID:-}" ]; then kill "$OWNER_PID" 2>/dev/null || true; fi
  cleanup
  exit "$rc"
}
trap session_cleanup EXIT

es() { "$EVALBOX" session "$@"; }
# A failure that lets the rest of the test run (the test still fails, at the end).
SOFT=()
soft_fail() { echo "FAIL (going on): $*" >&2; SOFT+=("$*"); }
now_ms() { echo $(( ${EPOCHREALTIME/./} / 1000 )); }
# jget FILE EXPR: a Python expression over the JSON document `d` in FILE, printed.
jget() { python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }
# start NAME ARGS...: starts a session (--json, a TTL as a last fence unless ARGS give one) and
# sets $NAME to its id; the whole --json output is in $WORK/NAME.json. The sessions below are
# --detach (the trap stops them): ownership is tested on its own, under "lifetimes".
start() {
  local name=$1
  shift
  local ttl=(--ttl 280s)
  [[ " $* " == *" --ttl "* ]] && ttl=()
  es start --json "${ttl[@]}" "$@" >"$WORK/$name.json" 2>"$WORK/$name.err" \
    || { cat "$WORK/$name.err" >&2; fail "session start $*"; }
  printf -v "$name" '%s' "$(jget "$WORK/$name.json" 'd["id"]')"
  jget "$WORK/$name.json" 'd["server_pid"]' >>"$WORK/server-pids"
}
# gone ID: the session is no more: not listed, its socket and directory removed.
gone() {
  ! es ls --json | python3 -c 'import json, sys; sys.exit(0 if any(s["id"] == sys.argv[1] for s in json.load(sys.stdin)) else 1)' "$1" \
    && [ ! -e "$STATE/sessions/$1/socket" ] && [ ! -e "$STATE/sessions/$1" ]
}
# wait_gone ID SECONDS WHAT: fails unless the session is gone within SECONDS (prints how long).
wait_gone() {
  local t0; t0=$(now_ms)
  while ! gone "$1"; do
    [ $(( $(now_ms) - t0 )) -gt $(( $2 * 1000 )) ] && { es ls >&2 || true; fail "$3: session $1 still there after $2 s"; }
    sleep 0.1
  done
  echo "  $3: gone after $(( $(now_ms) - t0 )) ms"
}
# not_host ID PATH: reading PATH in the session fails or gives anything but host-only content.
not_host() {
  local rc=0
  es read "$1" "$2" >"$WORK/leak" 2>"$WORK/leak.err" || rc=$?
  if grep -q "$MARK" "$WORK/leak"; then fail "session read $2 gave the host's marker file"; fi
  if [ -s "$WORK/leak" ] && [ -s /etc/shadow ] && cmp -s "$WORK/leak" /etc/shadow; then
    fail "session read $2 gave the host's /etc/shadow"
  fi
  echo "  read $2: exit $rc, $(wc -c <"$WORK/leak") bytes"
}

# ---- a workspace session ----
WS=$WORK/ws
mkdir -p "$WS/sub"
MARK="host-only-marker-$RANDOM$RANDOM$RANDOM"
echo "$MARK" >"$WORK/marker"
echo hello >"$WS/hello.txt"
echo deep >"$WS/sub/deep.txt"
ln -s "$WORK/marker" "$WS/esc"                          # absolute: a host path
ln -s "../../../../../../../../..$WORK/marker" "$WS/up"  # relative, climbing out
ln -s /etc/shadow "$WS/shadow"
ln -s "$WORK" "$WS/hostdir"
fingerprint() {
  (cd "$1" && find . -printf '%p %y %m %s %l\n' | sort && find . -type f -print0 | sort -z | xargs -0 sha256sum)
}
fingerprint "$WS" >"$WORK/ws.before"

echo "workspace session"
start S --workspace "$WS" --detach
[ "$(jget "$WORK/S.json" 'd["schema"]')" = evalbox.session.v1 ] || fail "start --json: $(cat "$WORK/S.json")"
[ "$(jget "$WORK/S.json" 'd["socket"]')" = "$STATE/sessions/$S/socket" ] || fail "socket: $(cat "$WORK/S.json")"
[ -S "$STATE/sessions/$S/socket" ] || fail "no socket at $STATE/sessions/$S/socket"
[ "$(stat -c %a "$STATE/sessions/$S")" = 700 ] || fail "the session directory is not 0700"
[ "$(stat -c %a "$STATE/sessions/$S/socket")" = 600 ] || fail "the socket is not 0600"
es info "$S" >"$WORK/info.json" || fail "session info"
[ "$(jget "$WORK/info.json" 'd["id"]')" = "$S" ] || fail "info: $(cat "$WORK/info.json")"
[ "$(jget "$WORK/info.json" 'd["source"]["workspace"]')" = "$WS" ] || fail "info source: $(cat "$WORK/info.json")"
es ls --json >"$WORK/ls.json"
[ "$(jget "$WORK/ls.json" '[s["running"] for s in d if s["id"] == "'"$S"'"]')" = "[True]" ] || fail "ls --json: $(cat "$WORK/ls.json")"
es ls | grep -q "^$S  running" || fail "session ls: $(es ls)"
# A unique prefix names the session too.
[ "$(es exec "${S:0:10}" -- echo prefix)" = prefix ] || fail "an id prefix"

# exec: stdout and stderr apart, exit codes through.
expect_exit 3 "exit 3" "$WORK/o" "$WORK/e" es exec "$S" -- sh -c 'echo out; echo err >&2; exit 3'
[ "$(cat "$WORK/o")" = out ] || fail "stdout: $(cat "$WORK/o")"
grep -qx err "$WORK/e" || fail "stderr: $(cat "$WORK/e")"
! grep -q out "$WORK/e" || fail "stdout on stderr"
expect_exit 0 "true" "$WORK/o" "$WORK/e" es exec "$S" -- true
expect_exit 137 "a command killed by SIGKILL" "$WORK/o" "$WORK/e" es exec "$S" -- sh -c 'kill -KILL $$'
expect_exit 143 "a command killed by SIGTERM" "$WORK/o" "$WORK/e" es exec "$S" -- sh -c 'kill -TERM $$'
t0=$(now_ms)
expect_exit 124 "--timeout 1s" "$WORK/o" "$WORK/e" es exec "$S" --timeout 1s -- sleep 30
took=$(( $(now_ms) - t0 ))
[ "$took" -lt 5000 ] || fail "--timeout 1s took $took ms"
echo "  --timeout 1s: exit 124 after $took ms"
expect_exit 127 "a missing command" "$WORK/o" "$WORK/e" es exec "$S" -- no-such-command-evalbox
expect_exit 127 "a missing absolute command" "$WORK/o" "$WORK/e" es exec "$S" -- /no/such/program
[ "$(es exec "$S" --env FOO=bar --env 'BAZ=a=b c' --cwd /workspace -- sh -c 'echo "$FOO|$BAZ"')" = "bar|a=b c" ] || fail "--env"
# --env last before `--`: the command's own options are the command's.
[ "$(es exec "$S" --env FOO=bar -- sh -c 'echo "$FOO"' 2>&1)" = bar ] \
  || soft_fail "exec ID --env FOO=bar -- sh -c 'echo \$FOO': $(es exec "$S" --env FOO=bar -- sh -c 'echo "$FOO"' 2>&1 | head -1)"
[ "$(es exec "$S" -- pwd)" = /workspace ] || fail "default cwd: $(es exec "$S" -- pwd)"
[ "$(es exec "$S" --cwd /workspace/sub -- pwd)" = /workspace/sub ] || fail "--cwd"
# A relative --cwd: docs/sessions.md does not say (read, write and ls take a relative path as
# relative to the workspace); either that or a clear error.
if out=$(es exec "$S" --cwd sub -- cat deep.txt 2>&1); then
  [ "$out" = deep ] || fail "--cwd sub: $out"
else
  echo "  NOTE: a relative --cwd is refused: $out"
fi
rc=0; es exec "$S" --cwd /no/such/dir -- true >"$WORK/o" 2>"$WORK/e" || rc=$?
[ "$rc" != 0 ] && [ -s "$WORK/e" ] || fail "--cwd of a missing directory: exit $rc, $(cat "$WORK/e")"
echo "  --cwd /no/such/dir: exit $rc: $(head -1 "$WORK/e")"
# stdin: -i passes it, binary-safe (a NUL, then 4 MiB of random bytes through cat).
# (bounded: a stdin whose end never reaches the command hangs it)
for i in 1 2 3 4 5; do
  rc=0; printf 'a\0b' | timeout 20 "$EVALBOX" session exec "$S" -i -- od -c >"$WORK/od" 2>"$WORK/od.err" || rc=$?
  if [ "$rc" != 0 ]; then
    soft_fail "printf 'a\\0b' | session exec ID -i -- od -c (try $i of 5): exit $rc$([ "$rc" = 124 ] && echo ' (hung 20 s)') $(head -1 "$WORK/od.err")"
    break
  fi
  grep -q 'a  \\0   b' "$WORK/od" || fail "-i lost the NUL: $(cat "$WORK/od")"
done
# 4 MiB through cat: input and output flow at once, each far more than the socket buffers
# hold, so a client that stops reading while it writes deadlocks with the server here.
head -c 4194304 /dev/urandom >"$WORK/rand"
rc=0; timeout 60 "$EVALBOX" session exec "$S" -i -- cat <"$WORK/rand" >"$WORK/rand.back" 2>"$WORK/e" || rc=$?
[ "$rc" = 0 ] || fail "session exec ID -i -- cat <4MiB: exit $rc$([ "$rc" = 124 ] && echo ' (hung 60 s)') $(head -1 "$WORK/e")"
cmp "$WORK/rand" "$WORK/rand.back" || fail "4 MiB through exec -i cat came back different"
es exec "$S" -- true || fail "the session is gone after the exec -i tries"
[ "$(echo data | es exec "$S" -- sh -c 'cat; echo end')" = end ] || fail "exec without -i: stdin passed"
echo "  exec: ok"

# Files: write/read round-trip all 256 byte values; --parents; --mode; ls.
python3 -c 'import sys; sys.stdout.buffer.write(bytes(range(256)) * 4 + bytes(range(255, -1, -1)))' >"$WORK/bytes"
es write "$S" /workspace/bytes.bin <"$WORK/bytes" || fail "write"
es read "$S" /workspace/bytes.bin >"$WORK/bytes.back" || fail "read"
cmp "$WORK/bytes" "$WORK/bytes.back" || fail "the 256 byte values did not round-trip"
[ "$(es exec "$S" -- sha256sum /workspace/bytes.bin | cut -d' ' -f1)" = "$(sha256sum <"$WORK/bytes" | cut -d' ' -f1)" ] \
  || fail "the written file differs inside"
echo rel | es write "$S" rel.txt || fail "write a relative path"
[ "$(es exec "$S" -- cat /workspace/rel.txt)" = rel ] || fail "a relative path is not in the workspace"
echo x | expect_exit 1 "write into a missing directory" "$WORK/o" "$WORK/e" es write "$S" /workspace/a/b/c.txt
echo nested | es write "$S" /workspace/a/b/c.txt --parents || fail "write --parents"
[ "$(es read "$S" /workspace/a/b/c.txt)" = nested ] || fail "--parents: read back"
echo secret | es write "$S" /workspace/secret --mode 0600 || fail "write --mode"
[ "$(es exec "$S" -- stat -c %a /workspace/secret)" = 600 ] || fail "--mode 0600: $(es exec "$S" -- stat -c %a /workspace/secret)"
echo more | es write "$S" /workspace/rel.txt --append || fail "write --append"
[ "$(es read "$S" rel.txt)" = "$(printf 'rel\nmore')" ] || fail "--append"
: | es write "$S" /workspace/empty || fail "write an empty file"
[ "$(es exec "$S" -- stat -c %s /workspace/empty)" = 0 ] || fail "an empty file"
expect_exit 1 "grade of a session without a fixture" "$WORK/o" "$WORK/e" es grade "$S"
es ls "$S" /workspace >"$WORK/ls.txt" || fail "ls"
grep -q ' hello.txt$' "$WORK/ls.txt" && grep -q ' sub/$' "$WORK/ls.txt" && grep -q ' bytes.bin$' "$WORK/ls.txt" \
  || fail "ls /workspace: $(cat "$WORK/ls.txt")"
es ls "$S" /workspace --json >"$WORK/ls.json" || fail "ls --json"
python3 - "$WORK/ls.json" <<'PY' || fail "ls --json: $(cat "$WORK/ls.json")"
import json, sys
e = {x["name"]: x for x in json.load(open(sys.argv[1]))["entries"]}
assert e["sub"]["type"] == "dir", e["sub"]
assert e["esc"]["type"] == "symlink", e["esc"]
assert e["bytes.bin"]["type"] == "file" and e["bytes.bin"]["size"] == 1280, e["bytes.bin"]
assert e["secret"]["mode"] == 0o600, e["secret"]
PY
expect_exit 1 "read a missing file" "$WORK/o" "$WORK/e" es read "$S" /workspace/nope
# cp: a directory in and out again, contents and modes kept; links left out and said.
mkdir -p "$WORK/cp-in/deep/er"
cp "$WORK/bytes" "$WORK/cp-in/deep/er/bytes"
printf '#!/bin/sh\necho run\n' >"$WORK/cp-in/tool" && chmod 0750 "$WORK/cp-in/tool"
ln -s tool "$WORK/cp-in/link"
es cp "$WORK/cp-in" "$S:/workspace/cp" 2>"$WORK/cp.err" || { cat "$WORK/cp.err"; fail "cp into the session"; }
grep -q "2 file(s)" "$WORK/cp.err" && grep -q "cp-in/link left out" "$WORK/cp.err" \
  || fail "cp in: $(cat "$WORK/cp.err")"
[ "$(es exec "$S" -- /workspace/cp/tool)" = run ] || fail "cp in: the tool lost its mode"
es cp "$S:/workspace/cp" "$WORK/cp-out" 2>"$WORK/cp.err" || { cat "$WORK/cp.err"; fail "cp out of the session"; }
cmp "$WORK/bytes" "$WORK/cp-out/deep/er/bytes" || fail "cp: the bytes did not round-trip"
[ "$(stat -c %a "$WORK/cp-out/tool")" = 750 ] || fail "cp out: mode $(stat -c %a "$WORK/cp-out/tool")"
[ ! -e "$WORK/cp-out/link" ] || fail "cp out: a link came out"
es cp "$S:/workspace/cp/tool" "$WORK/one-file" 2>/dev/null && cmp "$WORK/cp-in/tool" "$WORK/one-file" \
  || fail "cp of one file out"
expect_exit 1 "cp of a missing path" "$WORK/o" "$WORK/e" es cp "$S:/workspace/nope" "$WORK/nope"
expect_exit 64 "cp with no session side" "$WORK/o" "$WORK/e" es cp "$WORK/cp-in" "$WORK/x"
echo "  files: ok"

# Paths stay inside the sandbox: `..`, absolute host paths and symbolic links planted in the
# workspace (to the host's marker, to /etc/shadow, to the host's temporary directory) read the
# sandbox's files or fail, never the host's; writes through them never reach the host.
for p in /workspace/esc /workspace/up esc up "$WORK/marker" "../../../../../../..$WORK/marker" \
         /workspace/hostdir/marker /workspace/shadow /etc/shadow ../../../../../../etc/shadow \
         /proc/1/root/etc/shadow /proc/self/root/etc/shadow "/proc/1/root$WORK/marker"; do
  not_host "$S" "$p"
done
if es ls "$S" /tmp 2>/dev/null | grep -q "$(basename "$WORK")"; then fail "ls /tmp shows the host's /tmp"; fi
if es ls "$S" ../../../../../tmp 2>/dev/null | grep -q "$(basename "$WORK")"; then fail "ls ../../tmp shows the host's /tmp"; fi
echo pwned | es write "$S" /workspace/esc >/dev/null 2>&1 || true
echo pwned | es write "$S" /workspace/hostdir/marker >/dev/null 2>&1 || true
echo pwned | es write "$S" --parents "../../../../../..$WORK/planted" >/dev/null 2>&1 || true
echo pwned | es write "$S" --parents "$WORK/planted2" >/dev/null 2>&1 || true
[ "$(cat "$WORK/marker")" = "$MARK" ] || fail "a write through a symlink changed the host's file"
[ ! -e "$WORK/planted" ] && [ ! -e "$WORK/planted2" ] || fail "a write reached the host's $WORK"
es exec "$S" -- sh -c "cat $WORK/marker" >"$WORK/o" 2>&1 || true
! grep -q "$MARK" "$WORK/o" || fail "a command in the session read the host's marker"
echo "  paths stay inside: ok"

# ---- snapshot, reset, fork ----
echo v1 | es write "$S" /workspace/keep.txt
echo doomed | es write "$S" /workspace/del.txt
es snapshot "$S" clean --json >"$WORK/snap.json" || fail "snapshot"
[ "$(jget "$WORK/snap.json" 'd["name"]')" = clean ] || fail "snapshot --json: $(cat "$WORK/snap.json")"
expect_exit 64 "a second snapshot of the same name" "$WORK/o" "$WORK/e" es snapshot "$S" clean
expect_exit 64 "a snapshot name with a slash" "$WORK/o" "$WORK/e" es snapshot "$S" ../x
echo v2 | es write "$S" /workspace/keep.txt
es exec "$S" -- rm /workspace/del.txt /workspace/hello.txt
es exec "$S" -- sh -c 'echo new >/tmp/new.txt && echo new >/workspace/new.txt && echo h >"$HOME/home.txt"'
SLEEP=$(( 200000 + RANDOM ))
es exec "$S" -- sh -c "sleep $SLEEP >/dev/null 2>&1 </dev/null &" || fail "a background sleep"
pgrep -xf "sleep $SLEEP" >/dev/null || fail "the background sleep is not running"
[ "$(es exec "$S" -- cat /tmp/new.txt)" = new ] || fail "/tmp/new.txt"
es reset "$S" --to clean 2>"$WORK/reset.err" || { cat "$WORK/reset.err" >&2; fail "reset --to clean"; }
grep -q "reset in" "$WORK/reset.err" || fail "reset: $(cat "$WORK/reset.err")"
[ "$(es read "$S" /workspace/keep.txt)" = v1 ] || fail "reset: keep.txt not restored"
[ "$(es read "$S" /workspace/del.txt)" = doomed ] || fail "reset: del.txt not back"
[ "$(es read "$S" /workspace/hello.txt)" = hello ] || fail "reset: hello.txt not back"
cmp "$WORK/bytes" <(es read "$S" /workspace/bytes.bin) || fail "reset: bytes.bin differs"
expect_exit 1 "reset: /tmp/new.txt gone" "$WORK/o" "$WORK/e" es exec "$S" -- test -e /tmp/new.txt
expect_exit 1 "reset: new.txt gone" "$WORK/o" "$WORK/e" es exec "$S" -- test -e /workspace/new.txt
expect_exit 1 "reset: the home file gone" "$WORK/o" "$WORK/e" es exec "$S" -- sh -c 'test -e "$HOME/home.txt"'
for _ in $(seq 1 30); do pgrep -xf "sleep $SLEEP" >/dev/null || break; sleep 0.1; done
! pgrep -xf "sleep $SLEEP" >/dev/null || fail "the background sleep survived the reset"
! es exec "$S" -- ps -e -o args 2>/dev/null | grep -q "sleep $SLEEP" || fail "the sleep is listed inside after the reset"
# Without --to: back to where the session started.
es reset "$S" 2>/dev/null || fail "reset"
[ "$(es read "$S" /workspace/hello.txt)" = hello ] || fail "reset to the start: hello.txt"
for f in keep.txt del.txt bytes.bin rel.txt a secret; do
  expect_exit 1 "reset to the start: $f gone" "$WORK/o" "$WORK/e" es exec "$S" -- test -e "/workspace/$f"
done
es reset "$S" --to no-such-snapshot >/dev/null 2>"$WORK/e" && fail "reset to a missing snapshot succeeded"
# Forks from the snapshot: three sessions, each its own.
es fork "$S" --from clean --count 3 --json >"$WORK/fork.json" || fail "fork"
mapfile -t FORKS < <(jget "$WORK/fork.json" '"\n".join(s["id"] for s in d["sessions"])')
printf '%s\n' "${FORKS[@]}" >>"$WORK/fork-ids"
[ "${#FORKS[@]}" = 3 ] || fail "fork --count 3: $(cat "$WORK/fork.json")"
[ "$(printf '%s\n' "${FORKS[@]}" "$S" | sort -u | wc -l)" = 4 ] || fail "fork ids not distinct"
for f in "${FORKS[@]}"; do
  [ "$(es read "$f" /workspace/keep.txt)" = v1 ] || fail "fork $f: not from the snapshot"
  es info "$f" >"$WORK/finfo.json"
  [ "$(jget "$WORK/finfo.json" 'd["parent"]')" = "$S" ] || fail "fork $f: parent $(cat "$WORK/finfo.json")"
done
echo "only in fork 0" | es write "${FORKS[0]}" /workspace/mine.txt
es exec "${FORKS[0]}" -- sh -c 'echo changed >/workspace/keep.txt'
# A fork's transcript: its parent's commands up to the snapshot, then its own.
for f in "${FORKS[@]}"; do
  t=$STATE/sessions/$f/transcript.jsonl
  grep -q '"argv":\["echo","prefix"\]' "$t" || fail "fork $f: the parent's commands before the snapshot are not in its transcript"
  ! grep -q 'del.txt' "$t" || fail "fork $f: its transcript has the parent's commands after the snapshot"
done
grep -q 'echo changed' "$STATE/sessions/${FORKS[0]}/transcript.jsonl" || fail "fork 0's own command is not in its transcript"
! grep -q 'echo changed' "$STATE/sessions/${FORKS[1]}/transcript.jsonl" || fail "fork 0's command is in fork 1's transcript"
for other in "${FORKS[1]}" "${FORKS[2]}" "$S"; do
  expect_exit 1 "fork 0's file seen in $other" "$WORK/o" "$WORK/e" es exec "$other" -- test -e /workspace/mine.txt
done
[ "$(es read "${FORKS[1]}" /workspace/keep.txt)" = v1 ] || fail "fork 0's change seen in fork 1"
echo "in the parent" | es write "$S" /workspace/parent.txt
expect_exit 1 "the parent's new file in a fork" "$WORK/o" "$WORK/e" es exec "${FORKS[2]}" -- test -e /workspace/parent.txt
es ls | grep -q "fork of $S" || fail "session ls does not show the forks: $(es ls)"
# The parent stops; its forks go on.
es stop "$S" || fail "stop the parent"
wait_gone "$S" 10 "the parent's stop"
for f in "${FORKS[@]}"; do
  [ "$(es exec "$f" -- cat /workspace/keep.txt)" = "$([ "$f" = "${FORKS[0]}" ] && echo changed || echo v1)" ] \
    || fail "fork $f after the parent stopped"
done
es snapshot "${FORKS[1]}" after-parent >/dev/null || fail "a snapshot in a fork after its parent stopped"
es reset "${FORKS[1]}" 2>/dev/null || fail "reset of a fork after its parent stopped"
[ "$(es read "${FORKS[1]}" /workspace/keep.txt)" = v1 ] || fail "a fork's reset goes to the fork's start"
expect_exit 1 "exec in a stopped session" "$WORK/o" "$WORK/e" es exec "$S" -- true
# Several at once.
es stop "${FORKS[@]}" || fail "stop of three forks"
for f in "${FORKS[@]}"; do wait_gone "$f" 10 "stop of several ids"; done
cmp -s "$WORK/ws.before" <(fingerprint "$WS") || { diff "$WORK/ws.before" <(fingerprint "$WS") >&2; fail "the host's workspace directory was modified"; }
echo "  snapshot/reset/fork: ok"

# ---- an image session: busybox, a writable root that a reset restores ----
echo "image session"
start I --image "oci:$BB/oci" --detach
# Its first use imported the image: the progress is in the server's log.
grep -q "unpacking layer" "$STATE/sessions/$I/server.log" || fail "image: no progress in the server's log: $(cat "$STATE/sessions/$I/server.log")"
[ "$(es exec "$I" -- sh -c 'echo x >/etc/motd && cat /etc/motd')" = x ] || fail "image: the root is not writable"
es exec "$I" -- sh -c 'echo changed >>/etc/os-release; echo n >/bin/new-thing; rm /etc/passwd' || fail "image: changes"
[ "$(es exec "$I" -- id -u)" = 0 ] || fail "image: not uid 0 inside"
es exec "$I" -- cat /etc/os-release | grep -q evalbox-busybox || fail "image: not the busybox root"
[ "$(es read "$I" /etc/motd)" = x ] || fail "image: read /etc/motd"
es reset "$I" 2>/dev/null || fail "image: reset"
expect_exit 1 "image reset: /etc/motd (whited out in the image) back to absent" "$WORK/o" "$WORK/e" es exec "$I" -- test -e /etc/motd
! es exec "$I" -- cat /etc/os-release | grep -q changed || fail "image reset: os-release not restored"
[ "$(es exec "$I" -- cat /etc/passwd)" = "root:x:0:0:root:/root:/bin/sh" ] || fail "image reset: /etc/passwd not back"
expect_exit 1 "image reset: /bin/new-thing gone" "$WORK/o" "$WORK/e" es exec "$I" -- test -e /bin/new-thing
echo snap | es write "$I" /etc/snap.txt
es snapshot "$I" s1 >/dev/null
es exec "$I" -- rm /etc/snap.txt
es reset "$I" --to s1 2>/dev/null
[ "$(es read "$I" /etc/snap.txt)" = snap ] || fail "image: reset --to s1"
es stop "$I"
wait_gone "$I" 10 "image stop"
echo "  image: ok"

# ---- a fixture session: its setup run, its bug fixed by a write ----
echo "fixture session"
FX=$SRC/fixtures/examples/off-by-one
start F --fixture "$FX" --detach
es exec "$F" -- git log --oneline >"$WORK/gitlog" 2>&1 || { cat "$WORK/gitlog" >&2; fail "fixture: git log"; }
grep -q base "$WORK/gitlog" || fail "fixture: setup's commit missing: $(cat "$WORK/gitlog")"
# pytest where the session has it, else the fixture's own test command.
if es exec "$F" -- python3 -c 'import pytest' >/dev/null 2>&1; then
  TESTS=(python3 -m pytest -q)
else
  echo "  (no pytest in the session: running python3 -m unittest instead)"
  TESTS=(python3 -m unittest -q test_sum_range)
fi
expect_exit 1 "fixture: the tests before the fix" "$WORK/o" "$WORK/e" es exec "$F" -- "${TESTS[@]}"
es grade "$F" --json >"$WORK/grade.json" || fail "fixture: grade"
[ "$(jget "$WORK/grade.json" 'd["verdict"]')" = failed ] || fail "fixture: grade before the fix: $(cat "$WORK/grade.json")"
sed 's/in range(start, end)/in range(start, end + 1)/' "$FX/workspace/sum_range.py" >"$WORK/fixed.py"
! cmp -s "$WORK/fixed.py" "$FX/workspace/sum_range.py" || fail "the fix changed nothing"
es write "$F" sum_range.py <"$WORK/fixed.py" || fail "fixture: write the fix"
expect_exit 0 "fixture: the tests after the fix" "$WORK/o" "$WORK/e" es exec "$F" -- "${TESTS[@]}"
es exec "$F" -- git status --porcelain | grep -q 'sum_range.py' || fail "fixture: git does not see the fix"
es exec "$F" -- python3 -m unittest -q test_sum_range >/dev/null 2>&1 || fail "fixture: unittest after the fix"
es grade "$F" --json >"$WORK/grade.json" || fail "fixture: grade"
[ "$(jget "$WORK/grade.json" 'd["verdict"]')" = passed ] || fail "fixture: grade after the fix: $(cat "$WORK/grade.json")"
es stop "$F"
wait_gone "$F" 15 "fixture stop"
# A candidate's credential is leased to the session, exclusively: a fork is refused (busy),
# saying why, and the session goes on.
mkdir -p "$WORK/creds" && echo '{"token": "t0"}' >"$WORK/creds/key.json" && chmod 600 "$WORK/creds/key.json"
cat >"$WORK/cred-suite.yaml" <<YAML
schema: evalbox.suite.v1
name: keyed
fixtures: [$FX]
credentials: {key: $WORK/creds/key.json}
candidates:
  - {id: bad, adapter: command, argv: [true]}
  - {id: keyed, adapter: codex, model: gpt-5, credential: key}
YAML
# (argv: [true] is a YAML boolean: that candidate does not validate, and start says so.)
expect_exit 64 "start with a candidate whose argv is not strings" "$WORK/o" "$WORK/e" \
  es start --fixture "$FX" --suite "$WORK/cred-suite.yaml" --candidate bad --detach
grep -q "argv must be a list of strings" "$WORK/e" || fail "start with a bad candidate: $(cat "$WORK/e")"
start C --fixture "$FX" --suite "$WORK/cred-suite.yaml" --candidate keyed --detach
[ "$(es exec "$C" -- cat /home/agent/.codex/auth.json)" = '{"token": "t0"}' ] || fail "the credential is not leased to the session"
expect_exit 1 "fork of a credentialed session" "$WORK/o" "$WORK/e" es fork "$C"
grep -q "a lease of its own of the session's credential (key)" "$WORK/e" || fail "fork of a credentialed session: $(cat "$WORK/e")"
[ "$(es exec "$C" -- echo alive)" = alive ] || fail "the credentialed session after a refused fork"
es stop "$C"
wait_gone "$C" 15 "credentialed session stop"
echo "  fixture: ok"

# ---- lifetimes ----
echo "lifetimes"
start T --workspace "$WS" --ttl 3s --detach
t0=$(now_ms)
es exec "$T" -- true || fail "ttl session: exec"
wait_gone "$T" 8 "--ttl 3s"
[ $(( $(now_ms) - t0 )) -ge 2000 ] || fail "--ttl 3s: gone too early"
sleep 30 &
OWNER_PID=$!
OWNED=$(es start --workspace "$WS" --owner "$OWNER_PID" 2>"$WORK/o.err") || { cat "$WORK/o.err" >&2; fail "start --owner"; }
grep -q "is ready" "$WORK/o.err" || fail "start without --json: $(cat "$WORK/o.err")"
[[ $OWNED == ses-* ]] || fail "start without --json printed: $OWNED"
es exec "$OWNED" -- true || fail "owned session: exec"
es info "$OWNED" | python3 -c 'import json, sys; print(json.load(sys.stdin)["server_pid"])' >>"$WORK/server-pids"
kill "$OWNER_PID"
wait "$OWNER_PID" 2>/dev/null || true
OWNER_PID=
wait_gone "$OWNED" 4 "--owner exited"
# An owner that lives on but whose memory changes (a Python client starting threads, a shell
# growing a variable) still owns its session: only its exit ends it.
mkfifo "$WORK/owner.in"
python3 -c '
import sys, time
sys.stdin.readline()
junk = [bytearray(1 << 20) for _ in range(64)]  # the owner'"'"'s memory grows by 64 MiB
print("grown", flush=True)
time.sleep(60)' <"$WORK/owner.in" >"$WORK/owner.out" 2>&1 &
OWNER_PID=$!
exec {owner_in}<>"$WORK/owner.in"
OWNED=$(es start --workspace "$WS" --owner "$OWNER_PID" 2>"$WORK/o.err") || { cat "$WORK/o.err" >&2; fail "start --owner (python)"; }
es info "$OWNED" | python3 -c 'import json, sys; print(json.load(sys.stdin)["server_pid"])' >>"$WORK/server-pids"
echo grow >&"$owner_in"
for _ in $(seq 1 50); do grep -q grown "$WORK/owner.out" && break; sleep 0.1; done
grep -q grown "$WORK/owner.out" || fail "the owner did not grow: $(cat "$WORK/owner.out")"
sleep 1.5
if gone "$OWNED"; then
  soft_fail "a session whose --owner is alive ended once the owner's memory grew (harness/session/server.cpp started_at reads /proc/PID/stat field 23, vsize, not 22, starttime)"
else
  es exec "$OWNED" -- true || fail "the owned session after its owner grew"
  kill "$OWNER_PID"
  wait "$OWNER_PID" 2>/dev/null || true
  wait_gone "$OWNED" 4 "--owner (grown) exited"
fi
kill "$OWNER_PID" 2>/dev/null || true
wait "$OWNER_PID" 2>/dev/null || true
OWNER_PID=
exec {owner_in}>&-
expect_exit 64 "start --owner of no process" "$WORK/o" "$WORK/e" es start --workspace "$WS" --owner 999999999
expect_exit 64 "start --detach --owner" "$WORK/o" "$WORK/e" es start --workspace "$WS" --detach --owner $$
expect_exit 64 "start with nothing to start from" "$WORK/o" "$WORK/e" es start
[ -z "$(ls -A "$STATE/sessions" 2>/dev/null)" ] || fail "failed starts left: $(ls -A "$STATE/sessions")"
# Several stopped at once (and an unknown id among them: the others still stop).
start A --workspace "$WS" --detach
start B --workspace "$WS" --detach
start C --image "oci:$BB/oci" --detach
es stop "$A" "$B" "$C" || fail "stop of three ids"
for x in "$A" "$B" "$C"; do wait_gone "$x" 10 "stop A B C"; done
start A --workspace "$WS" --detach
expect_exit 1 "stop of an unknown id and a real one" "$WORK/o" "$WORK/e" es stop ses-000000000000 "$A"
wait_gone "$A" 10 "stop after an unknown id"
# gc: a server killed with SIGKILL leaves its session's directory, its layers, its run; gc
# removes them (docs/sessions.md, "evalbox gc").
start K --workspace "$WS" --detach
es snapshot "$K" s >/dev/null
KPID=$(jget "$WORK/K.json" 'd["server_pid"]')
kill -KILL "$KPID"
for _ in $(seq 1 50); do kill -0 "$KPID" 2>/dev/null || break; sleep 0.1; done
sleep 1
es ls | grep -q "^$K  gone" || fail "a killed server's session is not listed as gone: $(es ls)"
expect_exit 1 "exec in a session whose server was killed" "$WORK/o" "$WORK/e" es exec "$K" -- true
grep -q "evalbox gc" "$WORK/e" || fail "exec in a dead session does not point at gc: $(cat "$WORK/e")"
"$EVALBOX" gc --json >"$WORK/gc.json" || { cat "$WORK/gc.json" >&2; fail "gc after a killed server"; }
[ "$(jget "$WORK/gc.json" 'd["sessions"]["removed"] >= 1')" = True ] || fail "gc: $(cat "$WORK/gc.json")"
gone "$K" || fail "gc left the killed server's session: $(ls -A "$STATE/sessions")"
echo "  lifetimes: ok"

# ---- a state directory deeper than a Unix socket's path allows (107 bytes) ----
echo "deep state directory"
DEEP=$WORK/$(printf 'd%.0s' {1..60})/$(printf 'e%.0s' {1..60})
DS=$(EVALBOX_STATE_DIR=$DEEP es start --workspace "$WS" --detach --ttl 120s 2>"$WORK/deep.err") \
  || fail "session start under a deep state directory: $(cat "$WORK/deep.err")"
[ "${#DEEP}" -gt 110 ] || fail "the deep state directory is not deep: $DEEP"
[ "$(EVALBOX_STATE_DIR=$DEEP es exec "$DS" -- cat hello.txt)" = hello ] || fail "exec under a deep state directory"
EVALBOX_STATE_DIR=$DEEP python3 -c '
import os, sys
sys.path.insert(0, sys.argv[1])
from evalbox_session import Session
s = Session.connect(os.path.join(os.environ["EVALBOX_STATE_DIR"], "sessions", sys.argv[2], "socket"))
assert s.exec(["cat", "hello.txt"]).stdout == b"hello\n"
s.close()  # the connection only: stopped below
' "$SRC/clients/python" "$DS" || fail "the Python client under a deep state directory"
EVALBOX_STATE_DIR=$DEEP es stop "$DS" || fail "stop under a deep state directory"
for _ in $(seq 1 50); do [ -z "$(ls -A "$DEEP/sessions" 2>/dev/null)" ] && break; sleep 0.1; done
[ -z "$(ls -A "$DEEP/sessions" 2>/dev/null)" ] || fail "left under the deep state directory: $(ls -A "$DEEP/sessions")"
echo "  deep state directory: ok"

# ---- nothing left ----
for _ in $(seq 1 100); do [ -z "$(our_servers)" ] && break; sleep 0.1; done
[ -z "$(our_servers)" ] || { ps -o pid,args -p "$(our_servers | paste -sd,)" >&2; fail "session servers still running"; }
[ -z "$(ls -A "$STATE/sessions" 2>/dev/null)" ] || fail "left in sessions/: $(ls -A "$STATE/sessions")"
[ -z "$(ls -A "$STATE/session-layers" 2>/dev/null)" ] || fail "left in session-layers/: $(ls -A "$STATE/session-layers")"
no_residue
# No cgroup of a session's sandbox: a first session's run is sandbox-<server pid>-N, a fork's
# its session id (cgroups v1 controllers or the unified tree).
for c in /sys/fs/cgroup/memory/evalbox /sys/fs/cgroup/pids/evalbox /sys/fs/cgroup/evalbox; do
  [ -d "$c" ] || continue
  while read -r pid; do
    for d in "$c/sandbox-$pid-"*; do [ -e "$d" ] && fail "cgroup $d of a session's server (pid $pid) left"; done
  done <"$WORK/server-pids"
  while read -r f; do
    for d in "$c/$f@"*; do [ -e "$d" ] && fail "cgroup $d of fork $f left"; done
  done <"$WORK/fork-ids"
done
! grep -q "$STATE" /proc/self/mountinfo || { grep "$STATE" /proc/self/mountinfo >&2; fail "mounts left under the state dir"; }
! pgrep -xf "sleep $SLEEP" >/dev/null || fail "the background sleep is still running"
cmp -s "$WORK/ws.before" <(fingerprint "$WS") || fail "the host's workspace directory was modified"
[ "$(cat "$WORK/marker")" = "$MARK" ] || fail "the host's marker changed"
[ "${#SOFT[@]}" = 0 ] || fail "${#SOFT[@]} failure(s): $(printf '\n  %s' "${SOFT[@]}")"
echo "session CLI: ok"
