"""A resident process gives back what a run freed (pipeline/intake/allocators.py): memory a
worker thread allocated and freed stays in its glibc arena (resident, counted in the
process's RSS) until `give_back` returns the arenas' free pages to the system. Run in a
child process of its own (the arena cap and the RSS are the whole process's)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent(
    """
    import json, threading
    from feedledger.pipeline.intake import allocators

    capped = allocators.resident_process()
    MIB = 1 << 20
    held = []

    def work():
        # 160 MiB in 64 KiB blocks (under glibc's mmap threshold: from the thread's
        # arena), then all freed but one block in every sixteen: the free space is
        # between live blocks, so the arena cannot shrink from its top
        blocks = [bytearray(64 * 1024) for _ in range(2560)]
        held.extend(blocks[::16])
        blocks.clear()

    t = threading.Thread(target=work)
    t.start()
    t.join()
    before = allocators.rss_bytes()
    gave = allocators.give_back()
    after = allocators.rss_bytes()
    print(json.dumps({"capped": capped, "gave": gave, "before": before, "after": after,
                      "peak": allocators.peak_rss_bytes(), "held": len(held)}))
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_memory_a_worker_thread_freed_is_given_back_to_the_system() -> None:
    # glibc's own settings left to the code under test
    env = {k: v for k, v in os.environ.items() if k not in ("MALLOC_ARENA_MAX", "GLIBC_TUNABLES")}
    got = subprocess.run(
        [sys.executable, "-c", CHILD],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    assert got.returncode == 0, got.stderr
    r = json.loads(got.stdout)
    assert r["capped"] is True and r["gave"] is True, r
    mib = 1 << 20
    # ~150 MiB freed in the arena was resident until given back; 10 MiB is still held
    assert r["before"] - r["after"] >= 100 * mib, r
    assert r["after"] < r["before"] <= r["peak"], r
