# `evalbox serve`: one process hosting sessions its clients start on its socket — each answers
# on its own socket, ls lists them, stop ends one, a bad request is refused and the server goes
# on, and SIGTERM stops every session it hosts with nothing left behind — a fixture's sessions
# (in servers of their own) included.
source "$(dirname "$0")/lib.sh"
need_isolation
mkdir -p "$WORK/ws" && echo hello >"$WORK/ws/a.txt"
SOCK=$WORK/serve.sock
"$EVALBOX" serve --socket "$SOCK" 2>"$WORK/serve.log" &
server=$!
trap 'kill -TERM $server 2>/dev/null || true; wait $server 2>/dev/null || true; cleanup' EXIT
for _ in $(seq 50); do [ -S "$SOCK" ] && break; sleep 0.1; done
[ -S "$SOCK" ] || { cat "$WORK/serve.log"; fail "evalbox serve made no socket"; }
[ "$(stat -c %a "$SOCK")" = 600 ] || fail "the server's socket is not 0600"
python3 - "$SOCK" "$WORK/ws" "$SRC/clients/python" "$SRC/fixtures/examples/off-by-one" <<'PY' || fail "the server's protocol"
import json, socket, sys
sock, ws, client, fixture = sys.argv[1:5]
sys.path.insert(0, client)
from evalbox_session import Session

def call(req):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(60)
    s.connect(sock)
    f = s.makefile("rb")
    hello = json.loads(f.readline())
    assert hello["protocol"] == "evalbox.session.v1" and hello["server"] is True, hello
    s.sendall(json.dumps(req).encode() + b"\n")
    reply = json.loads(f.readline())
    s.close()
    return reply

started = [call({"id": i, "op": "start", "workspace": ws, "ttl": 120}) for i in range(3)]
for r in started:
    assert r["ok"], r
ids = [r["session"]["id"] for r in started]
assert len(set(ids)) == 3, ids
for r in started:
    s = Session.connect(r["session"]["socket"])
    s.write_file("/workspace/mine", r["session"]["id"])
    s.close()  # closes the connection; the session goes on
for r in started:  # each its own workspace
    s = Session.connect(r["session"]["socket"])
    assert s.read_file("mine") == r["session"]["id"].encode()
    assert s.exec(["cat", "a.txt"]).stdout == b"hello\n"
    s.close()
ls = call({"id": 9, "op": "ls"})
assert sorted(x["id"] for x in ls["sessions"]) == sorted(ids), ls
stop = call({"id": 10, "op": "stop", "session": ids[0]})
assert stop["ok"], stop
bad = call({"id": 11, "op": "start"})
assert not bad["ok"] and bad["error"]["kind"] == "invalid_request", bad
other = call({"id": 12, "op": "exec", "argv": ["true"]})
assert other["error"]["kind"] == "unknown_op", other
missing = call({"id": 13, "op": "stop", "session": "ses-none"})
assert missing["error"]["kind"] == "not_found", missing
import time
for _ in range(50):
    if len(call({"id": 14, "op": "ls"})["sessions"]) == 2:
        break
    time.sleep(0.1)
assert len(call({"id": 15, "op": "ls"})["sessions"]) == 2
# A fixture's session: its setup done in a server of its own; listed, graded, stopped here.
fx = call({"id": 16, "op": "start", "fixture": fixture, "ttl": "2m"})
assert fx["ok"], fx
s = Session.connect(fx["session"]["socket"])
assert b"def sum_range" in s.read_file("sum_range.py")
verdict = s.grade()
assert verdict["verdict"] == "failed", verdict  # the untouched workspace fails its checks
s.close()
assert fx["session"]["id"] in [x["id"] for x in call({"id": 17, "op": "ls"})["sessions"]]
assert call({"id": 18, "op": "stop", "session": fx["session"]["id"]})["ok"]
for _ in range(50):
    if fx["session"]["id"] not in [x["id"] for x in call({"id": 19, "op": "ls"})["sessions"]]:
        break
    time.sleep(0.1)
else:
    raise AssertionError("a stopped fixture session is still listed")
bad_fixture = call({"id": 20, "op": "start", "fixture": fixture + "/no-such"})
assert not bad_fixture["ok"] and "no such fixture" in bad_fixture["error"]["message"], bad_fixture
# One left running: the server's end stops it too (below).
assert call({"id": 21, "op": "start", "fixture": fixture, "ttl": "2m"})["ok"]
PY
# A client idle on a session's socket (between requests) does not hold up the end: the server
# hangs up on it.
SESSION_SOCK=$(python3 -c 'import json,socket,sys
s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); f=s.makefile("rb"); f.readline()
s.sendall(b"{\"id\":1,\"op\":\"ls\"}\n"); print(json.loads(f.readline())["sessions"][0]["socket"])' "$SOCK")
python3 -c 'import socket,sys,time
s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.makefile("rb").readline(); time.sleep(60)' \
  "$SESSION_SOCK" &
idle=$!
sleep 0.5
started=$(date +%s%N)
kill -TERM $server
wait $server || fail "evalbox serve did not exit 0 on SIGTERM"
took=$(( ($(date +%s%N) - started) / 1000000 ))
kill $idle 2>/dev/null || true
[ "$took" -lt 5000 ] || fail "an idle client held the server's end for $took ms"
[ ! -e "$SOCK" ] || fail "the server's socket is left"
[ -z "$(ls "$EVALBOX_STATE_DIR/sessions" 2>/dev/null)" ] || fail "sessions left: $(ls "$EVALBOX_STATE_DIR/sessions")"
[ -z "$(ls "$EVALBOX_STATE_DIR/session-layers" 2>/dev/null)" ] || fail "session layers left"
no_residue
echo "evalbox serve: 3 sessions and 2 of a fixture started, listed, stopped; nothing left"
