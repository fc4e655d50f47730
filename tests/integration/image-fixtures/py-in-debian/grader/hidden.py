# Runs in the fixture's image: Debian's Python, none of the host's tools.
import os
import sys

sys.path.insert(0, os.getcwd())
from stats import mean  # noqa: E402

assert mean([2, 4]) == 3, mean([2, 4])
assert "VERSION_CODENAME=bookworm" in open("/etc/os-release").read()
assert sys.executable in ("/usr/bin/python3", "/bin/python3"), sys.executable
# The host builds evalbox with cmake; the image (mmdebstrap minbase + python3 + git) has none.
assert not os.path.exists("/usr/bin/cmake"), "the host's /usr is visible"
print("hidden: ok")
