#!/usr/bin/env python3
"""A hostile client of a session's socket (docs/sessions.md, evalbox.session.v1).

Usage: session_hostile.py EVALBOX EVALBOX_SANDBOX SOURCE_DIR

Starts a workspace session (host root) and speaks to <state>/sessions/<id>/socket directly:
garbage, invalid UTF-8, JSON that is not a request, unknown ops and fields, fields of the wrong
type or out of range, a 70 MiB line without a newline, 200k arguments, 300 connections at once,
clients that start `yes` and hang up, output caps, /dev/zero and FIFOs, paths that try to leave
the sandbox, writes where the sandbox may not write, and a client of another uid. After all of
it the session must still serve a plain exec, and `stop` must end it without residue.
Every socket wait is bounded; the session is stopped (and its server killed if need be) on the
way out, whatever happened.
"""

import base64
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

from session_procs import clean_up, run_test, servers_of

EVALBOX, HELPER, SRC = sys.argv[1:4]
os.environ["EVALBOX_HELPER"] = HELPER
WORK = tempfile.mkdtemp(prefix="evalbox-it-")
STATE = os.path.join(WORK, "state")
os.environ["EVALBOX_STATE_DIR"] = STATE
WAIT = 10.0  # seconds: the bound on every socket wait
T0 = time.monotonic()


def log(*a):
    print(f"[{time.monotonic() - T0:6.1f}s]", *a, flush=True)


class Fail(Exception):
    pass


FAILURES = []


def check(cond, what):
    if not cond:
        raise Fail(what)


def soft(cond, what):
    """A failure that is recorded (and fails the test at the end) but lets the rest run."""
    if not cond:
        FAILURES.append(what)
        log("FAILED:", what)
    return bool(cond)


def b64(data):
    return base64.b64encode(data).decode("ascii")


def unb64(text):
    return base64.b64decode(text, validate=True)


