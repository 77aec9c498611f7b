"""Who holds something in the store: a lease, a claim on deliveries. A holder is
`host:pid:token`; one whose process no longer exists on this host is dead, and what it
held may be taken over at once instead of waiting for its expiry."""

from __future__ import annotations

import os
import secrets
import socket


def new_holder() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


def holder_dead(holder: str) -> bool:
    """True when the holder is a process on this host that no longer exists."""
    host, _, rest = holder.partition(":")
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False
