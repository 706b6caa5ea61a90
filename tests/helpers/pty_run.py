"""Run a program on a real pseudo-terminal, as a user's shell would (the progress bar,
highlighting and escaping tests)."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import termios


def run_in_pty(
    argv: list[str],
    env: dict[str, str],
    *,
    size: tuple[int, int] | None = (24, 120),
    quiet_for: float = 60,
) -> tuple[int, str]:
    """stdin, stdout and stderr on a pseudo-terminal; (exit status, all output).

    `size` (rows, columns) is set as a real terminal has one; None leaves the fresh
    pty at 0x0 — what `script -qc` gives without a controlling terminal. The child is
    killed after `quiet_for` seconds without output."""
    master, slave = pty.openpty()
    if size is not None:
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", size[0], size[1], 0, 0))
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True)
    os.close(slave)
    chunks: list[bytes] = []
    while True:
        ready, _, _ = select.select([master], [], [], quiet_for)
        if not ready:
            proc.kill()
            break
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return proc.wait(60), b"".join(chunks).decode("utf-8", "replace")
