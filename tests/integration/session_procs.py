"""The session tests' own processes: the session servers of one evalbox state directory, and
the clean-up that leaves nothing of a test behind.

A server runs as `evalbox session serve --id ID --spec JSON` with EVALBOX_STATE_DIR set to
the state directory of the `session start` that made it."""
import os
import shutil
import signal
import subprocess
import time


def servers_of(state):
    p = subprocess.run(["pgrep", "-f", "session serve --id "], stdout=subprocess.PIPE, text=True)
    want = b"EVALBOX_STATE_DIR=" + os.fsencode(state)
    found = []
    for pid in (int(x) for x in p.stdout.split()):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if want in f.read().split(b"\0"):
                    found.append(pid)
        except OSError:
            pass  # gone meanwhile
    return found


def clean_up(evalbox, state, work):
    """Every session under `state` stopped (its server signalled if it will not go), `evalbox
    gc`, the mounts below `work` detached, and `work` removed."""
    env = dict(os.environ, EVALBOX_STATE_DIR=state)
    sessions = os.path.join(state, "sessions")
    for sid in os.listdir(sessions) if os.path.isdir(sessions) else []:
        try:
            subprocess.run([evalbox, "session", "stop", sid], env=env, timeout=20,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        except Exception:
            pass
    deadline = time.monotonic() + 10
    while servers_of(state) and time.monotonic() < deadline:
        time.sleep(0.1)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in servers_of(state):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        time.sleep(1)
    try:
        subprocess.run([evalbox, "gc"], env=env, timeout=60,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except Exception:
        pass
    for _ in range(100):
        with open("/proc/self/mountinfo") as f:
            mounts = [l.split()[4] for l in f if f" {work}/" in l]
        if not mounts:
            break
        subprocess.run(["umount", "-l", sorted(mounts)[-1]])
    shutil.rmtree(work, ignore_errors=True)


def run_test(main, cleanup, fail_type):
    """Runs `main`, says a `fail_type` failure in one line (anything else with its trace),
    always cleans up, and exits 0 only when `main` returned."""
    import sys
    import traceback

    rc = 1
    try:
        main()
        rc = 0
    except fail_type as e:
        print(f"FAIL: {e}", file=sys.stderr, flush=True)
    except Exception:
        traceback.print_exc()
    finally:
        cleanup()
    sys.exit(rc)
