"""A Python client for evalbox sessions (protocol ``evalbox.session.v1``).

An evalbox *session* is a sandbox that stays up and runs whatever a program asks
for: commands, file reads and writes, snapshots, resets, forks.  This module is
the client side of the session protocol documented in ``docs/sessions.md``.  It
is one file, standard library only, Python 3.9 or newer: copy it next to your
code or put ``clients/python`` on ``PYTHONPATH``.

A typical loop::

    from evalbox_session import Session

    with Session.start(image="docker://python:3.13", workspace="repo/") as s:
        s.write_file("/workspace/fix.py", "print('hi')\\n")
        r = s.exec(["python3", "fix.py"], cwd="/workspace", timeout=60)
        print(r.exit_code, r.stdout.decode())
        s.snapshot("clean")
        kids = s.fork(count=8, from_="clean")     # eight more sessions, connected

How it talks to the server
--------------------------
The server listens on a Unix stream socket.  Every message is one JSON object
on one line.  On connect the server sends a *greeting* naming the protocol and
its limits; this client refuses a server that speaks another protocol
(:class:`ProtocolError`).  Each request carries an ``"id"`` and an ``"op"``;
the server answers it with exactly one final reply, ``{"id", "ok": true, ...}``
or ``{"id", "ok": false, "error": {"kind", "message"}}`` -- the latter becomes a
:class:`SessionError` whose ``kind`` is the protocol's error kind.  An ``exec``
also streams *frames* before its reply: ``{"id", "stream": "stdout", "data":
<base64>}``.  All bytes (files, output, input) travel as base64.

A connection carries one request at a time, so a :class:`Session` keeps a
small pool of connections: a request borrows an idle connection (or opens a new
one) and gives it back when its reply has arrived.  That makes a ``Session``
safe to share between threads -- eight threads may ``exec`` at once, each on
its own connection.  A connection whose conversation went wrong (a broken
line, a disconnect, an interrupted exec) is closed rather than reused.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import json
import math
import os
import shlex
import socket
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from typing import (
    Any,
    Callable,
    Dict,
    Generator,
    Iterable,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Union,
)

__version__ = "1"

__all__ = [
    "PROTOCOL",
    "Session",
    "ExecResult",
    "SessionError",
    "ProtocolError",
    "ExecFailed",
    "default_state_dir",
    "__version__",
]

#: The protocol this client speaks; the server's greeting must name it.
PROTOCOL = "evalbox.session.v1"

#: Used until a greeting tells us the server's own limit (docs/sessions.md: 64 MiB).
_DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024

#: How much of stderr :meth:`ExecResult.check` quotes in its message.
_STDERR_TAIL_BYTES = 2000

#: Bytes or text; text is encoded as UTF-8 before it is sent.
Data = Union[bytes, bytearray, memoryview, str]

#: ``on_output(stream, data)``: ``stream`` is ``"stdout"`` or ``"stderr"``.
OutputCallback = Callable[[str, bytes], None]


# --------------------------------------------------------------------------- errors


class SessionError(Exception):
    """A request failed.

    ``kind`` says why, ``message`` says it in words.  Kinds that come from the
    server (see docs/sessions.md, "Error kinds"):

    ``invalid_request``, ``unknown_op``, ``too_large``, ``not_found``,
    ``permission``, ``busy``, ``unsupported``, ``ended``, ``internal``.

    Kinds this client adds for things that happen on its side:

    ``start_failed``   ``evalbox session start`` failed (``message`` has its stderr)
    ``connect_failed`` the session's socket could not be connected to
    ``disconnected``   the server closed the connection before answering
    ``io_timeout``     no message from the server within ``io_timeout`` seconds
    ``closed``         :meth:`Session.close` was called on this object
    ``too_large``      also raised locally for a request longer than the
                       server's ``max_message_bytes`` (nothing is sent)
    ``protocol``       see :class:`ProtocolError`
    ``exec_failed``    see :class:`ExecFailed`
    """

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(kind, message)
        self.kind = kind
        self.message = message

    def __str__(self) -> str:
        return f"{self.message} [{self.kind}]"


class ProtocolError(SessionError):
    """The server does not speak ``evalbox.session.v1``, or broke its framing.

    Raised for a greeting naming another protocol, a line that is not a JSON
    object, a line longer than the greeting's ``max_message_bytes``, bad base64,
    or a frame or reply whose ``id`` is not the request's.  The connection it
    happened on is closed; the :class:`Session` opens a fresh one for the next
    request.
    """

    def __init__(self, message: str) -> None:
        super().__init__("protocol", message)


class ExecFailed(SessionError):
    """Raised by :meth:`ExecResult.check` for a command that did not succeed.

    ``result`` is the :class:`ExecResult`; the message names the command, how
    it ended, and the end of its stderr.
    """

    def __init__(self, result: "ExecResult", message: str) -> None:
        super().__init__("exec_failed", message)
        self.result = result


# --------------------------------------------------------------------------- results


@dataclass
class ExecResult:
    """What an ``exec`` did.

    ``exit_code`` is the exit status, or ``None`` when the process was killed
    by a signal (then ``signal`` holds its number).  ``timed_out`` means the
    request's ``timeout`` killed it, ``cancelled`` that a ``cancel`` did, and
    ``truncated`` that its output passed ``max_output`` (the output is cut and
    the command killed).  ``stdout``/``stderr`` are the bytes delivered, exactly
    as written -- decode them yourself (``r.stdout.decode(errors="replace")``).
    ``stdout_bytes``/``stderr_bytes`` count what the command wrote, which is
    more than was delivered when ``truncated``.
    """

    exit_code: Optional[int] = None
    signal: Optional[int] = None
    stdout: bytes = b""
    stderr: bytes = b""
    timed_out: bool = False
    cancelled: bool = False
    truncated: bool = False
    duration_ms: int = 0
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    argv: List[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when the command exited with status 0 and was not timed out or cancelled."""
        return self.exit_code == 0 and not self.timed_out and not self.cancelled

    def describe(self) -> str:
        """How the command ended, in words: ``"exited with status 1"``, ``"timed out"``..."""
        if self.timed_out:
            how = "timed out"
        elif self.cancelled:
            how = "was cancelled"
        elif self.exit_code is not None:
            how = f"exited with status {self.exit_code}"
        elif self.signal is not None:
            how = f"was killed by signal {self.signal}"
        else:
            how = "ended without an exit status"
        if self.truncated:
            how += " (its output passed max_output and was cut)"
        return how

    def check(self) -> "ExecResult":
        """Return ``self`` if :attr:`ok`, else raise :class:`ExecFailed`.

        ``s.exec(["make"]).check()`` reads like ``subprocess.run(..., check=True)``.
        """
        if self.ok:
            return self
        command = shlex.join(self.argv) if self.argv else "(unknown command)"
        message = f"command `{command}` {self.describe()}"
        tail = self.stderr[-_STDERR_TAIL_BYTES:].decode("utf-8", errors="replace").strip()
        if tail:
            cut = "..." if len(self.stderr) > _STDERR_TAIL_BYTES else ""
            message += f"; stderr ends with:\n{cut}{tail}"
        else:
            message += "; stderr was empty"
        raise ExecFailed(self, message)

    def __repr__(self) -> str:  # output can be megabytes: show a preview only
        def preview(b: bytes) -> str:
            return repr(b[:60]) + (f"...({len(b)} bytes)" if len(b) > 60 else "")

        return (
            f"ExecResult(argv={self.argv!r}, exit_code={self.exit_code!r}, "
            f"signal={self.signal!r}, timed_out={self.timed_out}, "
            f"cancelled={self.cancelled}, truncated={self.truncated}, "
            f"duration_ms={self.duration_ms}, stdout={preview(self.stdout)}, "
            f"stderr={preview(self.stderr)})"
        )


