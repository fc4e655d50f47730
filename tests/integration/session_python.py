#!/usr/bin/env python3
"""The Python client (clients/python/evalbox_session.py) against the real evalbox.

Usage: session_python.py EVALBOX EVALBOX_SANDBOX SOURCE_DIR

Session.start(workspace=...) with state_dir and evalbox given; exec (exit codes, stdout and
stderr, stdin, env, cwd, timeout, on_output, exec_stream, check()), write_file/read_file/ls,
snapshot/reset, fork(count=4) with the forks exec'ing from threads at once, many execs on one
Session from threads, info(), Session.connect and close(), the context manager stopping the
session (gone from `evalbox session ls --json`), Session.start(image="oci:..."), and the
errors: not_found for a missing program or file, start_failed, ended after stop.
"""

import json
import os
import subprocess
import sys
import tempfile
import threading
import time

from session_procs import clean_up, run_test, servers_of

EVALBOX, HELPER, SRC = sys.argv[1:4]
os.environ["EVALBOX_HELPER"] = HELPER
sys.path.insert(0, os.path.join(SRC, "clients", "python"))
from evalbox_session import ExecFailed, Session, SessionError  # noqa: E402

WORK = tempfile.mkdtemp(prefix="evalbox-it-")
STATE = os.path.join(WORK, "state")
# Both ways: the client's state_dir= for start, the environment for the CLI calls below.
os.environ["EVALBOX_STATE_DIR"] = STATE
T0 = time.monotonic()


def log(*a):
    print(f"[{time.monotonic() - T0:6.1f}s]", *a, flush=True)


class Fail(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Fail(what)


def run(argv, timeout=120):
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, timeout=timeout)
        out.seek(0)
        err.seek(0)
        return p.returncode, out.read().decode(errors="replace"), err.read().decode(errors="replace")


def our_servers():
    return servers_of(STATE)


def listed():
    rc, out, err = run([EVALBOX, "session", "ls", "--json"])
    check(rc == 0, f"session ls --json: exit {rc}: {err}")
    return {s["id"]: s for s in json.loads(out)}


def wait_gone(sid, what, seconds=10):
    t = time.monotonic()
    while sid in listed() or os.path.exists(os.path.join(STATE, "sessions", sid)):
        check(time.monotonic() - t < seconds, f"{what}: session {sid} still listed after {seconds} s")
        time.sleep(0.1)
    log(f"  {what}: {sid} gone in {time.monotonic() - t:.1f} s")


def cleanup():
    clean_up(EVALBOX, STATE, WORK)


def need_isolation():
    rc, _, _ = run([EVALBOX, "doctor"])
    if rc != 0 or os.getuid() != 0:
        if os.environ.get("EVALBOX_REQUIRE_ISOLATION") == "1":
            raise Fail("the sandbox cannot run here (evalbox doctor)")
        print("SKIP: needs root and a working sandbox (evalbox doctor)")
        sys.exit(0)


def expect_error(kind, fn, what):
    try:
        fn()
    except SessionError as e:
        check(e.kind == kind, f"{what}: SessionError {e.kind!r}, expected {kind!r}: {e}")
        return e
    raise Fail(f"{what}: no SessionError (expected {kind})")


