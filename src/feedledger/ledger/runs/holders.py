"""Lease holders: the processes that hold a lease or a claim (Invariant 7; a claim on
deliveries, notify/, is held the same way).

A holder is `host:pid:token:start`, `start` being the process's start time as the kernel
counts it (Linux: field 22 of /proc/<pid>/stat; empty where there is no /proc). A
holder whose process no longer runs on this host is dead, and what it held may be
taken over at once instead of waiting for its expiry. Dead means: no such process, a
zombie (killed and not yet reaped by its parent: `kill(pid, 0)` still succeeds for
it), or the pid now belongs to another process (its start time differs from the one
recorded). Holders written before the start time was recorded (`host:pid:token`) are
judged by the pid alone.
"""

from __future__ import annotations

import os
import secrets
import socket


def _stat(pid: int) -> tuple[str, str] | None:
    """(state, start time) of a process from /proc/<pid>/stat; None when unreadable
    (no such process, or no /proc on this system)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read().decode("ascii", "replace")
    except OSError:
        return None
    # the command name (field 2) is in parentheses and may hold spaces and ')'
    fields = text[text.rfind(")") + 2 :].split()
    if len(fields) < 20:
        return None
    return fields[0], fields[19]  # field 3 (state) and field 22 (starttime)


def _start_time(pid: int) -> str:
    got = _stat(pid)
    return got[1] if got is not None else ""


def new_holder() -> str:
    pid = os.getpid()
    return f"{socket.gethostname()}:{pid}:{secrets.token_hex(4)}:{_start_time(pid)}"


def holder_dead(holder: str) -> bool:
    """True when the holder is a process on this host that no longer runs: gone, a
    zombie, or its pid reused by a process started at another time."""
    host, _, rest = holder.partition(":")
    pid_text, _, rest = rest.partition(":")
    started = rest.partition(":")[2]
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    got = _stat(pid)
    if got is not None:
        state, start = got
        if state in ("Z", "X", "x"):
            return True
        return bool(started) and started != start
    try:  # no /proc (not Linux), or hidden from us: whether the pid exists is all we can tell
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False