def run(argv, timeout=120, **kw):
    """A command's exit status, stdout and stderr (through files: a session server that a
    `session start` leaves behind must not hold a pipe of ours open)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, timeout=timeout, **kw)
        out.seek(0)
        err.seek(0)
        return p.returncode, out.read().decode(errors="replace"), err.read().decode(errors="replace")


def need_isolation():
    rc, _, _ = run([EVALBOX, "doctor"])
    if rc != 0 or os.getuid() != 0:
        if os.environ.get("EVALBOX_REQUIRE_ISOLATION") == "1":
            raise Fail("the sandbox cannot run here (evalbox doctor)")
        print("SKIP: needs root and a working sandbox (evalbox doctor)")
        sys.exit(0)


def our_servers():
    return servers_of(STATE)


def host_pgrep(pattern):
    p = subprocess.run(["pgrep", "-f", pattern], stdout=subprocess.PIPE, text=True)
    return [int(x) for x in p.stdout.split() if int(x) != os.getpid()]


def cleanup():
    clean_up(EVALBOX, STATE, WORK)


# ---------------------------------------------------------------- the protocol, by hand


class Conn:
    """One raw connection: lines in, lines out, every wait bounded."""

    def __init__(self, path, timeout=WAIT, greet=True, blocking_connect=False):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        # With a timeout, Python connects without blocking, and a Unix socket whose backlog is
        # full answers EAGAIN at once; a blocking connect waits to be accepted.
        self.s.settimeout(None if blocking_connect else timeout)
        self.s.connect(path)
        self.s.settimeout(timeout)
        self.buf = b""
        self.next_id = 0
        self.greeting = self.msg() if greet else None

    def line(self):
        """The next line (without its newline), or None at end of file."""
        while b"\n" not in self.buf:
            chunk = self.s.recv(1 << 20)
            if not chunk:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line

    def msg(self):
        line = self.line()
        if line is None:
            return None
        m = json.loads(line)
        check(isinstance(m, dict), f"the server sent a line that is not an object: {line[:200]!r}")
        return m

    def send_raw(self, data):
        self.s.sendall(data)

    def send(self, obj):
        self.s.sendall(json.dumps(obj).encode() + b"\n")

    def call(self, obj, add_id=True):
        """Sends a request; returns (reply, {stream: bytes}). Frames are gathered."""
        if add_id and "id" not in obj:
            self.next_id += 1
            obj = {"id": self.next_id, **obj}
        self.send(obj)
        return self.reply(obj.get("id"))

    def reply(self, rid):
        out = {"stdout": b"", "stderr": b""}
        while True:
            m = self.msg()
            check(m is not None, f"the server hung up instead of answering request {rid!r}")
            if "stream" in m and "ok" not in m:
                check(m.get("id") == rid, f"a frame for {m.get('id')!r} while waiting for {rid!r}")
                out[m["stream"]] += unb64(m["data"])
                continue
            return m, out

    def close(self):
        try:
            self.s.close()
        except OSError:
            pass


def is_error(reply, kind=None, rid="any"):
    if reply.get("ok") is not False or not isinstance(reply.get("error"), dict):
        return False
    if kind is not None and reply["error"].get("kind") not in ((kind,) if isinstance(kind, str) else kind):
        return False
    if rid != "any" and reply.get("id") != rid:
        return False
    return isinstance(reply["error"].get("message"), str)


def expect_error(c, obj, kind, what):
    r, _ = c.call(obj)
    check(is_error(r, kind, obj.get("id", c.next_id)), f"{what}: expected a {kind} error, got {r}")
    return r


def ping(c, what):
    r, _ = c.call({"op": "ping"})
    check(r.get("ok") is True, f"ping after {what}: {r}")


# ---------------------------------------------------------------- the test


def main():
    need_isolation()
    os.makedirs(STATE, exist_ok=True)
    ws = os.path.join(WORK, "ws")
    os.makedirs(ws)
    with open(os.path.join(ws, "hello.txt"), "w") as f:
        f.write("hello\n")
    mark = "host-only-marker-%016x" % random.getrandbits(64)
    marker = os.path.join(WORK, "marker")
    with open(marker, "w") as f:
        f.write(mark + "\n")
    os.symlink(marker, os.path.join(ws, "planted-abs"))
    os.symlink("../../../../../../../.." + marker, os.path.join(ws, "planted-rel"))
    try:
        host_shadow = open("/etc/shadow", "rb").read()
    except OSError:
        host_shadow = b""

    # --detach (the TTL and the cleanup end it): an --owner of this process would end it as soon
    # as this process's memory changed (session_cli.sh, the owner that grows).
    rc, out, err = run([EVALBOX, "session", "start", "--json", "--workspace", ws, "--ttl", "280s",
                        "--detach"])
    check(rc == 0, f"session start: exit {rc}: {err}")
    info = json.loads(out)
    sid, sock = info["id"], info["socket"]
    server_pid = info["server_pid"]
    log("session", sid, "server", server_pid)

    def alive(what):
        check(os.path.exists(sock), f"the socket is gone after {what}")
        try:
            os.kill(server_pid, 0)
        except ProcessLookupError:
            raise Fail(f"the session's server died after {what}")
        c = Conn(sock)
        ping(c, what)
        r, out = c.call({"op": "exec", "argv": ["echo", "still here"]})
        check(r.get("ok") and r.get("exit_code") == 0 and out["stdout"] == b"still here\n",
              f"exec after {what}: {r} {out}")
        c.close()

    def leaks(data):
        return mark.encode() in data or (host_shadow and data == host_shadow)

    # The greeting.
    c = Conn(sock)
    g = c.greeting
    check(g.get("protocol") == "evalbox.session.v1" and g.get("session") == sid, f"greeting: {g}")
    lim = g.get("limits", {})
    check(lim.get("max_message_bytes") == 64 << 20, f"greeting limits: {g}")

    # Garbage, invalid UTF-8, JSON that is not a request: an error with id null; the connection
    # and the session go on.
    for raw in [b"\x00\x01\x02garbage\xff\xfe\n", b"\n", b"   \n", b"{\n", b"}{\n", b"[1,2,3]\n",
                b'"a string"\n', b"42\n", b"null\n", b"true\n", b"{}\n", b'{"id":1}\n',
                b'{"op":7,"id":1}\n', b'{"op":null,"id":1}\n', b'{"op":"ping","id":[1]}\n',
                b'{"op":"ping","id":{"a":1}}\n', b'{"op":"ping","id":1.5}\n', b'{"op":"ping","id":true}\n',
                b'{"id":2,"op":"ping\xff"}\n', b'{"id":"\xc3\x28","op":"ping"}\n',
                b'{"id":3,"op":"exec","argv":["echo","\xed\xa0\x80"]}\n',
                b'\xef\xbb\xbf{"id":4,"op":"ping"}\n', b'{"id":5,"op":"ping"} trailing\n',
                b'{"id":6,"op":"ping","id":7}\n']:
        c.send_raw(raw)
        r = c.msg()
        check(r is not None, f"the server hung up on {raw!r}")
        if raw.startswith(b"\xef\xbb\xbf") or raw.startswith(b'{"id":6'):
            # A BOM or a duplicate key: either way an answer (nlohmann's parser takes the last
            # of duplicate keys: a duplicate "op" would run the last one).
            check(r.get("ok") is True and r.get("id") in (4, 6, 7) or is_error(r, "invalid_request"), f"{raw!r}: {r}")
            log("  ", raw[:40], "->", r)
            continue
        check(is_error(r, ("invalid_request", "unknown_op")), f"{raw!r}: {r}")
        if r.get("id") is not None:
            check(r["id"] in (1, 2, 3, 5), f"{raw!r}: an id that was not sent: {r}")
    ping(c, "garbage")
    # Lines ending in \r\n are taken too.
    c.send_raw(b'{"id":"crlf","op":"ping"}\r\n')
    r = c.msg()
    check(r == {"id": "crlf", "ok": True}, f"a CRLF line: {r}")
    alive("garbage and invalid UTF-8")
    c.close()
    log("garbage: ok")

    # Unknown ops and fields, fields of the wrong type or out of range: named errors.
    c = Conn(sock)
    expect_error(c, {"id": "u1", "op": "format_disk"}, "unknown_op", "an unknown op")
    expect_error(c, {"id": "u2", "op": "PING"}, "unknown_op", "an op in capitals")
    expect_error(c, {"id": "u3", "op": "x" * 100000}, "unknown_op", "a 100k op name")
    bad = [
        {"op": "exec", "argv": "ls -la"},
        {"op": "exec", "argv": []},
        {"op": "exec", "argv": [""]},
        {"op": "exec", "argv": [1, 2]},
        {"op": "exec", "argv": None},
        {"op": "exec"},
        {"op": "exec", "argv": ["a\u0000b"]},
        {"op": "exec", "argv": ["true"], "timeout": -1},
        {"op": "exec", "argv": ["true"], "timeout": 0},
        {"op": "exec", "argv": ["true"], "timeout": "5"},
        {"op": "exec", "argv": ["true"], "timeout": 1e300},
        {"op": "exec", "argv": ["true"], "max_output": 0},
        {"op": "exec", "argv": ["true"], "max_output": -5},
        {"op": "exec", "argv": ["true"], "max_output": 1 << 40},
        {"op": "exec", "argv": ["true"], "env": {"A": 1}},
        {"op": "exec", "argv": ["true"], "env": {"A=B": "x"}},
        {"op": "exec", "argv": ["true"], "env": {"": "x"}},
        {"op": "exec", "argv": ["true"], "env": ["A=B"]},
        {"op": "exec", "argv": ["true"], "cwd": 5},
        {"op": "exec", "argv": ["true"], "stdin": "not base64!"},
        {"op": "exec", "argv": ["true"], "tty": "yes"},
        {"op": "exec", "argv": ["true"], "rows": 99999, "cols": 80},
        {"op": "exec", "argv": ["true"], "rows": -1},
        {"op": "exec", "argv": ["true"], "tty": True, "stream": False},
        {"op": "exec", "argv": ["true"], "shell": True},
        {"op": "exec", "argv": ["true"], "Argv": ["true"]},
        {"op": "write_file", "path": "/workspace/m", "data": b64(b"x"), "mode": 99999},
        {"op": "write_file", "path": "/workspace/m", "data": b64(b"x"), "mode": -1},
        {"op": "write_file", "path": "/workspace/m", "data": b64(b"x"), "mode": "0644"},
        {"op": "write_file", "path": "/workspace/m", "data": "!!!"},
        {"op": "write_file", "path": "/workspace/m"},
        {"op": "write_file", "data": b64(b"x")},
        {"op": "write_file", "path": "/workspace/m", "data": b64(b"x"), "append": 1},
        {"op": "write_file", "path": "/workspace/m", "data": b64(b"x"), "owner": 0},
        {"op": "read_file", "path": 5},
        {"op": "read_file", "path": ""},
        {"op": "read_file", "path": "/workspace/hello.txt", "max_bytes": -1},
        {"op": "read_file", "path": "/workspace/hello.txt", "follow": False},
        {"op": "ls"},
        {"op": "ls", "path": ["/"]},
        {"op": "snapshot", "name": "../x"},
        {"op": "snapshot", "name": ""},
        {"op": "snapshot", "name": "a" * 65},
        {"op": "snapshot", "name": ".."},
        {"op": "snapshot", "name": "a/b"},
        {"op": "snapshot"},
        {"op": "reset", "to": "a/b"},
        {"op": "reset", "to": 3},
        {"op": "fork", "count": 0},
        {"op": "fork", "count": 100000},
        {"op": "fork", "count": "3"},
        {"op": "fork", "count": -1},
        {"op": "fork", "from": "../x"},
        {"op": "ping", "x": 1},
        {"op": "stop", "now": True},
        {"op": "info", "verbose": True},
        {"op": "cancel"},
        {"op": "input", "data": b64(b"x")},
        {"op": "resize", "rows": 10, "cols": 10},
    ]
    for obj in bad:
        r, _ = c.call(dict(obj))
        check(is_error(r, "invalid_request", c.next_id), f"{json.dumps(obj)[:120]}: {r}")
    # Deep nesting inside a field, and as a whole line: an error, not a stack overflow.
    deep = "[" * 100000 + "]" * 100000
    c.send_raw(b'{"id":"deep","op":"exec","argv":' + deep.encode() + b"}\n")
    r = c.msg()
    check(is_error(r), f"deeply nested argv: {r}")
    c.send_raw(deep.encode() + b"\n")
    r = c.msg()
    check(is_error(r, "invalid_request"), f"a deeply nested line: {r}")
    c.send_raw(b'{"id":"deep2","op":"ping","x":' + b'{"a":' * 100000 + b"1" + b"}" * 100000 + b"}\n")
    r = c.msg()
    check(is_error(r, "invalid_request"), f"deeply nested objects: {r}")
    # An id past 64 bits, a long string id: answered, echoed or refused, never a crash.
    c.send_raw(b'{"id":123456789012345678901234567890,"op":"ping"}\n')
    r = c.msg()
    check(r is not None and (r.get("ok") is True or is_error(r, "invalid_request")), f"a huge id: {r}")
    r, _ = c.call({"id": "i" * 100000, "op": "ping"}, add_id=False)
    check(r == {"id": "i" * 100000, "ok": True}, "a 100k string id is not echoed")
    ping(c, "bad fields")
    c.close()
    alive("bad fields")
    log("unknown ops and bad fields: ok")

    # A 70 MiB line without a newline: too_large (or the connection closed); the session still
    # answers a fresh connection.
    c = Conn(sock, timeout=60)
    chunk = b'{"id":"big","op":"ping","x":"' + b"x" * (1 << 20)
    sent = 0
    try:
        c.send_raw(chunk)
        sent += len(chunk)
        block = b"x" * (1 << 20)
        while sent < 70 << 20:
            c.send_raw(block)
            sent += len(block)
    except (BrokenPipeError, ConnectionResetError):
        pass
    c.s.settimeout(WAIT)
    try:
        r = c.msg()
    except ConnectionResetError:
        r = None  # closed with our bytes unread: the error line may be lost with them
    except socket.timeout:
        raise Fail("a 70 MiB line: neither an answer nor a hang-up")
    check(r is None or is_error(r, "too_large"), f"a 70 MiB line: {r}")
    log(f"70 MiB line: {sent >> 20} MiB sent, answer {r and r['error']['kind']}")
    check(sent >= 63 << 20, f"the server stopped reading after {sent} bytes, under its 64 MiB limit")
    try:
        r = c.msg()
        check(r is None, f"the connection was not closed after too_large: {r}")
    except ConnectionResetError:
        pass
    c.close()
    alive("a 70 MiB line")
    # A file past max_file_bytes: too_large, nothing written.
    c = Conn(sock, timeout=60)
    r, _ = c.call({"op": "write_file", "path": "/workspace/big", "data": b64(b"\0" * ((32 << 20) + 1))})
    check(is_error(r, "too_large"), f"a 32 MiB + 1 write: {r}")
    r, _ = c.call({"op": "read_file", "path": "/workspace/big"})
    check(is_error(r, "not_found"), f"a refused write left a file: {r}")
    c.close()
    log("too large: ok")

    # 200k arguments: run (or refused by the kernel), never a crash.
    c = Conn(sock, timeout=60)
    argv = ["sh", "-c", 'echo "$#"', "sh"] + ["x"] * 200000
    r, out = c.call({"op": "exec", "argv": argv})
    log("200k args:", {k: r.get(k) for k in ("ok", "exit_code", "error")}, out["stdout"][:20])
    check(r.get("ok") is False or r.get("exit_code") is not None, f"200k args: {r}")
    if r.get("ok") and r.get("exit_code") == 0:
        check(out["stdout"] == b"200000\n", f"200k args: {out}")
    argv = ["sh", "-c", 'echo "$#"', "sh"] + ["y" * 1000] * 20000  # 20 MB of arguments: E2BIG
    r, out = c.call({"op": "exec", "argv": argv})
    log("20 MB of args:", {k: r.get(k) for k in ("ok", "exit_code", "error")})
    check(r.get("ok") is False or r.get("exit_code") not in (None, 0), f"20 MB of args ran: {r}")
    c.close()
    alive("huge argv")

    # 300 connections at once: served, or refused with busy beyond the limit; never a crash.
    conns, answers = [], {"greeting": 0, "busy": 0, "closed": 0}
    errors = []

    def open_one():
        try:
            k = Conn(sock, timeout=30, greet=False, blocking_connect=True)
            conns.append(k)
        except OSError as e:
            errors.append(repr(e))

    threads = [threading.Thread(target=open_one, daemon=True) for _ in range(300)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    check(not errors, f"connects failed: {errors[:3]} ({len(errors)})")
    check(len(conns) == 300, f"only {len(conns)} of 300 connected")
    greeted = []
    for k in conns:
        m = k.msg()
        if m is None:
            answers["closed"] += 1
        elif m.get("protocol") == "evalbox.session.v1":
            answers["greeting"] += 1
            greeted.append(k)
        elif is_error(m, "busy"):
            answers["busy"] += 1
        else:
            raise Fail(f"a connection among 300 got {m}")
    log("300 connections:", answers)
    check(answers["closed"] == 0, f"connections closed without a word: {answers}")
    check(1 <= answers["greeting"] <= 128, f"greetings past the 128-connection limit: {answers}")
    check(answers["greeting"] + answers["busy"] == 300, f"{answers}")
    # The greeted ones all answer, at once.
    for i, k in enumerate(greeted):
        k.send({"id": i, "op": "ping"})
    for i, k in enumerate(greeted):
        r = k.msg()
        check(r == {"id": i, "ok": True}, f"ping on connection {i} of the greeted: {r}")
    for k in conns:
        k.close()
    deadline = time.monotonic() + 10
    while True:  # the server sees the hang-ups within moments
        try:
            k = Conn(sock)
            if k.greeting.get("protocol"):
                break
        except Exception:
            pass
        check(time.monotonic() < deadline, "the session stays busy after 300 connections closed")
        time.sleep(0.2)
    ping(k, "300 connections")
    k.close()
    alive("300 connections")

    # A client that starts `yes` and hangs up: the exec is killed within a few seconds —
    # whether it read some output first, or none at all.
    for variant in ("reads a little, then hangs up", "reads nothing, hangs up at once",
                    "reads nothing, hangs up after its buffers filled"):
        tag = "hostile-%08x" % random.getrandbits(32)
        c = Conn(sock)
        c.send({"id": 1, "op": "exec", "argv": ["sh", "-c", f"exec yes {tag}"]})
        if variant.startswith("reads a little"):
            for _ in range(3):
                m = c.msg()
                check(m and m.get("stream") == "stdout", f"yes: {m}")
        elif variant.endswith("at once"):
            time.sleep(0.3)
        else:
            time.sleep(2)
        check(host_pgrep(f"^yes {tag}$"), f"yes ({variant}) is not running")
        c.close()
        t = time.monotonic()
        while host_pgrep(f"^yes {tag}$") and time.monotonic() - t < 5:
            time.sleep(0.1)
        left = host_pgrep(f"^yes {tag}$")
        log(f"yes, client {variant}: " + ("still running after 5 s" if left else f"gone in {time.monotonic() - t:.1f} s"))
        if not soft(not left, f"`yes` went on running after its client hung up ({variant})"):
            for pid in left:  # our own exec's process: so that the rest of the test goes on
                os.kill(pid, signal.SIGKILL)
        k = Conn(sock)
        r, out = k.call({"op": "exec", "argv": ["sh", "-c", "ps -e -o args || true"]})
        soft(tag.encode() not in out["stdout"], f"yes listed inside after its client left ({variant})")
        k.close()
    # max_output: cut and killed.
    c = Conn(sock)
    r, out = c.call({"op": "exec", "argv": ["yes"], "max_output": 1000})
    check(r.get("ok") and r.get("truncated") is True, f"max_output 1000: {r}")
    check(len(out["stdout"]) == 1000, f"max_output 1000 delivered {len(out['stdout'])} bytes")
    check(r.get("exit_code") is None and r.get("signal") == 9, f"max_output: the exec was not killed: {r}")
    r, _ = c.call({"op": "exec", "argv": ["sh", "-c", "yes >&2"], "max_output": 1000, "stream": False})
    check(r.get("ok") and r.get("truncated") is True and len(unb64(r["stderr"])) <= 1000, f"stream false: {r}")
    # stream false: the output comes in the reply.
    r, _ = c.call({"op": "exec", "argv": ["sh", "-c", "echo o; echo e >&2; exit 4"], "stream": False})
    check(r.get("exit_code") == 4 and unb64(r["stdout"]) == b"o\n" and unb64(r["stderr"]) == b"e\n", f"{r}")
    # One request at a time: a ping during an exec is refused (busy), a cancel kills it.
    c.send({"id": "slow", "op": "exec", "argv": ["sleep", "60"], "timeout": 30})
    time.sleep(0.3)
    c.send({"id": "p", "op": "ping"})
    m = c.msg()
    check(is_error(m, "busy", "p"), f"a ping during an exec: {m}")
    c.send({"id": "bad-input", "op": "input", "data": "%%%"})
    m = c.msg()
    check(is_error(m, "invalid_request", "bad-input"), f"bad input during an exec: {m}")
    c.send_raw(b"garbage during an exec\n")
    m = c.msg()
    check(is_error(m, "invalid_request", None), f"garbage during an exec: {m}")
    t = time.monotonic()
    c.send({"id": "slow", "op": "cancel"})
    r, _ = c.reply("slow")
    check(r.get("ok") and r.get("cancelled") is True and time.monotonic() - t < 5, f"cancel: {r}")
    # input: stdin kept open, fed, closed -- the input sent once the exec runs...
    c.send({"id": "cat", "op": "exec", "argv": ["cat"], "stdin_open": True})
    time.sleep(0.5)
    c.send({"op": "input", "data": b64(bytes(range(256)))})
    c.send({"op": "input", "data": b64(b"end"), "eof": True})
    r, out = c.reply("cat")
    check(r.get("exit_code") == 0 and out["stdout"] == bytes(range(256)) + b"end", f"input: {r} {out}")
    c.close()
    # ... and right behind the exec request, in the same write (what `session exec -i` does
    # with a short stdin): the server must not leave those lines unread in its buffer.
    c = Conn(sock, timeout=5)
    c.send_raw(b"".join(json.dumps(m).encode() + b"\n" for m in [
        {"id": "cat2", "op": "exec", "argv": ["cat"], "stdin_open": True},
        {"op": "input", "data": b64(b"quick")},
        {"op": "input", "data": "", "eof": True}]))
    try:
        r, out = c.reply("cat2")
        soft(r.get("exit_code") == 0 and out["stdout"] == b"quick", f"input right behind exec: {r} {out}")
    except (socket.timeout, TimeoutError):
        soft(False, "exec of `cat` with stdin_open and its input lines sent in the same write as the "
             "request: no reply within 5 s (the input lines stay unread in the server's buffer; "
             "cat never gets its stdin nor its end)")
    c.close()
    alive("yes and cancels")
    # A stdin flood into a command that never reads it: the server holds a bounded backlog
    # (the rest waits in the client's socket), and the client's hang-up still ends the exec.
    def rss_kib(pid):
        with open(f"/proc/{pid}/status") as f:
            return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
    before = rss_kib(server_pid)
    c = Conn(sock, timeout=WAIT)
    c.send({"id": "flood", "op": "exec", "argv": ["sleep", "67"], "stdin_open": True, "timeout": 30})
    time.sleep(0.3)
    frame = (json.dumps({"op": "input", "data": b64(os.urandom(1 << 20))}) + "\n").encode()
    c.s.settimeout(3)
    sent = 0
    try:
        for _ in range(256):
            c.s.sendall(frame)
            sent += 1
    except (socket.timeout, TimeoutError):
        pass
    grew = rss_kib(server_pid) - before
    log(f"stdin flood: {sent} MiB sent before the server stopped reading; its RSS grew {grew} KiB")
    check(sent < 64, f"the server took {sent} MiB of input for a command that reads none")
    check(grew < 64 * 1024, f"a stdin flood grew the server by {grew} KiB")
    c.close()
    t = time.monotonic()
    while host_pgrep("^sleep 67$") and time.monotonic() - t < 10:
        time.sleep(0.1)
    check(not host_pgrep("^sleep 67$"), "the flooded exec still runs after its client hung up")
    alive("the stdin flood's hang-up")
    log("runaway output: ok")

    # /dev/zero, FIFOs, directories, devices: errors, not hangs.
    c = Conn(sock, timeout=WAIT)
    r, _ = c.call({"op": "exec", "argv": ["sh", "-c", "mkfifo /tmp/fifo /workspace/fifo && ln -s /dev/zero /workspace/zero"]})
    check(r.get("exit_code") == 0, f"mkfifo: {r}")
    for p in ["/dev/zero", "/dev/urandom", "/dev/null", "/dev/tty", "/tmp/fifo", "/workspace/fifo",
              "/workspace/zero", "/workspace", "/", "/proc/self/fd/0", "/dev/stdin", "/proc/kmsg"]:
        t = time.monotonic()
        try:
            r, _ = c.call({"op": "read_file", "path": p})
        except socket.timeout:
            raise Fail(f"read_file {p} hangs")
        log(f"  read_file {p}: {r.get('error', {}).get('kind') if not r.get('ok') else 'ok ' + str(r.get('size'))} in {time.monotonic() - t:.2f} s")
        if p == "/dev/null":
            check(r.get("ok") is False or r.get("size") == 0, f"read_file {p}: {r}")
        else:
            check(is_error(r), f"read_file {p}: {str(r)[:200]}")
            # A device or a FIFO is the caller's mistake, said as such, not the server's failure.
            check(r["error"]["kind"] != "internal", f"read_file {p}: {r}")
    for p in ["/tmp/fifo", "/workspace/fifo", "/dev/full", "/workspace/zero"]:
        try:
            r, _ = c.call({"op": "write_file", "path": p, "data": b64(b"x")})
        except socket.timeout:
            raise Fail(f"write_file {p} hangs")
        check(is_error(r), f"write_file {p}: {r}")
    r, _ = c.call({"op": "ls", "path": "/dev/zero"})
    check(r.get("ok") and [e["type"] for e in r["entries"]] == ["other"], f"ls /dev/zero: {r}")
    r, _ = c.call({"op": "read_file", "path": "/workspace/hello.txt", "max_bytes": 3})
    check(is_error(r, "too_large"), f"max_bytes 3: {r}")
    c.close()
    alive("devices and FIFOs")
    log("devices and FIFOs: ok")

    # Paths that try to leave the sandbox: never the host's content.
    c = Conn(sock)
    r, _ = c.call({"op": "exec", "argv": ["sh", "-c",
                   f"ln -s /etc/shadow /workspace/s1 && ln -s ../../../../../../.. /workspace/up && "
                   f"ln -s {marker} /workspace/m1 && ln -s /proc/1/root /workspace/p1 && "
                   f"ln -s {WORK} /workspace/hostwork"]})
    check(r.get("exit_code") == 0, f"ln -s: {r}")
    up = "../../../../../../../.."
    reads = ["../../../../etc/shadow", up + "/etc/shadow", "/etc/shadow", "/proc/1/root/etc/shadow",
             "/proc/self/root/etc/shadow", "/proc/self/root" + marker, "/proc/1/root" + marker,
             "/proc/1/cwd/hello.txt", "/proc/self/cwd" + marker, up + marker, marker, "s1", "/workspace/s1",
             "up" + marker, "/workspace/up/etc/shadow", "m1", "p1/etc/shadow", "p1" + marker, "hostwork/marker",
             "planted-abs", "planted-rel", "/workspace/../../../.." + marker,
             "/proc/" + str(server_pid) + "/root" + marker, "/proc/" + str(os.getpid()) + "/root" + marker]
    for p in reads:
        r, _ = c.call({"op": "read_file", "path": p})
        if r.get("ok"):
            data = unb64(r["data"])
            soft(not leaks(data), f"read_file {p} returned the host's content")
            log(f"  read_file {p}: ok, {len(data)} bytes (the sandbox's)")
        else:
            check(is_error(r), f"read_file {p}: {r}")
            log(f"  read_file {p}: {r['error']['kind']}")
    for p in [up + WORK, WORK, "/proc/1/root" + WORK, "hostwork", "up/" + WORK, "/proc/1/root", "p1"]:
        r, _ = c.call({"op": "ls", "path": p})
        if r.get("ok"):
            names = [e["name"] for e in r["entries"]]
            soft("marker" not in names and "state" not in names, f"ls {p} lists the host's {WORK}: {names}")
        log(f"  ls {p}: {'ok' if r.get('ok') else r['error']['kind']}")
    for p in [up + WORK + "/pwned", WORK + "/pwned2", "/proc/1/root" + WORK + "/pwned3", "hostwork/pwned4",
              "m1", "planted-abs", "planted-rel", "up" + marker]:
        r, _ = c.call({"op": "write_file", "path": p, "data": b64(b"pwned\n"), "parents": True})
        log(f"  write_file {p}: {'ok' if r.get('ok') else r['error']['kind']}")
    for n in ["pwned", "pwned2", "pwned3", "pwned4"]:
        soft(not os.path.exists(os.path.join(WORK, n)), f"a write_file reached the host: {WORK}/{n}")
    check(open(marker).read() == mark + "\n", "a write_file through a symlink changed the host's marker")
    # Where the sandbox may not write: permission, nothing on the host.
    for p in ["/usr/bin/evalbox-hostile-x", "/etc/passwd", "/usr/evalbox-hostile-dir/x"]:
        existed = os.path.exists(p)
        before = open(p, "rb").read() if existed else None
        r, _ = c.call({"op": "write_file", "path": p, "data": b64(b"pwned\n"), "parents": True})
        soft(is_error(r, "permission"), f"write_file {p} on a host-root session: {r}")
        check(os.path.exists(p) == existed and (not existed or open(p, "rb").read() == before),
              f"write_file {p} changed the host")
    c.close()
    alive("path traversal")
    log("paths: ok")

    # Another uid: the directory is 0700 (connect fails), and even with the way opened, the
    # server's SO_PEERCRED check closes the connection without a greeting.
    def as_nobody():
        pid = os.fork()
        if pid == 0:
            code = 3
            try:
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.settimeout(5)
                try:
                    s.connect(sock)
                except PermissionError:
                    os._exit(10)  # refused by the file system
                try:
                    data = s.recv(65536)
                    s.sendall(b'{"id":1,"op":"exec","argv":["touch","/workspace/nobody-was-here"]}\n')
                    data += s.recv(65536)
                except (ConnectionResetError, BrokenPipeError):
                    data = b""
                except socket.timeout:
                    os._exit(12)  # connected, kept waiting
                os._exit(11 if not data else 13)  # closed without a word / it spoke to us
            except BaseException:
                os._exit(code)
        _, st = os.waitpid(pid, 0)
        return os.waitstatus_to_exitcode(st)

    rc = as_nobody()
    soft(rc == 10, f"uid 65534 connecting to the 0700 session: child exit {rc} (10: refused)")
    opened = [WORK, STATE, os.path.join(STATE, "sessions"), os.path.dirname(sock)]
    modes = {p: os.stat(p).st_mode & 0o7777 for p in opened + [sock]}
    try:
        for p in opened:
            os.chmod(p, modes[p] | 0o001)
        os.chmod(sock, 0o666)
        rc = as_nobody()
    finally:
        for p, m in modes.items():
            os.chmod(p, m)
    soft(rc == 11, f"uid 65534 with the way opened: child exit {rc} "
          "(11: closed without a greeting; 12: kept waiting; 13: the server spoke to it)")
    c = Conn(sock)
    r, _ = c.call({"op": "read_file", "path": "/workspace/nobody-was-here"})
    check(is_error(r, "not_found"), f"uid 65534's request ran: {r}")
    c.close()
    log("another uid: ok")

    # After all of it: a plain exec, then stop ends the session cleanly.
    alive("everything")
    c = Conn(sock)
    r, out = c.call({"op": "exec", "argv": ["cat", "/workspace/hello.txt"]})
    check(r.get("exit_code") == 0 and out["stdout"] == b"hello\n", f"a plain exec at the end: {r} {out}")
    r, _ = c.call({"op": "stop"})
    check(r.get("ok") is True, f"stop: {r}")
    m = c.msg()
    check(m is None, f"the connection stayed open after stop: {m}")
    c.close()
    t = time.monotonic()
    sdir = os.path.dirname(sock)
    while (os.path.exists(sdir) or our_servers()) and time.monotonic() - t < 15:
        time.sleep(0.1)
    check(not os.path.exists(sock), "the socket is left after stop")
    check(not os.path.exists(sdir), f"the session's directory is left after stop: {os.listdir(sdir) if os.path.isdir(sdir) else ''}")
    check(not our_servers(), f"the session's server is still running after stop: {our_servers()}")
    log(f"stop: everything gone in {time.monotonic() - t:.1f} s")
    try:
        Conn(sock)
        raise Fail("a stopped session still accepts connections")
    except (FileNotFoundError, ConnectionRefusedError):
        pass
    layers = os.path.join(STATE, "session-layers")
    check(not os.path.isdir(layers) or not os.listdir(layers), f"session-layers left: {os.listdir(layers)}")
    runs = os.path.join(STATE, "runs")
    check(not os.path.isdir(runs) or not os.listdir(runs), f"runs left: {os.listdir(runs)}")
    mounts = [l for l in open("/proc/self/mountinfo") if STATE in l]
    check(not mounts, f"mounts left under the state dir: {mounts}")
    check(open(marker).read() == mark + "\n", "the marker changed")
    if FAILURES:
        raise Fail(f"{len(FAILURES)} failure(s):\n  " + "\n  ".join(FAILURES))
    print("session hostile: ok")


if __name__ == "__main__":
    run_test(main, cleanup, Fail)
