"""Finds the session servers of one evalbox state directory (for the session tests).

A server runs as `evalbox session serve --id ID --spec JSON` with EVALBOX_STATE_DIR set to
the state directory of the `session start` that made it."""
import os
import subprocess


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