def main():
    need_isolation()
    os.makedirs(STATE, exist_ok=True)
    ws = os.path.join(WORK, "ws")
    os.makedirs(os.path.join(ws, "sub"))
    with open(os.path.join(ws, "hello.txt"), "w") as f:
        f.write("hello\n")
    rc, bb, err = run([os.path.join(SRC, "tests", "images", "make-images"), "busybox"], timeout=300)
    check(rc == 0, f"make-images busybox: {err}")
    bb = bb.strip()

    expect_error("start_failed", lambda: Session.start(workspace=os.path.join(WORK, "nowhere"), state_dir=STATE,
                                                       evalbox=EVALBOX), "a missing workspace")
    check(not listed(), f"a failed start left a session: {listed()}")

    t = time.monotonic()
    with Session.start(workspace=ws, state_dir=STATE, evalbox=EVALBOX, ttl=280) as s:
        log(f"workspace session {s.id} started in {time.monotonic() - t:.1f} s")
        sid = s.id
        check(sid.startswith("ses-") and s.start_info["id"] == sid, f"start_info: {s.start_info}")
        check(s.socket_path == os.path.join(STATE, "sessions", sid, "socket"), s.socket_path)
        check(s.limits.get("max_execs") == 256, f"limits: {s.limits}")
        check(listed()[sid]["running"] is True, f"ls --json: {listed()}")
        check(listed()[sid]["owner"] == os.getpid(), f"the client's pid is not the owner: {listed()[sid]}")
        # The owner (this process) lives on while its memory changes, as a client's does when it
        # starts threads: the session must go on.
        junk = [bytearray(1 << 20) for _ in range(64)]
        th = threading.Thread(target=time.sleep, args=(0.1,))
        th.start()
        th.join()
        time.sleep(1)
        check(sid in listed(), "the session ended while its owner (this process, --owner) is alive, "
              "once the owner's memory changed (64 MiB allocated, a thread started)")
        del junk

        # exec
        r = s.exec(["sh", "-c", "echo out; echo err >&2; exit 3"])
        check((r.exit_code, r.stdout, r.stderr, r.ok) == (3, b"out\n", b"err\n", False), repr(r))
        try:
            r.check()
            raise Fail("check() of exit 3 did not raise")
        except ExecFailed as e:
            check(e.result is r and "status 3" in e.message and "err" in e.message, e.message)
        r = s.exec(["sh", "-c", "kill -TERM $$"])
        check(r.exit_code is None and r.signal == 15, repr(r))
        r = s.exec(["sh", "-c", 'echo "$FOO"; pwd; cat'], env={"FOO": "bar baz"}, cwd="/workspace/sub",
                   stdin=b"in\0put")
        check(r.ok and r.stdout == b"bar baz\n/workspace/sub\nin\0put", repr(r))
        t = time.monotonic()
        r = s.exec(["sleep", "30"], timeout=1)
        check(r.timed_out and not r.ok and time.monotonic() - t < 5, repr(r))
        pieces = []
        r = s.exec(["sh", "-c", "echo a; sleep 0.2; echo b >&2"], on_output=lambda k, d: pieces.append((k, d)))
        check(pieces == [("stdout", b"a\n"), ("stderr", b"b\n")] and r.ok, f"on_output: {pieces}")
        events = list(s.exec_stream(["sh", "-c", "printf x; printf y >&2"]))
        check(events[-1][0] == "exit" and events[-1][1].ok and ("stdout", b"x") in events, f"exec_stream: {events}")
        r = s.exec(["yes"], max_output=5000)
        check(r.truncated and len(r.stdout) == 5000, repr(r))
        e = expect_error("not_found", lambda: s.exec(["no-such-program-evalbox"]), "a missing program")
        log(f"  a missing program: {e}")
        # Many execs on one Session at once (its connection pool).
        results = [None] * 8

        def one(i):
            results[i] = s.exec(["sh", "-c", f"sleep 1; echo {i}"])

        t = time.monotonic()
        threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(30)
        took = time.monotonic() - t
        check(all(r is not None and r.ok and r.stdout == f"{i}\n".encode() for i, r in enumerate(results)),
              f"8 execs from threads: {results}")
        check(took < 5, f"8 execs of `sleep 1` from threads took {took:.1f} s: not at once")
        log(f"  8 concurrent execs in {took:.1f} s")

        # files
        data = bytes(range(256)) * 16
        check(s.write_file("/workspace/bin.dat", data) == len(data), "write_file size")
        check(s.read_file("/workspace/bin.dat") == data, "read_file of 256 byte values")
        s.write_file("deep/er/file.txt", "text\n", parents=True, mode=0o600)
        check(s.read_file("/workspace/deep/er/file.txt") == b"text\n", "parents")
        check(s.exec(["stat", "-c", "%a", "/workspace/deep/er/file.txt"]).stdout == b"600\n", "mode 0o600")
        s.write_file("/workspace/hello.txt", "again\n", append=True)
        check(s.read_file("hello.txt") == b"hello\nagain\n", "append")
        expect_error("not_found", lambda: s.read_file("/workspace/nope"), "read_file of a missing file")
        expect_error("not_found", lambda: s.write_file("/workspace/no/dir/x", "x"), "write_file without parents")
        expect_error("permission", lambda: s.write_file("/usr/bin/evalbox-python-x", "x"), "write_file to /usr/bin")
        entries = {e["name"]: e for e in s.ls("/workspace")}
        check(entries["sub"]["type"] == "dir" and entries["bin.dat"]["size"] == len(data), f"ls: {entries}")
        check([e["name"] for e in s.ls("/workspace/hello.txt")] == ["hello.txt"], "ls of a file")

        # snapshot, reset
        snap = s.snapshot("clean")
        check(snap.get("name") == "clean" and "ms" in snap, f"snapshot: {snap}")
        s.write_file("/workspace/bin.dat", b"changed")
        s.exec(["rm", "/workspace/hello.txt"]).check()
        s.write_file("/tmp/new", b"n")
        s.exec(["sh", "-c", "sleep 1000 >/dev/null 2>&1 &"]).check()
        check(b"sleep 1000" in s.exec(["ps", "-e", "-o", "args"]).stdout, "the background sleep")
        r = s.reset("clean")
        check("ms" in r, f"reset: {r}")
        check(s.read_file("/workspace/bin.dat") == data and s.read_file("hello.txt") == b"hello\nagain\n",
              "reset did not restore the snapshot")
        expect_error("not_found", lambda: s.read_file("/tmp/new"), "/tmp/new after reset")
        check(b"sleep 1000" not in s.exec(["ps", "-e", "-o", "args"]).stdout, "the sleep survived the reset")
        s.reset()
        check(s.read_file("hello.txt") == b"hello\n", "reset() to the start")
        expect_error("not_found", lambda: s.read_file("/workspace/bin.dat"), "reset() to the start: bin.dat")
        expect_error("not_found", lambda: s.reset("no-such"), "reset to a missing snapshot")
        info = s.info()
        check(info["id"] == sid and info["source"]["workspace"] == ws and info["snapshots"] == ["clean"],
              f"info: {info}")

        # fork(count=4): four sessions exec'ing at once from threads, each its own.
        t = time.monotonic()
        kids = s.fork(count=4, from_="clean")
        log(f"  fork(count=4) in {time.monotonic() - t:.1f} s")
        check(len(kids) == 4 and len({k.id for k in kids} | {sid}) == 5, f"fork: {kids}")
        out = [None] * 4

        def work(i):
            k = kids[i]
            k.write_file("/workspace/who", f"{i}\n")
            r = k.exec(["sh", "-c", "sleep 1; cat /workspace/who; test -e /workspace/bin.dat && echo clean"])
            out[i] = r

        t = time.monotonic()
        threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(30)
        took = time.monotonic() - t
        check(all(r is not None and r.ok and r.stdout == f"{i}\nclean\n".encode() for i, r in enumerate(out)),
              f"forks' execs: {out}")
        check(took < 4, f"4 forks' execs of `sleep 1` took {took:.1f} s: not at once")
        log(f"  4 forks exec'ing at once: {took:.1f} s")
        expect_error("not_found", lambda: s.read_file("/workspace/who"), "a fork's write seen in the parent")
        for k in kids:
            check(k.info().get("parent") == sid, f"a fork's parent: {k.info()}")
            check(k.id in listed(), f"fork {k.id} not listed")
        # connect() to a running session; close() leaves it running.
        other = Session.connect(kids[0].id, state_dir=STATE)
        check(other.read_file("/workspace/who") == b"0\n", "connect")
        other.close()
        expect_error("closed", lambda: other.ping(), "a closed Session object")
        kids[0].ping()
        for k in kids:
            with k:
                pass  # the context manager stops each fork
        for k in kids:
            wait_gone(k.id, "a fork's with-block exit")
            expect_error("ended", lambda: k.ping(), "a stopped fork")
        s.ping()  # the parent lives on

    wait_gone(sid, "the with-block exit")
    expect_error("ended", lambda: s.exec(["true"]), "exec on a stopped session")
    s.stop()  # twice: fine

    # An image session.
    t = time.monotonic()
    with Session.start(image=f"oci:{bb}/oci", state_dir=STATE, evalbox=EVALBOX, ttl=280) as im:
        log(f"image session {im.id} started in {time.monotonic() - t:.1f} s")
        r = im.exec(["cat", "/etc/os-release"])
        check(r.ok and b"evalbox-busybox" in r.stdout, repr(r))
        im.write_file("/etc/motd", "hi\n")
        check(im.exec(["cat", "/etc/motd"]).stdout == b"hi\n", "image: write_file into the root")
        im.reset()
        expect_error("not_found", lambda: im.read_file("/etc/motd"), "image: reset")
        expect_error("not_found", lambda: im.exec(["python3", "-c", "1"]), "image: a program it does not have")
        isid = im.id
    wait_gone(isid, "the image session's with-block exit")

    # Nothing left.
    t = time.monotonic()
    while our_servers() and time.monotonic() - t < 15:
        time.sleep(0.1)
    check(not our_servers(), f"servers left: {our_servers()}")
    for d in ("sessions", "session-layers", "runs"):
        p = os.path.join(STATE, d)
        check(not os.path.isdir(p) or not os.listdir(p), f"{d}/ left: {os.listdir(p)}")
    mounts = [l for l in open("/proc/self/mountinfo") if STATE in l]
    check(not mounts, f"mounts left: {mounts}")
    print("session python: ok")


if __name__ == "__main__":
    run_test(main, cleanup, Fail)
