"""A budgeted process gives the memory it frees back to the system at once.

The allocators under a payload's work keep freed pages for reuse rather than return
them: polars' jemalloc for half a second to a second (the decay polars sets when
loaded, unless the environment sets one), glibc's malloc (the Python
objects a scratch file is written from, Arrow's buffers in the system pool) for any
block under its mmap threshold, a threshold it raises to the largest block freed so far
(up to 32 MiB). Under a `memory_budget` every stage of the work (the read's pieces, the
diff's parts, the transaction's chunks) would then add the pages its predecessors freed
to its own, ~80-130 MiB over a 400k-row first load (bench/README.md, "A budgeted ingest
within its bound"). `release_promptly` asks both to return freed pages at once: a little
more of the system's time for a peak that is what the process holds.

The whole path (a source without a budget, a payload below the default bound) keeps
the allocators' defaults, and its speed. Nothing here imports polars: jemalloc reads its
setting from the environment when polars is first loaded, so it is set before then (the
CLI's `ingest` loads polars only once it knows the source); glibc's, with `mallopt`, at
any time (other C libraries: left as they are).

A resident process (the scheduler) runs payload after payload for hours, on worker
threads: glibc gives each thread that allocates an arena of its own (up to 8 per core)
and keeps what is freed in each for reuse, so its RSS is the sum of every arena's high
water, growing with each larger payload and each new thread (a 300-source day: one
scheduler at ~2.4 GB; 30 sources x 20,000 parcels: ~230 MiB of glibc arenas, ~80 %
of it free, bench/README.md). `resident_process` caps the arenas at its start and
`give_back` (after each attempt: between runs) returns every arena's free pages to
the system (`malloc_trim`): what the process holds between runs is then its modules,
its connections and the diff states `--max-warm-sources` bounds."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

from feedledger.model.source import SourceConfig

# polars' jemalloc (built with the `_rjem_` prefix) reads this when it starts
JEMALLOC_ENV = "_RJEM_MALLOC_CONF"
PROMPT_DECAY = "dirty_decay_ms:0,muzzy_decay_ms:0"
# glibc mallopt parameters: a fixed mmap threshold (a block this large or more is
# mapped and unmapped on its own, and the threshold no longer climbs) and the free
# top of the heap trimmed beyond this much
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
# a resident process's glibc arenas (its worker threads share them; the heavy work is
# in polars' own allocator, and Python's holds the GIL)
RESIDENT_ARENAS = 2
GLIBC_THRESHOLD = 128 * 1024
# jemalloc's decay set to 0 only under a budget this small: there its kept pages
# (~100-130 MiB) are a large part of the bound, while at 10M parcels under the default
# 1 GiB budget the prompt decay cost 18-29 % of the wall time for ~100-140 MiB of peak
# (bench/README.md, "Issue 30 on the merged head, stop 37")
PROMPT_DECAY_BELOW = 512 * 1024 * 1024

_released = False


def release_promptly(src: SourceConfig, *, own: bool = True) -> bool:
    """For a source with a `memory_budget` (`own`: the source's own; else the default
    one `within_default` gave it): have polars' allocator (for a budget under
    PROMPT_DECAY_BELOW, when polars is not loaded yet and the environment leaves it
    unset) and, for its own budget, glibc's (when it is the C library) return freed
    memory at once, for the rest of the process. Whether anything was set.

    Not glibc's under the default bound: its fixed 128 KiB thresholds map every larger
    block (a spilled batch, a piece of the file, a list of a chunk's values) afresh and
    unmap it once freed, so each is faulted and zeroed again -- at 10M parcels most of
    the bounded path's system time, for ~100-150 MiB of peak a default bound (no
    setting: within 3 GiB at 10M) does not need (bench/README.md, "10M time (helper
    tenm)"). A declared budget is its source's limit, and keeps them."""
    global _released
    if src.memory_budget is None or _released:
        return False
    _released = True
    changed = False
    small = src.memory_budget < PROMPT_DECAY_BELOW
    if small and "polars" not in sys.modules and JEMALLOC_ENV not in os.environ:
        os.environ[JEMALLOC_ENV] = PROMPT_DECAY
        changed = True
    return (own and _glibc_prompt()) or changed


def resident_process() -> bool:
    """A long-lived process (the scheduler), at its start (before its worker threads):
    at most RESIDENT_ARENAS glibc arenas, unless the environment sets its own
    (`MALLOC_ARENA_MAX`, glibc's tunables). Whether it was set."""
    libc = _glibc()
    if libc is None or "MALLOC_ARENA_MAX" in os.environ or "GLIBC_TUNABLES" in os.environ:
        return False
    return bool(libc.mallopt(M_ARENA_MAX, RESIDENT_ARENAS))


def give_back() -> bool:
    """Return the free pages of every glibc arena to the system (`malloc_trim(0)`: a
    few milliseconds), between two runs of a resident process. Whether any was."""
    libc = _glibc()
    if libc is None:
        return False
    try:
        trim = libc.malloc_trim
    except AttributeError:
        return False
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return bool(trim(0))


def rss_bytes() -> int | None:
    """This process's resident set now (Linux: /proc/self/statm), else None."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def peak_rss_bytes() -> int | None:
    """The most this process ever held resident (its high water mark), else None."""
    if not sys.platform.startswith("linux"):  # (ru_maxrss is in bytes on macOS)
        return None
    try:
        import resource  # lazy: POSIX only (no resource module on Windows)

        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024  # Linux: KiB
    except (ImportError, OSError):
        return None


_libc: ctypes.CDLL | None = None


def _glibc() -> ctypes.CDLL | None:
    """glibc, with `mallopt` typed; None on another platform or C library."""
    global _libc
    if _libc is not None:
        return _libc
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return None
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    _libc = libc
    return libc


def _glibc_prompt() -> bool:
    libc = _glibc()
    if libc is None:
        return False
    mallopt = libc.mallopt
    set_mmap = mallopt(M_MMAP_THRESHOLD, GLIBC_THRESHOLD)
    set_trim = mallopt(M_TRIM_THRESHOLD, GLIBC_THRESHOLD)
    return bool(set_mmap and set_trim)
