"""Tests for evalbox_session against an in-process fake session server.

Run with either of:

    python3 -m unittest discover -s clients/python/tests -v
    python3 clients/python/tests/test_evalbox_session.py

The fake server (FakeServer below) listens on a Unix socket in a temporary
directory, sends the greeting, and answers each request with a scripted
handler, one thread per connection, recording every request it received.
Every socket read in the tests is bounded by a timeout, and every thread is
joined, so a broken client fails a test instead of hanging it.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import stat
import sys
import tempfile
import threading
import unittest
from typing import Any, Callable, Dict, List, Optional, Tuple, Union
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import evalbox_session  # noqa: E402
from evalbox_session import (  # noqa: E402
    ExecFailed,
    ExecResult,
    ProtocolError,
    Session,
    SessionError,
    default_state_dir,
)

WAIT = 5.0  # seconds: the bound on every wait in these tests


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def greeting(session: str = "ses-test", max_message_bytes: int = 64 << 20,
             protocol: str = "evalbox.session.v1") -> Dict[str, Any]:
    return {
        "protocol": protocol,
        "session": session,
        "limits": {"max_message_bytes": max_message_bytes, "max_file_bytes": 32 << 20,
                   "max_output_bytes": 16 << 20, "max_execs": 256},
    }


class FakeConn:
    """The server's side of one connection, handed to handlers."""

    def __init__(self, sock: socket.socket, number: int) -> None:
        self.sock = sock
        self.number = number
        self.reader = sock.makefile("rb")

    def recv(self) -> Optional[Dict[str, Any]]:
        line = self.reader.readline()
        if not line:
            return None
        return json.loads(line)

    def send(self, obj: Dict[str, Any]) -> None:
        self.sock.sendall(json.dumps(obj).encode("utf-8") + b"\n")

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def ok(self, req: Dict[str, Any], **fields: Any) -> None:
        self.send({"id": req["id"], "ok": True, **fields})

    def error(self, req: Dict[str, Any], kind: str, message: str) -> None:
        self.send({"id": req["id"], "ok": False, "error": {"kind": kind, "message": message}})

    def frame(self, req: Dict[str, Any], stream: str, data: bytes) -> None:
        self.send({"id": req["id"], "stream": stream, "data": b64(data)})

    def exit(self, req: Dict[str, Any], exit_code: Optional[int] = 0, **fields: Any) -> None:
        reply = {"exit_code": exit_code, "signal": None, "timed_out": False, "cancelled": False,
                 "truncated": False, "duration_ms": 7, "stdout_bytes": 0, "stderr_bytes": 0}
        reply.update(fields)
        self.ok(req, **reply)

    def hang_up(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


Handler = Callable[[Dict[str, Any], FakeConn], None]


def default_handler(req: Dict[str, Any], conn: FakeConn) -> None:
    op = req.get("op")
    if op == "exec":
        conn.exit(req, 0)
    elif op == "info":
        conn.ok(req, session={"schema": "evalbox.session.v1", "id": "ses-test"})
    else:
        conn.ok(req)


class FakeServer:
    """A scripted evalbox session server: greeting, then handler(request, conn) per request."""

    def __init__(self, path: str, handler: Optional[Handler] = None,
                 greet: Union[Dict[str, Any], bytes, None] = None) -> None:
        self.path = path
        self.handler = handler or default_handler
        self.greet = greet if greet is not None else greeting()
        self.lock = threading.Lock()
        self.requests: List[Tuple[int, Dict[str, Any]]] = []  # (connection number, request)
        self.connections = 0
        self.hung_up: set = set()  # connection numbers the client closed
        self.errors: List[BaseException] = []
        self._clients: List[socket.socket] = []
        self._threads: List[threading.Thread] = []
        self._stopping = False
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(path)
        self.listener.listen(64)
        self._accepter = threading.Thread(target=self._accept_loop, daemon=True)
        self._accepter.start()

    def _accept_loop(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self._stopping:
                client.close()
                return
            with self.lock:
                number = self.connections
                self.connections += 1
                self._clients.append(client)
            t = threading.Thread(target=self._serve, args=(client, number), daemon=True)
            self._threads.append(t)
            t.start()

    def _serve(self, client: socket.socket, number: int) -> None:
        client.settimeout(WAIT)
        conn = FakeConn(client, number)
        try:
            if isinstance(self.greet, bytes):
                conn.send_raw(self.greet)
            else:
                conn.send(self.greet)
            while True:
                req = conn.recv()
                if req is None:
                    with self.lock:
                        self.hung_up.add(number)
                    return
                with self.lock:
                    self.requests.append((number, req))
                self.handler(req, conn)
        except OSError:
            pass
        except BaseException as e:  # a broken handler: report it to the test
            with self.lock:
                self.errors.append(e)
        finally:
            conn.reader.close()
            client.close()

    def ops(self, op: Optional[str] = None) -> List[Dict[str, Any]]:
        with self.lock:
            return [r for _, r in self.requests if op is None or r.get("op") == op]

    def close(self) -> None:
        self._stopping = True
        try:  # wake accept()
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(1)
            s.connect(self.path)
            s.close()
        except OSError:
            pass
        self._accepter.join(WAIT)
        self.listener.close()
        with self.lock:
            clients = list(self._clients)
        for c in clients:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for t in self._threads:
            t.join(WAIT)


class SessionTestCase(unittest.TestCase):
    def setUp(self) -> None:
        self._tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self._tmp.cleanup)
        self.tmp = self._tmp.name

    def server(self, handler: Optional[Handler] = None, name: str = "socket",
               greet: Union[Dict[str, Any], bytes, None] = None, path: Optional[str] = None) -> FakeServer:
        srv = FakeServer(path or os.path.join(self.tmp, name), handler, greet)
        self.addCleanup(self._check_server, srv)
        return srv

    def _check_server(self, srv: FakeServer) -> None:
        srv.close()
        if srv.errors:
            raise srv.errors[0]

    def connect(self, srv: FakeServer, **kw: Any) -> Session:
        s = Session.connect(srv.path, io_timeout=WAIT, connect_timeout=WAIT, **kw)
        self.addCleanup(s.close)
        return s


# --------------------------------------------------------------------------- exec


class ExecTests(SessionTestCase):
    def test_exec_collects_binary_frames_and_sends_fields(self) -> None:
        def handler(req: Dict[str, Any], conn: FakeConn) -> None:
            conn.frame(req, "stdout", b"\xff\x00")
            conn.frame(req, "stderr", b"warn\n")
            conn.frame(req, "stdout", b"tail\n")
            conn.exit(req, 0, stdout_bytes=7, stderr_bytes=5, duration_ms=42)

        srv = self.server(handler)
        s = self.connect(srv)
        r = s.exec(["python3", "-c", "x"], cwd="/workspace/sub", env={"A": "1"},
                   stdin=b"in\xfe", timeout=2.5, max_output=1000)
        self.assertEqual(r.stdout, b"\xff\x00tail\n")
        self.assertEqual(r.stderr, b"warn\n")
        self.assertEqual((r.exit_code, r.signal, r.duration_ms), (0, None, 42))
        self.assertEqual((r.stdout_bytes, r.stderr_bytes), (7, 5))
        self.assertTrue(r.ok)
        self.assertIs(r.check(), r)
        self.assertEqual(r.argv, ["python3", "-c", "x"])
        [req] = srv.ops("exec")
        self.assertEqual(req["argv"], ["python3", "-c", "x"])
        self.assertIs(req["stream"], True)
        self.assertEqual(req["cwd"], "/workspace/sub")
        self.assertEqual(req["env"], {"A": "1"})
        self.assertEqual(base64.b64decode(req["stdin"]), b"in\xfe")
        self.assertEqual(req["timeout"], 2.5)
        self.assertEqual(req["max_output"], 1000)

    def test_exec_omits_unset_fields_and_encodes_str_stdin(self) -> None:
        srv = self.server()
        s = self.connect(srv)
        s.exec(["cat"], stdin="héllo")
        [req] = srv.ops("exec")
        self.assertEqual(set(req), {"id", "op", "argv", "stream", "stdin"})
        self.assertEqual(base64.b64decode(req["stdin"]), "héllo".encode("utf-8"))

    def test_exit_status_mapping(self) -> None:
        cases = {
            "exit3": dict(exit_code=3),
            "sig9": dict(exit_code=None, signal=9),
            "timeout": dict(exit_code=None, signal=9, timed_out=True),
            "cancel": dict(exit_code=0, cancelled=True),
            "trunc": dict(exit_code=None, signal=9, truncated=True),
        }

        def handler(req: Dict[str, Any], conn: FakeConn) -> None:
            conn.frame(req, "stderr", b"boom: it broke\n")
            conn.exit(req, **cases[req["argv"][0]])

        srv = self.server(handler)
        s = self.connect(srv)
        r = s.exec(["exit3"])
        self.assertEqual((r.exit_code, r.signal, r.ok), (3, None, False))
        r = s.exec(["sig9"])
        self.assertEqual((r.exit_code, r.signal, r.ok), (None, 9, False))
        r = s.exec(["timeout"])
        self.assertTrue(r.timed_out)
        self.assertFalse(r.ok)
        r = s.exec(["cancel"])
        self.assertTrue(r.cancelled)
        self.assertFalse(r.ok)
        r = s.exec(["trunc"])
        self.assertTrue(r.truncated)
        self.assertIn("cut", r.describe())

    def test_check_raises_with_command_and_stderr_tail(self) -> None:
        def handler(req: Dict[str, Any], conn: FakeConn) -> None:
            conn.frame(req, "stderr", b"x" * 5000 + b"\nAssertionError: 1 != 2\n")
            conn.exit(req, 2)

        s = self.connect(self.server(handler))
        r = s.exec(["pytest", "-q", "tests dir"])
        with self.assertRaises(ExecFailed) as cm:
            r.check()
        e = cm.exception
        self.assertIsInstance(e, SessionError)
        self.assertEqual(e.kind, "exec_failed")
        self.assertIs(e.result, r)
        self.assertIn("pytest -q 'tests dir'", e.message)
        self.assertIn("exited with status 2", e.message)
        self.assertIn("AssertionError: 1 != 2", e.message)
        self.assertLess(len(e.message), 3000)

    def test_check_timed_out(self) -> None:
        r = ExecResult(exit_code=None, signal=9, timed_out=True, argv=["sleep", "100"])
        with self.assertRaisesRegex(ExecFailed, r"sleep 100. timed out; stderr was empty"):
            r.check()

    def test_on_output_called_in_order(self) -> None:
        chunks = [("stdout", b"1"), ("stderr", b"2"), ("stdout", b"3"), ("stderr", b"\xff")]

        def handler(req: Dict[str, Any], conn: FakeConn) -> None:
            for stream, data in chunks:
                conn.frame(req, stream, data)
            conn.exit(req, 0)

        s = self.connect(self.server(handler))
        seen: List[Tuple[str, bytes]] = []
        r = s.exec(["x"], on_output=lambda stream, data: seen.append((stream, data)))
        self.assertEqual(seen, chunks)
        self.assertEqual((r.stdout, r.stderr), (b"13", b"2\xff"))

    def test_exec_stream_yields_frames_then_exit(self) -> None:
        def handler(req: Dict[str, Any], conn: FakeConn) -> None:
            conn.frame(req, "stdout", b"a")
            conn.frame(req, "stderr", b"b")
            conn.exit(req, 1)

        s = self.connect(self.server(handler))
        items = list(s.exec_stream(["x"]))
        self.assertEqual(items[:2], [("stdout", b"a"), ("stderr", b"b")])
        kind, result = items[2]
        self.assertEqual(kind, "exit")
        self.assertIsInstance(result, ExecResult)
        self.assertEqual((result.exit_code, result.stdout, result.stderr), (1, b"a", b"b"))
        self.assertEqual(len(items), 3)

    def test_string_argv_is_a_type_error(self) -> None:
        srv = self.server()
        s = self.connect(srv)
        with self.assertRaisesRegex(TypeError, "list of strings"):
            s.exec("echo hi")  # type: ignore[arg-type]
        with self.assertRaises(TypeError):
            s.exec_stream(b"echo")  # type: ignore[arg-type]
        with self.assertRaises(TypeError):
            s.exec(["echo", 1])  # type: ignore[list-item]
        with self.assertRaises(ValueError):
            s.exec([])
        s.ping()
        self.assertEqual(srv.ops("exec"), [])

    def test_concurrent_execs_each_get_their_own_reply(self) -> None:
        n = 8
        barrier = threading.Barrier(n, timeout=WAIT)

        def handler(req: Dict[str, Any], conn: FakeConn) -> None:
            if req["op"] == "exec":
                barrier.wait()  # all 8 are in flight at once, each on its own connection
                conn.frame(req, "stdout", req["argv"][1].encode())
                conn.exit(req, int(req["argv"][1]))
            else:
                conn.ok(req)

        srv = self.server(handler)
        s = self.connect(srv)
        results: Dict[int, ExecResult] = {}
        failures: List[BaseException] = []

        def run(i: int) -> None:
            try:
                results[i] = s.exec(["echo", str(i)])
            except BaseException as e:
                failures.append(e)

        threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(WAIT * 2)
        self.assertEqual(failures, [])
        for i in range(n):
            self.assertEqual(results[i].stdout, str(i).encode())
            self.assertEqual(results[i].exit_code, i)
        self.assertEqual(srv.connections, n)
        ids = [r["id"] for r in srv.ops("exec")]
        self.assertEqual(len(set(ids)), n)
        s.ping()  # connections went back to the pool
        self.assertEqual(srv.connections, n)

    def test_on_output_keyboard_interrupt_cancels_and_drops_connection(self) -> None:
        closed = threading.Event()

        def handler(req: Dict[str, Any], conn: FakeConn) -> None:
            if req["op"] != "exec":
                conn.ok(req)
                return
            conn.frame(req, "stdout", b"working")
            nxt = conn.recv()  # the client's cancel, on this same connection
            if nxt is not None:
                with srv.lock:
                    srv.requests.append((conn.number, nxt))
                if conn.recv() is None:  # then the client hangs up
                    closed.set()

        srv = self.server(handler)
        s = self.connect(srv)

        def interrupt(stream: str, data: bytes) -> None:
            raise KeyboardInterrupt

        with self.assertRaises(KeyboardInterrupt):
            s.exec(["sleep", "100"], on_output=interrupt)
        self.assertTrue(closed.wait(WAIT), "the interrupted connection was not closed")
        [exec_req] = srv.ops("exec")
        [cancel] = srv.ops("cancel")
        self.assertEqual(cancel["id"], exec_req["id"])
        self.assertEqual({n for n, r in srv.requests}, {0})
        s.ping()  # a fresh connection: the interrupted one was not reused
        self.assertEqual(srv.connections, 2)

    @unittest.skipUnless(threading.current_thread() is threading.main_thread()
                         and hasattr(signal, "pthread_kill"), "needs the main thread")
    def test_ctrl_c_while_waiting_cancels(self) -> None:
        started = threading.Event()
        closed = threading.Event()

        def handler(req: Dict[str, Any], conn: FakeConn) -> None:
            started.set()
            nxt = conn.recv()
            if nxt is not None:
                srv.requests.append((conn.number, nxt))
                if conn.recv() is None:
                    closed.set()

        srv = self.server(handler)
        s = self.connect(srv)
        old = signal.signal(signal.SIGINT, signal.default_int_handler)
        self.addCleanup(signal.signal, signal.SIGINT, old)
        main = threading.main_thread().ident

        def ctrl_c() -> None:
            if started.wait(WAIT):
                signal.pthread_kill(main, signal.SIGINT)

        t = threading.Thread(target=ctrl_c)
        t.start()
        try:
            with self.assertRaises(KeyboardInterrupt):
                s.exec(["sleep", "100"])
        finally:
            t.join(WAIT)
        self.assertTrue(closed.wait(WAIT))
        self.assertEqual([r["op"] for r in srv.ops()], ["exec", "cancel"])

    def test_abandoned_exec_stream_cancels(self) -> None:
        closed = threading.Event()

        def handler(req: Dict[str, Any], conn: FakeConn) -> None:
            conn.frame(req, "stdout", b"1")
            nxt = conn.recv()
            if nxt is not None:
                srv.requests.append((conn.number, nxt))
            closed.set()

        srv = self.server(handler)
        s = self.connect(srv)
        gen = s.exec_stream(["yes"])
        self.assertEqual(next(gen), ("stdout", b"1"))
        gen.close()
        self.assertTrue(closed.wait(WAIT))
        self.assertEqual([r["op"] for r in srv.ops()], ["exec", "cancel"])

    def test_disconnect_mid_exec(self) -> None:
        def handler(req: Dict[str, Any], conn: FakeConn) -> None:
            conn.frame(req, "stdout", b"partial")
            conn.hang_up()

        s = self.connect(self.server(handler))
        with self.assertRaises(SessionError) as cm:
            s.exec(["x"])
        self.assertEqual(cm.exception.kind, "disconnected")


# --------------------------------------------------------------------------- errors and framing


class ProtocolTests(SessionTestCase):
    def test_greeting_exposes_id_and_limits(self) -> None:
        srv = self.server(greet=greeting(session="ses-3f9a", max_message_bytes=4096))
        s = self.connect(srv)
        self.assertEqual(s.id, "ses-3f9a")
        self.assertEqual(s.socket_path, srv.path)
        self.assertEqual(s.limits["max_message_bytes"], 4096)
        self.assertEqual(s.limits["max_execs"], 256)

    def test_error_reply_raises_session_error_with_kind(self) -> None:
        def handler(req: Dict[str, Any], conn: FakeConn) -> None:
            if req["op"] == "read_file":
                conn.error(req, "not_found", "no such file: /workspace/nope")
            else:
                conn.ok(req)

        srv = self.server(handler)
        s = self.connect(srv)
        with self.assertRaises(SessionError) as cm:
            s.read_file("/workspace/nope")
        self.assertNotIsInstance(cm.exception, ProtocolError)
        self.assertEqual(cm.exception.kind, "not_found")
        self.assertEqual(cm.exception.message, "no such file: /workspace/nope")
        self.assertIn("not_found", str(cm.exception))
        s.ping()  # the connection is still in step and is reused
        self.assertEqual(srv.connections, 1)

    def test_error_kinds_for_exec_and_grade(self) -> None:
        def handler(req: Dict[str, Any], conn: FakeConn) -> None:
            kind = {"exec": "busy", "grade": "unsupported"}[req["op"]]
            conn.error(req, kind, f"{req['op']} said no")

        s = self.connect(self.server(handler))
        with self.assertRaises(SessionError) as cm:
            s.exec(["x"])
        self.assertEqual(cm.exception.kind, "busy")
        with self.assertRaises(SessionError) as cm:
            s.grade()
        self.assertEqual(cm.exception.kind, "unsupported")

    def test_null_id_error_reply(self) -> None:
        def handler(req: Dict[str, Any], conn: FakeConn) -> None:
            conn.send({"id": None, "ok": False,
                       "error": {"kind": "invalid_request", "message": "bad line"}})

        s = self.connect(self.server(handler))
        with self.assertRaises(SessionError) as cm:
            s.ping()
        self.assertEqual(cm.exception.kind, "invalid_request")

    def test_wrong_protocol_greeting(self) -> None:
        srv = self.server(greet=greeting(protocol="evalbox.session.v9"))
        with self.assertRaises(ProtocolError) as cm:
            Session.connect(srv.path, connect_timeout=WAIT)
        self.assertEqual(cm.exception.kind, "protocol")
        self.assertIn("evalbox.session.v9", cm.exception.message)

    def test_garbage_greeting(self) -> None:
        srv = self.server(greet=b"SSH-2.0-OpenSSH_9.6\r\n")
        with self.assertRaises(ProtocolError):
            Session.connect(srv.path, connect_timeout=WAIT)

    def test_garbage_reply_line(self) -> None:
        def handler(req: Dict[str, Any], conn: FakeConn) -> None:
            if req["op"] == "ping":
                conn.send_raw(b"this is not json\n")
            else:
                default_handler(req, conn)

        srv = self.server(handler)
        s = self.connect(srv)
        with self.assertRaises(ProtocolError):
            s.ping()
        self.assertEqual(s.info()["schema"], "evalbox.session.v1")
        self.assertEqual(srv.connections, 2)  # the broken connection was dropped

    def test_line_longer_than_max_message_bytes(self) -> None:
        def handler(req: Dict[str, Any], conn: FakeConn) -> None:
            conn.ok(req, pad="x" * 500)

        s = self.connect(self.server(handler, greet=greeting(max_message_bytes=200)))
        with self.assertRaisesRegex(ProtocolError, "max_message_bytes"):
            s.ping()

    def test_request_too_large_is_not_sent(self) -> None:
        srv = self.server(greet=greeting(max_message_bytes=200))
        s = self.connect(srv)
        with self.assertRaises(SessionError) as cm:
            s.write_file("/workspace/big", b"x" * 1000)
        self.assertEqual(cm.exception.kind, "too_large")
        s.ping()
        self.assertEqual([r["op"] for r in srv.ops()], ["ping"])

    def test_frame_with_wrong_id(self) -> None:
        def handler(req: Dict[str, Any], conn: FakeConn) -> None:
            conn.send({"id": 999, "stream": "stdout", "data": b64(b"not yours")})
            conn.exit(req, 0)

        s = self.connect(self.server(handler))
        with self.assertRaisesRegex(ProtocolError, "999"):
            s.exec(["x"])

    def test_reply_with_wrong_id(self) -> None:
        def handler(req: Dict[str, Any], conn: FakeConn) -> None:
            conn.send({"id": req["id"] + 100, "ok": True})

        s = self.connect(self.server(handler))
        with self.assertRaises(ProtocolError):
            s.ping()

    def test_bad_base64_frame(self) -> None:
        def handler(req: Dict[str, Any], conn: FakeConn) -> None:
            conn.send({"id": req["id"], "stream": "stdout", "data": "@@not base64@@"})
            conn.exit(req, 0)

        s = self.connect(self.server(handler))
        with self.assertRaisesRegex(ProtocolError, "base64"):
            s.exec(["x"])

    def test_connect_to_missing_socket(self) -> None:
        with self.assertRaises(SessionError) as cm:
            Session.connect(os.path.join(self.tmp, "nothing-here"))
        self.assertEqual(cm.exception.kind, "connect_failed")
        self.assertIn("nothing-here", cm.exception.message)


# --------------------------------------------------------------------------- files and ops


class OpTests(SessionTestCase):
    def test_write_file_sends_base64_of_bytes_and_utf8_str(self) -> None:
        def handler(req: Dict[str, Any], conn: FakeConn) -> None:
            conn.ok(req, size=len(base64.b64decode(req["data"])))

        srv = self.server(handler)
        s = self.connect(srv)
        self.assertEqual(s.write_file("/workspace/a.bin", b"\x00\xff\x10"), 3)
        self.assertEqual(s.write_file("/workspace/b.txt", "naïve ✓", mode=0o755, append=True,
                                      parents=True), len("naïve ✓".encode("utf-8")))
        a, b = srv.ops("write_file")
        self.assertEqual(a["path"], "/workspace/a.bin")
        self.assertEqual(base64.b64decode(a["data"]), b"\x00\xff\x10")
        self.assertNotIn("mode", a)
        self.assertNotIn("append", a)
        self.assertEqual(base64.b64decode(b["data"]), "naïve ✓".encode("utf-8"))
        self.assertEqual((b["mode"], b["append"], b["parents"]), (0o755, True, True))

    def test_read_file_decodes(self) -> None:
        content = b"line1\n\xff\xfe\x00binary"

        def handler(req: Dict[str, Any], conn: FakeConn) -> None:
            conn.ok(req, data=b64(content), size=len(content), mode=0o644)

        srv = self.server(handler)
        s = self.connect(srv)
        self.assertEqual(s.read_file("/workspace/f", max_bytes=100), content)
        [req] = srv.ops("read_file")
        self.assertEqual((req["path"], req["max_bytes"]), ("/workspace/f", 100))

    def test_ls_snapshot_reset_grade_info(self) -> None:
        entries = [{"name": "a.py", "type": "file", "size": 3, "mode": 0o644, "mtime": 1.5}]

        def handler(req: Dict[str, Any], conn: FakeConn) -> None:
            op = req["op"]
            if op == "ls":
                conn.ok(req, entries=entries)
            elif op == "snapshot":
                conn.ok(req, name=req["name"], bytes=10, files=2, ms=3)
            elif op == "reset":
                conn.ok(req, ms=4)
            elif op == "grade":
                conn.ok(req, verdict="pass", checks=[])
            else:
                default_handler(req, conn)

        srv = self.server(handler)
        s = self.connect(srv)
        self.assertEqual(s.ls("/workspace"), entries)
        self.assertEqual(s.snapshot("clean"), {"name": "clean", "bytes": 10, "files": 2, "ms": 3})
        self.assertEqual(s.reset(), {"ms": 4})
        self.assertEqual(s.reset(to="clean"), {"ms": 4})
        self.assertEqual(s.grade(), {"verdict": "pass", "checks": []})
        self.assertEqual(s.info(), {"schema": "evalbox.session.v1", "id": "ses-test"})
        s.ping()
        resets = srv.ops("reset")
        self.assertNotIn("to", resets[0])
        self.assertEqual(resets[1]["to"], "clean")
        ids = [r["id"] for r in srv.ops()]
        self.assertEqual(len(ids), len(set(ids)))

    def test_fork_returns_connected_sessions(self) -> None:
        kids = [self.server(name=f"kid{i}", greet=greeting(session=f"ses-kid{i}")) for i in range(3)]

        def handler(req: Dict[str, Any], conn: FakeConn) -> None:
            if req["op"] == "fork":
                conn.ok(req, sessions=[{"id": f"ses-kid{i}", "socket": k.path}
                                       for i, k in enumerate(kids)])
            else:
                conn.ok(req)

        srv = self.server(handler)
        s = self.connect(srv)
        forks = s.fork(count=3, from_="clean")
        for f in forks:
            self.addCleanup(f.close)
        self.assertEqual([f.id for f in forks], ["ses-kid0", "ses-kid1", "ses-kid2"])
        for f, k in zip(forks, kids):
            self.assertEqual(f.socket_path, k.path)
            f.ping()
            self.assertEqual([r["op"] for r in k.ops()], ["ping"])
        [req] = srv.ops("fork")
        self.assertEqual((req["count"], req["from"]), (3, "clean"))
        for f in s.fork():
            f.close()
        self.assertNotIn("from", srv.ops("fork")[1])
        self.assertEqual(srv.ops("fork")[1]["count"], 1)


# --------------------------------------------------------------------------- locating, starting, ending


class LifecycleTests(SessionTestCase):
    def test_connect_by_id_uses_state_dir(self) -> None:
        state = os.path.join(self.tmp, "state")
        os.makedirs(os.path.join(state, "sessions", "ses-abc"))
        path = os.path.join(state, "sessions", "ses-abc", "socket")
        srv = self.server(path=path, greet=greeting(session="ses-abc"))
        s = Session.connect("ses-abc", state_dir=state, connect_timeout=WAIT, io_timeout=WAIT)
        self.addCleanup(s.close)
        self.assertEqual(s.socket_path, path)
        self.assertEqual(s.id, "ses-abc")
        with mock.patch.dict(os.environ, {"EVALBOX_STATE_DIR": state}):
            s2 = Session.connect("ses-abc", connect_timeout=WAIT, io_timeout=WAIT)
        self.addCleanup(s2.close)
        self.assertEqual(s2.socket_path, path)
        s2.ping()
        self.assertEqual(srv.connections, 2)

    def test_default_state_dir(self) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("EVALBOX_STATE_DIR", "XDG_STATE_HOME")}
        with mock.patch.dict(os.environ, env, clear=True):
            with mock.patch("os.geteuid", return_value=0):
                self.assertEqual(default_state_dir(), "/var/lib/evalbox")
            with mock.patch("os.geteuid", return_value=1000):
                self.assertEqual(default_state_dir(),
                                 os.path.join(os.path.expanduser("~"), ".local", "state", "evalbox"))
                os.environ["XDG_STATE_HOME"] = "/xdg/state"
                self.assertEqual(default_state_dir(), "/xdg/state/evalbox")
                os.environ["EVALBOX_STATE_DIR"] = "/explicit"
                self.assertEqual(default_state_dir(), "/explicit")

    def fake_evalbox(self, socket_path: str) -> Tuple[str, str]:
        """Write an executable stand-in for `evalbox`; it records its arguments."""
        record = os.path.join(self.tmp, "evalbox-args.json")
        script = os.path.join(self.tmp, "fake-evalbox")
        with open(script, "w") as f:
            f.write(f"""#!{sys.executable}
import json, os, sys
args = sys.argv[1:]
with open({record!r}, "w") as out:
    json.dump({{"args": args, "state_dir": os.environ.get("EVALBOX_STATE_DIR")}}, out)
if "--fixture" in args and args[args.index("--fixture") + 1] == "missing":
    print("evalbox: fixture 'missing': no such directory", file=sys.stderr)
    sys.exit(2)
print("preparing sandbox...", file=sys.stderr)
print(json.dumps({{"id": "ses-started", "socket": {socket_path!r}, "expires": "2030-01-01T00:00:00Z"}}))
""")
        os.chmod(script, stat.S_IRWXU)
        return script, record

    def test_start_runs_evalbox_and_connects(self) -> None:
        srv = self.server(greet=greeting(session="ses-started"))
        exe, record = self.fake_evalbox(srv.path)
        state = os.path.join(self.tmp, "st")
        s = Session.start(image="docker://python:3.13", workspace="repo/", ttl=90, network="none",
                          state_dir=state, evalbox=exe, extra_args=["--memory", "2G"],
                          connect_timeout=WAIT, io_timeout=WAIT)
        self.addCleanup(s.close)
        with open(record) as f:
            got = json.load(f)
        self.assertEqual(got["args"], [
            "session", "start", "--json", "--owner", str(os.getpid()),
            "--image", "docker://python:3.13", "--workspace", "repo/", "--ttl", "90",
            "--network", "none", "--memory", "2G",
        ])
        self.assertEqual(got["state_dir"], state)
        self.assertEqual(s.id, "ses-started")
        self.assertEqual(s.start_info["expires"], "2030-01-01T00:00:00Z")
        s.ping()
        self.assertEqual([r["op"] for r in srv.ops()], ["ping"])

    def test_start_detach_and_evalbox_bin(self) -> None:
        srv = self.server(greet=greeting(session="ses-started"))
        exe, record = self.fake_evalbox(srv.path)
        with mock.patch.dict(os.environ, {"EVALBOX_BIN": exe}):
            s = Session.start(fixture="fixtures/examples/off-by-one", detach=True,
                              connect_timeout=WAIT, io_timeout=WAIT)
        self.addCleanup(s.close)
        with open(record) as f:
            args = json.load(f)["args"]
        self.assertEqual(args, ["session", "start", "--json", "--detach",
                                "--fixture", "fixtures/examples/off-by-one"])

    def test_start_failure_raises_with_stderr(self) -> None:
        exe, _ = self.fake_evalbox(os.path.join(self.tmp, "unused"))
        with self.assertRaises(SessionError) as cm:
            Session.start(fixture="missing", evalbox=exe)
        self.assertEqual(cm.exception.kind, "start_failed")
        self.assertIn("fixture 'missing': no such directory", cm.exception.message)
        self.assertIn("status 2", cm.exception.message)

    def test_start_with_missing_program(self) -> None:
        with self.assertRaises(SessionError) as cm:
            Session.start(evalbox=os.path.join(self.tmp, "no-such-evalbox"))
        self.assertEqual(cm.exception.kind, "start_failed")
        self.assertIn("EVALBOX_BIN", cm.exception.message)

    def test_stop_is_idempotent(self) -> None:
        srv = self.server()
        s = self.connect(srv)
        s.stop()
        s.stop()
        self.assertEqual([r["op"] for r in srv.ops()], ["stop"])
        with self.assertRaises(SessionError) as cm:
            s.ping()
        self.assertEqual(cm.exception.kind, "ended")

    def test_stop_ignores_ended_and_hang_up(self) -> None:
        def ended(req: Dict[str, Any], conn: FakeConn) -> None:
            conn.error(req, "ended", "the session has ended")

        def hang_up(req: Dict[str, Any], conn: FakeConn) -> None:
            conn.hang_up()

        self.connect(self.server(ended, name="a")).stop()
        self.connect(self.server(hang_up, name="b")).stop()

    def test_stop_raises_other_errors(self) -> None:
        def internal(req: Dict[str, Any], conn: FakeConn) -> None:
            conn.error(req, "internal", "could not remove the sandbox")

        s = self.connect(self.server(internal))
        with self.assertRaises(SessionError) as cm:
            s.stop()
        self.assertEqual(cm.exception.kind, "internal")

    def test_context_manager_stops(self) -> None:
        srv = self.server()
        with self.connect(srv) as s:
            s.ping()
        self.assertEqual([r["op"] for r in srv.ops()], ["ping", "stop"])

    def test_context_manager_stops_on_exception(self) -> None:
        srv = self.server()
        with self.assertRaises(RuntimeError):
            with self.connect(srv):
                raise RuntimeError("agent crashed")
        self.assertEqual([r["op"] for r in srv.ops()], ["stop"])

    def test_close_leaves_session_running(self) -> None:
        srv = self.server()
        with self.connect(srv) as s:
            s.close()
            with self.assertRaises(SessionError) as cm:
                s.ping()
            self.assertEqual(cm.exception.kind, "closed")
        self.assertEqual(srv.ops(), [])

    def test_module_metadata(self) -> None:
        self.assertEqual(evalbox_session.__version__, "1")
        for name in evalbox_session.__all__:
            self.assertTrue(hasattr(evalbox_session, name), name)


if __name__ == "__main__":
    unittest.main()