# --------------------------------------------------------------------------- helpers


def default_state_dir() -> str:
    """Where evalbox keeps its state, as the ``evalbox`` command decides it.

    ``$EVALBOX_STATE_DIR`` if set; else ``/var/lib/evalbox`` for root; else
    ``$XDG_STATE_HOME/evalbox``, ``XDG_STATE_HOME`` defaulting to
    ``~/.local/state``.  Sessions live in ``<state>/sessions/<id>/``.
    """
    env = os.environ.get("EVALBOX_STATE_DIR")
    if env:
        return env
    if os.geteuid() == 0:
        return "/var/lib/evalbox"
    xdg = os.environ.get("XDG_STATE_HOME")
    if not xdg:
        xdg = os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(xdg, "evalbox")


def _b64encode(data: Data) -> str:
    if isinstance(data, str):
        data = data.encode("utf-8")
    elif not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"expected bytes or str, got {type(data).__name__}")
    return base64.b64encode(bytes(data)).decode("ascii")


def _b64decode(value: Any, what: str) -> bytes:
    if not isinstance(value, str):
        raise ProtocolError(f"{what} should be a base64 string, got {type(value).__name__}")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as e:
        raise ProtocolError(f"{what} is not valid base64: {e}") from None


def _check_argv(argv: Any) -> List[str]:
    if isinstance(argv, (str, bytes, bytearray)):
        raise TypeError(
            "argv must be a list of strings, one per argument, e.g. "
            f"['sh', '-c', 'make test'] -- not a single string ({argv!r}); "
            "nothing is split or passed through a shell for you"
        )
    try:
        items = [os.fspath(a) if isinstance(a, os.PathLike) else a for a in argv]
    except TypeError:
        raise TypeError(f"argv must be a list of strings, got {type(argv).__name__}") from None
    if not items:
        raise ValueError("argv is empty: name a program to run")
    for i, a in enumerate(items):
        if not isinstance(a, str):
            raise TypeError(f"argv[{i}] must be a str, got {type(a).__name__} ({a!r})")
    return items


