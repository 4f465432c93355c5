"""Keeps one X server (Xvfb) for the DirectML host, as long as anything uses it and no longer.

Run by ``early.start_xvfb`` as ``python -S xwatch.py PREFIX SCREEN`` (no imports of the project:
it starts in a few milliseconds). It starts Xvfb on a display number Xvfb picks itself
(``-displayfd``), prints ``N XVFB_PID`` on stdout, then keeps the server while

- its starter holds it: until stdin reaches end of file (``XServer.release``, or the starter
  died), and after that
- while any process of the Wine prefix ``PREFIX`` (``WINEPREFIX=PREFIX``) has ``DISPLAY=:N`` in
  its environment,

and then ends it. Why the second rule: the first Wine process of a prefix's session starts Wine's
desktop process (explorer.exe) and its services with its own environment, display included. If
that X server goes before the desktop has loaded its graphics driver (a host killed while it
starts: a worker killed, a command that exits at once), the desktop runs with no driver, and
every process that joins the session afterwards finds no Vulkan device (DXGI 0x887a0004) until
all of the prefix's processes have ended. So the server stays until the session that may
depend on it has ended.

The server dies with this process (``PR_SET_PDEATHSIG``), so killing the watcher ends it at once.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time

#: Seconds between two looks at the processes, once released.
POLL = 0.25


def _die_with_parent() -> None:
    """In Xvfb between fork and exec: SIGKILL when this watcher dies (Linux)."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
    except (OSError, AttributeError):
        pass


def start(screen: str) -> tuple[subprocess.Popen, str]:
    """Xvfb on a display it picks; the process and the display number."""
    read_fd, write_fd = os.pipe()
    try:
        xvfb = subprocess.Popen(["Xvfb", "-displayfd", str(write_fd), "-screen", "0", screen, "-nolisten", "tcp"],
                                pass_fds=(write_fd,), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, preexec_fn=_die_with_parent)
    finally:
        os.close(write_fd)
    digits = b""
    while not digits.endswith(b"\n"):
        chunk = os.read(read_fd, 64)
        if not chunk:  # Xvfb ended without a display
            break
        digits += chunk
    os.close(read_fd)
    return xvfb, digits.decode("ascii", "replace").strip()


def in_use(prefix: bytes, display: bytes, skip: set[int]) -> bool:
    """Whether a live process other than ``skip`` has both ``WINEPREFIX=prefix`` and
    ``DISPLAY=display`` in its environment (a zombie's reads empty)."""
    want = (b"WINEPREFIX=" + prefix, b"DISPLAY=" + display)
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in skip:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:  # gone, or another user's
            continue
        if want[0] in env and want[1] in env:
            return True
    return False


def main(argv: list[str]) -> int:
    prefix, screen = argv[1], argv[2]
    xvfb, number = start(screen)
    if not number.isdigit():
        xvfb.kill()
        return 3
    print(number, xvfb.pid, flush=True)
    skip = {os.getpid(), xvfb.pid}
    held = True
    while xvfb.poll() is None:
        if held:
            ready, _, _ = select.select([0], [], [], POLL)
            if ready and not os.read(0, 4096):
                held = False
            continue
        if not in_use(os.fsencode(prefix), f":{number}".encode(), skip):
            break
        time.sleep(POLL)
    xvfb.kill()
    xvfb.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