def _reply_fields(reply: Dict[str, Any]) -> Dict[str, Any]:
    """A successful reply without its envelope (``id``, ``ok``)."""
    return {k: v for k, v in reply.items() if k not in ("id", "ok")}


def _raise_if_error(reply: Dict[str, Any], op: str) -> Dict[str, Any]:
    ok = reply.get("ok")
    if ok is True:
        return reply
    if ok is not False:
        raise ProtocolError(f"reply to {op!r} has \"ok\": {ok!r}; expected true or false")
    error = reply.get("error")
    if not isinstance(error, dict):
        raise ProtocolError(f"error reply to {op!r} has no \"error\" object: {reply!r}")
    kind = error.get("kind")
    message = error.get("message")
    raise SessionError(
        kind if isinstance(kind, str) else "internal",
        message if isinstance(message, str) else f"{op} failed ({error!r})",
    )


# --------------------------------------------------------------------------- connection


class _Connection:
    """One socket to the server: greeting checked, one request at a time."""

    def __init__(self, path: str, connect_timeout: Optional[float], io_timeout: Optional[float]) -> None:
        self.path = path
        self.max_message_bytes = _DEFAULT_MAX_MESSAGE_BYTES
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        dir_fd = -1
        try:
            sock.settimeout(connect_timeout)
            address = path
            if len(os.fsencode(path)) > 107:
                # Past sun_path's limit (a deep state directory): the same socket, reached
                # through its directory's descriptor.
                dir_fd = os.open(os.path.dirname(path) or ".", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
                address = f"/proc/self/fd/{dir_fd}/{os.path.basename(path)}"
            sock.connect(address)
        except socket.timeout:
            sock.close()
            raise SessionError("connect_failed", f"connecting to {path} timed out") from None
        except OSError as e:
            sock.close()
            reason = e.strerror or str(e)
            raise SessionError(
                "connect_failed",
                f"cannot connect to session socket {path}: {reason} "
                "(has the session ended? `evalbox session ls` lists running sessions)",
            ) from None
        finally:
            if dir_fd >= 0:
                os.close(dir_fd)
        self.sock = sock
        self.reader = sock.makefile("rb")
        try:
            try:
                greeting = self.read_message()
            except ProtocolError as e:
                raise ProtocolError(f"{path} did not send an evalbox greeting: {e.message}") from None
            except SessionError as e:
                if e.kind in ("disconnected", "io_timeout"):
                    raise SessionError(e.kind, f"{path}: no greeting from the server: {e.message}") from None
                raise
            protocol = greeting.get("protocol")
            if protocol != PROTOCOL:
                raise ProtocolError(
                    f"{path} speaks protocol {protocol!r}, but this client speaks {PROTOCOL!r}; "
                    "use a client that matches the server's evalbox version"
                )
            limits = greeting.get("limits")
            if not isinstance(limits, dict):
                limits = {}
            mmb = limits.get("max_message_bytes")
            if isinstance(mmb, int) and not isinstance(mmb, bool) and mmb > 0:
                self.max_message_bytes = mmb
            self.greeting = greeting
            self.limits: Dict[str, Any] = limits
            sock.settimeout(io_timeout)
        except BaseException:
            self.close()
            raise

    def read_message(self) -> Dict[str, Any]:
        """Read one line and parse it as a JSON object."""
        limit = self.max_message_bytes
        try:
            line = self.reader.readline(limit + 1)
        except socket.timeout:
            raise SessionError("io_timeout", f"no message from {self.path} within the io_timeout") from None
        except OSError as e:
            raise SessionError("disconnected", f"reading from {self.path} failed: {e}") from None
        if not line:
            raise SessionError(
                "disconnected",
                f"the session server at {self.path} closed the connection (has the session ended?)",
            )
        if not line.endswith(b"\n"):
            if len(line) > limit:
                raise ProtocolError(
                    f"the server sent a message longer than its max_message_bytes ({limit} bytes)"
                )
            raise ProtocolError("the connection closed in the middle of a message")
        try:
            msg = json.loads(line)
        except ValueError:
            raise ProtocolError(f"the server sent a line that is not JSON: {line[:120]!r}") from None
        if not isinstance(msg, dict):
            raise ProtocolError(f"the server sent JSON that is not an object: {line[:120]!r}")
        return msg

    def send_line(self, line: bytes) -> None:
        try:
            self.sock.sendall(line)
        except socket.timeout:
            raise SessionError("io_timeout", f"sending to {self.path} timed out") from None
        except OSError as e:
            raise SessionError("disconnected", f"sending to {self.path} failed: {e}") from None

    def cancel_and_close(self, request_id: int) -> None:
        """Best effort: tell the server to kill the running exec, then hang up.

        Hanging up cancels a running exec too (docs/sessions.md), so the cancel is
        a courtesy that makes the kill immediate and explicit; errors are ignored.
        """
        try:
            self.sock.settimeout(1.0)
            msg = {"id": request_id, "op": "cancel"}
            self.sock.sendall(json.dumps(msg).encode("utf-8") + b"\n")
        except OSError:
            pass
        self.close()

    def close(self) -> None:
        for closer in (self.reader.close, self.sock.close):
            try:
                closer()
            except OSError:
                pass


def _next_message(conn: _Connection, request_id: int, op: str) -> Union[Tuple[str, bytes], Dict[str, Any]]:
    """The next frame ``(stream, data)`` or the final reply (a dict) for ``request_id``."""
    msg = conn.read_message()
    if "stream" in msg and "ok" not in msg:
        if msg.get("id") != request_id or isinstance(msg.get("id"), bool):
            raise ProtocolError(
                f"got an output frame for request id {msg.get('id')!r} while waiting for {request_id!r}"
            )
        stream = msg.get("stream")
        if stream not in ("stdout", "stderr"):
            raise ProtocolError(f"frame names an unknown stream {stream!r}")
        return (stream, _b64decode(msg.get("data"), f"{stream} frame data"))
    if "ok" not in msg:
        raise ProtocolError(f"message is neither a reply nor a frame: {msg!r:.200}")
    rid = msg.get("id")
    # A reply with "id": null is the server saying it could not read our request at all.
    if (rid != request_id or isinstance(rid, bool)) and not (rid is None and msg.get("ok") is False):
        raise ProtocolError(f"got a reply for request id {rid!r} while waiting for {request_id!r} ({op})")
    return msg


# --------------------------------------------------------------------------- session


class Session:
    """A running evalbox session, seen from Python.

    Get one with :meth:`start` (starts a new session and connects) or
    :meth:`connect` (an existing one, by id or socket path); :meth:`fork`
    returns more.  Use it as a context manager so the session is stopped when
    you are done::

        with Session.start(fixture="fixtures/examples/off-by-one") as s:
            s.exec(["python3", "-m", "pytest", "-q"]).check()
            print(s.grade()["verdict"])

    Methods raise :class:`SessionError` (``kind`` tells which failure) and are
    safe to call from several threads at once.
    """

    def __init__(self, _conn: _Connection, socket_path: str, session_id: Optional[str],
                 connect_timeout: Optional[float], io_timeout: Optional[float],
                 pool_size: int) -> None:
        # Private: use Session.start / Session.connect.
        greeting_id = _conn.greeting.get("session")
        self._id: str = greeting_id if isinstance(greeting_id, str) else (session_id or socket_path)
        self._socket_path = socket_path
        self._limits: Dict[str, Any] = dict(_conn.limits)
        self._max_message_bytes = _conn.max_message_bytes
        self._connect_timeout = connect_timeout
        self._io_timeout = io_timeout
        self._pool_size = max(1, pool_size)
        self._lock = threading.Lock()
        self._idle: List[_Connection] = [_conn]
        self._ids = itertools.count(1)
        self._closed = False
        self._stopped = False
        #: What ``evalbox session start --json`` printed (only for :meth:`start`).
        self.start_info: Optional[Dict[str, Any]] = None

    # ------------------------------------------------------------------ constructors

    @classmethod
    def connect(cls, id_or_socket: Union[str, "os.PathLike[str]"], state_dir: Optional[str] = None, *,
                connect_timeout: Optional[float] = 10.0, io_timeout: Optional[float] = None,
                pool_size: int = 8) -> "Session":
        """Connect to a running session.

        ``id_or_socket`` is a socket path (anything containing ``/``) or a
        session id such as ``"ses-3f9a1c2b7d4e"``, whose socket is
        ``<state_dir>/sessions/<id>/socket``; ``state_dir`` defaults to
        :func:`default_state_dir`.

        ``connect_timeout`` bounds connecting and reading the greeting.
        ``io_timeout`` (default: none) bounds every later wait for one message
        from the server -- including the gap between an exec's output frames,
        so leave it ``None`` for commands that may be quiet for long.
        ``pool_size`` is how many idle connections are kept for reuse.
        """
        target = os.fspath(id_or_socket)
        if "/" in target:
            path, session_id = target, None
        else:
            if not target:
                raise ValueError("empty session id")
            base = os.fspath(state_dir) if state_dir is not None else default_state_dir()
            path, session_id = os.path.join(base, "sessions", target, "socket"), target
        conn = _Connection(path, connect_timeout, io_timeout)
        return cls(conn, path, session_id, connect_timeout, io_timeout, pool_size)

    @classmethod
    def start(cls, fixture: Optional[str] = None, image: Optional[str] = None,
              workspace: Optional[Union[str, "os.PathLike[str]"]] = None, ttl: Optional[float] = None,
              network: Optional[str] = None, state_dir: Optional[Union[str, "os.PathLike[str]"]] = None,
              evalbox: Optional[str] = None, detach: bool = False, extra_args: Iterable[str] = (), *,
              connect_timeout: Optional[float] = 10.0, io_timeout: Optional[float] = None,
              pool_size: int = 8) -> "Session":
        """Start a new session with the ``evalbox`` command and connect to it.

        Runs ``evalbox session start --json --owner <this pid>`` with
        ``--fixture``, ``--image``, ``--workspace``, ``--ttl`` (seconds, rounded
        up), ``--network`` for the arguments given, then ``extra_args``.  With
        ``--owner`` the session ends when this Python process exits; with
        ``detach=True`` it is started with ``--detach`` instead and only its TTL
        (or :meth:`stop`) ends it.

        ``evalbox`` is the program to run (default: ``$EVALBOX_BIN``, else
        ``evalbox`` on ``PATH``); ``state_dir`` is passed to it as
        ``$EVALBOX_STATE_DIR``.  Raises ``SessionError(kind="start_failed")``
        with the command's stderr if it fails.
        """
        exe = evalbox or os.environ.get("EVALBOX_BIN") or "evalbox"
        cmd = [exe, "session", "start", "--json"]
        if detach:
            cmd.append("--detach")
        else:
            cmd += ["--owner", str(os.getpid())]
        if fixture is not None:
            cmd += ["--fixture", os.fspath(fixture)]
        if image is not None:
            cmd += ["--image", image]
        if workspace is not None:
            cmd += ["--workspace", os.fspath(workspace)]
        if ttl is not None:
            cmd += ["--ttl", str(int(math.ceil(ttl)))]
        if network is not None:
            cmd += ["--network", network]
        cmd += [str(a) for a in extra_args]
        env = dict(os.environ)
        if state_dir is not None:
            env["EVALBOX_STATE_DIR"] = os.fspath(state_dir)

        # Output goes to temporary files, not pipes: the session server that
        # `evalbox session start` leaves behind could inherit a pipe and keep it
        # open, and waiting for EOF on it would then never end.
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            try:
                proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env)
            except OSError as e:
                raise SessionError(
                    "start_failed",
                    f"cannot run {exe!r}: {e.strerror or e}; pass evalbox=/path/to/evalbox "
                    "or set EVALBOX_BIN",
                ) from None
            out.seek(0)
            err.seek(0)
            stdout = out.read().decode("utf-8", errors="replace")
            stderr = err.read().decode("utf-8", errors="replace").strip()

        command = shlex.join(cmd)
        if proc.returncode != 0:
            how = (f"was killed by signal {-proc.returncode}" if proc.returncode < 0
                   else f"exited with status {proc.returncode}")
            raise SessionError("start_failed", f"`{command}` {how}: {stderr or '(no stderr)'}")
        info = cls._parse_start_output(stdout)
        if info is None:
            raise SessionError(
                "start_failed",
                f"`{command}` succeeded but did not print a session as JSON; "
                f"stdout was {stdout[:300]!r}",
            )
        session_id = info.get("id") if isinstance(info.get("id"), str) else None
        sock_path = info.get("socket")
        if not isinstance(sock_path, str):
            if session_id is None:
                raise SessionError("start_failed", f"`{command}` printed neither a socket nor an id: {info!r}")
            sock_path = os.path.join(env.get("EVALBOX_STATE_DIR") or default_state_dir(),
                                     "sessions", session_id, "socket")
        conn = _Connection(sock_path, connect_timeout, io_timeout)
        session = cls(conn, sock_path, session_id, connect_timeout, io_timeout, pool_size)
        session.start_info = info
        return session

    @staticmethod
    def _parse_start_output(stdout: str) -> Optional[Dict[str, Any]]:
        candidates = [stdout] + [ln for ln in reversed(stdout.splitlines()) if ln.strip()]
        for text in candidates:
            try:
                value = json.loads(text)
            except ValueError:
                continue
            if isinstance(value, dict):
                return value
        return None

    # ------------------------------------------------------------------ properties

    @property
    def id(self) -> str:
        """The session id, as the server's greeting names it (``"ses-..."``)."""
        return self._id

    @property
    def socket_path(self) -> str:
        """The Unix socket this object connects to."""
        return self._socket_path

    @property
    def limits(self) -> Dict[str, Any]:
        """The server's limits from its greeting (``max_message_bytes``, ``max_file_bytes``, ...)."""
        return dict(self._limits)

    def __repr__(self) -> str:
        state = "stopped" if self._stopped else "closed" if self._closed else "open"
        return f"<Session {self._id} {state} socket={self._socket_path!r}>"

    # ------------------------------------------------------------------ connection pool

    def _acquire(self, for_stop: bool = False) -> _Connection:
        with self._lock:
            if self._stopped:
                raise SessionError("ended", f"session {self._id} was stopped")
            if self._closed and not for_stop:
                raise SessionError("closed", f"this Session object for {self._id} was closed")
            if self._idle:
                return self._idle.pop()
        return _Connection(self._socket_path, self._connect_timeout, self._io_timeout)

    def _release(self, conn: _Connection) -> None:
        with self._lock:
            if not self._closed and not self._stopped and len(self._idle) < self._pool_size:
                self._idle.append(conn)
                return
        conn.close()

    def _encode(self, op: str, fields: Mapping[str, Any]) -> Tuple[int, bytes]:
        with self._lock:
            request_id = next(self._ids)
        msg: Dict[str, Any] = {"id": request_id, "op": op}
        msg.update((k, v) for k, v in fields.items() if v is not None)
        line = json.dumps(msg, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        if len(line) > self._max_message_bytes:
            raise SessionError(
                "too_large",
                f"{op} request is {len(line)} bytes, over the server's max_message_bytes "
                f"({self._max_message_bytes}); nothing was sent",
            )
        return request_id, line + b"\n"

    def _request(self, op: str, fields: Optional[Mapping[str, Any]] = None, *, for_stop: bool = False) -> Dict[str, Any]:
        """Send one request and return its successful reply (raises for an error reply)."""
        request_id, line = self._encode(op, fields or {})
        conn = self._acquire(for_stop)
        in_sync = False
        try:
            conn.send_line(line)
            reply = _next_message(conn, request_id, op)
            if not isinstance(reply, dict):
                raise ProtocolError(f"got an output frame in answer to {op!r}; only exec streams output")
            in_sync = True
        finally:
            if in_sync:
                self._release(conn)
            else:
                conn.close()
        return _raise_if_error(reply, op)

    # ------------------------------------------------------------------ exec

    def exec(self, argv: Sequence[str], *, cwd: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
             stdin: Optional[Data] = None, timeout: Optional[float] = None, max_output: Optional[int] = None,
             on_output: Optional[OutputCallback] = None) -> ExecResult:
        """Run a command in the sandbox and wait for it.

        ``argv`` is a list -- ``["pytest", "-q"]``; for shell syntax, say so:
        ``["sh", "-c", "make && make test"]``.  ``cwd`` defaults to the
        workspace, ``env`` is laid over the session's environment, ``stdin``
        (bytes, or str sent as UTF-8) is fed to the command and then closed,
        ``timeout`` (seconds) kills it (``timed_out``), ``max_output`` (bytes,
        server default 16 MiB) cuts its output and kills it (``truncated``).

        Output arrives while the command runs; ``on_output("stdout"|"stderr",
        data)`` is called for each piece, in order, on this thread.  The
        returned :class:`ExecResult` holds all of it.  A non-zero exit is not an
        exception -- call :meth:`ExecResult.check` for that.

        If this thread is interrupted (Ctrl-C) or ``on_output`` raises, the
        command is cancelled, its connection dropped, and the exception
        re-raised.
        """
        events = self._exec_events(argv, cwd=cwd, env=env, stdin=stdin, timeout=timeout, max_output=max_output)
        try:
            for kind, value in events:
                if kind == "exit":
                    return value
                if on_output is not None:
                    on_output(kind, value)
        finally:
            events.close()  # a no-op when finished; else cancels the exec
        raise ProtocolError("exec ended without a result")  # not reached

    def exec_stream(self, argv: Sequence[str], *, cwd: Optional[str] = None,
                    env: Optional[Mapping[str, str]] = None, stdin: Optional[Data] = None,
                    timeout: Optional[float] = None,
                    max_output: Optional[int] = None) -> Generator[Tuple[str, Any], None, None]:
        """Run a command and yield its output as it arrives.

        Yields ``("stdout", bytes)`` and ``("stderr", bytes)`` tuples in order,
        then ``("exit", ExecResult)`` last::

            for kind, value in s.exec_stream(["make", "-j8"]):
                if kind == "exit":
                    result = value
                else:
                    sys.stdout.buffer.write(value)

        Arguments are as for :meth:`exec`.  Stopping early (``break``, or
        ``close()`` on the generator) cancels the command.
        """
        return self._exec_events(argv, cwd=cwd, env=env, stdin=stdin, timeout=timeout, max_output=max_output)

    def _exec_events(self, argv: Sequence[str], *, cwd: Optional[str], env: Optional[Mapping[str, str]],
                     stdin: Optional[Data], timeout: Optional[float],
                     max_output: Optional[int]) -> Generator[Tuple[str, Any], None, None]:
        # Validate eagerly, before the generator starts, so mistakes raise at the call.
        args = _check_argv(argv)
        fields: Dict[str, Any] = {"argv": args, "stream": True}
        if cwd is not None:
            fields["cwd"] = os.fspath(cwd)
        if env is not None:
            env_dict = dict(env)
            for k, v in env_dict.items():
                if not isinstance(k, str) or not isinstance(v, str):
                    raise TypeError(f"env must map str to str; got {k!r}: {v!r}")
            fields["env"] = env_dict
        if stdin is not None:
            fields["stdin"] = _b64encode(stdin)
        if timeout is not None:
            fields["timeout"] = timeout
        if max_output is not None:
            fields["max_output"] = int(max_output)
        return self._exec_run(args, fields)

    def _exec_run(self, args: List[str], fields: Dict[str, Any]) -> Generator[Tuple[str, Any], None, None]:
        request_id, line = self._encode("exec", fields)
        conn = self._acquire()
        out = {"stdout": bytearray(), "stderr": bytearray()}
        in_sync = False
        try:
            conn.send_line(line)
            while True:
                msg = _next_message(conn, request_id, "exec")
                if isinstance(msg, dict):
                    reply = msg
                    break
                stream, data = msg
                out[stream] += data
                yield msg
            in_sync = True
        finally:
            if in_sync:
                self._release(conn)
            else:
                # Interrupted (KeyboardInterrupt, on_output raised, generator
                # abandoned) or the conversation broke: kill the command and
                # never reuse this connection -- its next line is unknown.
                conn.cancel_and_close(request_id)
        _raise_if_error(reply, "exec")
        stdout, stderr = bytes(out["stdout"]), bytes(out["stderr"])
        # A server answering as for stream=false carries the output in the reply.
        if not stdout and isinstance(reply.get("stdout"), str):
            stdout = _b64decode(reply["stdout"], "exec reply stdout")
        if not stderr and isinstance(reply.get("stderr"), str):
            stderr = _b64decode(reply["stderr"], "exec reply stderr")

        def opt_int(key: str) -> Optional[int]:
            v = reply.get(key)
            return v if isinstance(v, int) and not isinstance(v, bool) else None

        result = ExecResult(
            exit_code=opt_int("exit_code"),
            signal=opt_int("signal"),
            stdout=stdout,
            stderr=stderr,
            timed_out=bool(reply.get("timed_out", False)),
            cancelled=bool(reply.get("cancelled", False)),
            truncated=bool(reply.get("truncated", False)),
            duration_ms=opt_int("duration_ms") or 0,
            stdout_bytes=opt_int("stdout_bytes") if opt_int("stdout_bytes") is not None else len(stdout),
            stderr_bytes=opt_int("stderr_bytes") if opt_int("stderr_bytes") is not None else len(stderr),
            argv=args,
        )
        yield ("exit", result)

    # ------------------------------------------------------------------ files

    def read_file(self, path: str, max_bytes: Optional[int] = None) -> bytes:
        """Return a file's contents as bytes (``path`` as the sandbox sees it).

        Raises ``not_found`` for a missing file and ``too_large`` for one past
        ``max_bytes`` (server default 32 MiB).  ``.decode()`` it for text.
        """
        reply = self._request("read_file", {"path": os.fspath(path), "max_bytes": max_bytes})
        return _b64decode(reply.get("data"), "read_file data")

    def write_file(self, path: str, data: Data, mode: Optional[int] = None, append: bool = False,
                   parents: bool = False) -> int:
        """Write ``data`` (bytes, or str as UTF-8) to ``path``; return the file's size.

        ``mode`` is an int such as ``0o755`` (server default ``0o644``);
        ``append=True`` appends; ``parents=True`` creates missing directories.
        """
        fields: Dict[str, Any] = {"path": os.fspath(path), "data": _b64encode(data)}
        if mode is not None:
            fields["mode"] = int(mode)
        if append:
            fields["append"] = True
        if parents:
            fields["parents"] = True
        reply = self._request("write_file", fields)
        size = reply.get("size")
        return size if isinstance(size, int) else -1

    def ls(self, path: str) -> List[Dict[str, Any]]:
        """List a directory: dicts with ``name``, ``type`` (file/dir/symlink/other), ``size``, ``mode``, ``mtime``.

        For a file, one entry: the file itself.
        """
        entries = self._request("ls", {"path": os.fspath(path)}).get("entries")
        if not isinstance(entries, list):
            raise ProtocolError("ls reply has no \"entries\" list")
        return entries

    # ------------------------------------------------------------------ snapshots, forks

    def snapshot(self, name: str) -> Dict[str, Any]:
        """Record the sandbox's files as snapshot ``name`` (``[A-Za-z0-9._-]{1,64}``).

        Returns ``{"name", "bytes", "files", "ms"}``.
        """
        return _reply_fields(self._request("snapshot", {"name": name}))

    def reset(self, to: Optional[str] = None) -> Dict[str, Any]:
        """Put the files back as snapshot ``to`` was (default: as the session started). Returns ``{"ms"}``."""
        return _reply_fields(self._request("reset", {"to": to}))

    def fork(self, count: int = 1, from_: Optional[str] = None) -> List["Session"]:
        """Make ``count`` new sessions that start as copies of this one, and connect to each.

        ``from_`` names a snapshot to copy (default: a snapshot taken now).  The
        new sessions are independent: stop each of them (or use ``with``).
        """
        reply = self._request("fork", {"count": int(count), "from": from_})
        entries = reply.get("sessions")
        if not isinstance(entries, list):
            raise ProtocolError("fork reply has no \"sessions\" list")
        kids: List[Session] = []
        try:
            for entry in entries:
                if not isinstance(entry, dict) or not isinstance(entry.get("socket"), str):
                    raise ProtocolError(f"fork reply entry has no socket: {entry!r}")
                kid_id = entry.get("id") if isinstance(entry.get("id"), str) else None
                conn = _Connection(entry["socket"], self._connect_timeout, self._io_timeout)
                kids.append(Session(conn, entry["socket"], kid_id, self._connect_timeout,
                                    self._io_timeout, self._pool_size))
        except BaseException:
            for kid in kids:
                kid.close()
            raise
        return kids

    # ------------------------------------------------------------------ misc ops

    def grade(self) -> Dict[str, Any]:
        """Grade the session (one started from a fixture): ``{"verdict", "checks"}``.

        Raises ``unsupported`` for a session without a fixture.
        """
        return _reply_fields(self._request("grade"))

    def info(self) -> Dict[str, Any]:
        """The session's ``session.json`` (schema ``evalbox.session.v1``)."""
        reply = self._request("info")
        session = reply.get("session")
        return session if isinstance(session, dict) else _reply_fields(reply)

    def ping(self) -> None:
        """Round-trip a no-op request; raises if the session does not answer."""
        self._request("ping")

    # ------------------------------------------------------------------ ending

    def stop(self) -> None:
        """End the session: kill everything in it and remove what it made.

        Safe to call twice; a session that has already ended (the server says
        ``ended``, hangs up, or its socket is gone) counts as stopped.  This
        object is closed afterwards; further requests raise ``ended``.
        """
        with self._lock:
            if self._stopped:
                return
        try:
            self._request("stop", for_stop=True)
        except SessionError as e:
            if e.kind not in ("ended", "disconnected", "connect_failed"):
                raise
        with self._lock:
            self._stopped = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def close(self) -> None:
        """Close this object's connections, leaving the session running.

        Other requests then raise ``closed``; :meth:`stop` still works.  A
        ``with`` block does not stop a session that was closed inside it.
        Connections busy in other threads are closed when their requests end.
        """
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        """Stop the session (unless :meth:`close` or :meth:`stop` was already called)."""
        with self._lock:
            done = self._closed or self._stopped
        if not done:
            self.stop()
