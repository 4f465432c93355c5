"""How much memory this process may still allocate, and the one message for an input that needs more.

Two ceilings bound an allocation: the memory the machine has free (Linux ``MemAvailable``) and
the address space this process may still map (``RLIMIT_AS``, what ``ulimit -v``, ``prlimit`` and
container runtimes set, minus what the process already maps). ``headroom()`` is the smaller of
the two; every place that can tell the size of what it is about to allocate (an NPZ's declared
bytes, a generated input, a results file) compares with it first and refuses with
``shortage_message``: the input named, the memory it needs, what there is, and what to do.

A ``MemoryError`` that still escapes (an estimate that was low) is turned into the same kind of
message by the command line (``harness.cli``): exit 2, never 0 or 1, never a traceback.
"""

from __future__ import annotations

import os

MiB = 2**20

#: What to do when an input outgrows the machine, in the order a user would try them.
REMEDIES = ("a smaller case (fewer elements, regions or cases)", "a lower cap with --limit, so that it is refused "
            "before anything is allocated", "a machine or container with more memory (or a higher ulimit -v)")


#: What an execution provider's error says when it could not allocate (lower case, found anywhere
#: in the message): ONNX Runtime's arena (core/framework/bfc_arena.cc "Failed to allocate memory"),
#: C++'s std::bad_alloc, CUDA's cudaErrorMemoryAllocation ("out of memory"), Windows' E_OUTOFMEMORY
#: (0x8007000E, what DirectML returns for a failed heap or buffer).
ALLOCATION_FAILURES = ("failed to allocate memory", "bad_alloc", "out of memory", "cudaerrormemoryallocation",
                       "e_outofmemory", "8007000e")


def allocation_failed(message: str) -> bool:
    """Whether an error message says memory could not be allocated (``ALLOCATION_FAILURES``)."""
    text = str(message).lower()
    return any(marker in text for marker in ALLOCATION_FAILURES)


def available_memory() -> int | None:
    """Bytes of memory available to new processes now (Linux ``MemAvailable``, else free
    physical pages), or None when this platform does not say."""
    found = _proc_kib("/proc/meminfo", "MemAvailable:")
    if found is not None:
        return found
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def address_space_limit() -> int | None:
    """This process's address-space limit in bytes (``RLIMIT_AS``), None when unlimited or unknown."""
    try:
        import resource
    except ImportError:  # Windows: no rlimits (a job object's limit shows as available memory)
        return None
    soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
    return None if soft in (resource.RLIM_INFINITY, -1) else int(soft)


def address_space_used() -> int | None:
    """Bytes of address space this process maps now (Linux ``VmSize``), None where unknown."""
    return _proc_kib("/proc/self/status", "VmSize:")


def _proc_kib(path: str, key: str) -> int | None:
    """The ``key: N kB`` line of a Linux /proc file, in bytes; None where there is no such file or line."""
    try:
        with open(path, encoding="ascii") as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def headroom() -> int | None:
    """Bytes this process may still allocate: the smaller of the machine's available memory and
    what its address-space limit leaves; None when neither is known."""
    limits = [available_memory()]
    ceiling, used = address_space_limit(), address_space_used()
    if ceiling is not None and used is not None:
        limits.append(max(0, ceiling - used))
    known = [x for x in limits if x is not None]
    return min(known) if known else None


def mib(nbytes: int) -> str:
    """``nbytes`` in whole MiB, rounded up, as text (``"1024 MiB"``)."""
    return f"{-(-int(nbytes) // MiB)} MiB"


def shortage_message(what: str, need: int | None, have: int | None = None) -> str:
    """``<what> needs about N MiB of memory; M MiB are available`` and a ``Note:`` listing what
    to do (``REMEDIES``). ``need`` None: the need is not known (a ``MemoryError`` was caught)."""
    have = headroom() if have is None else have
    needs = f"needs about {mib(need)} of memory" if need is not None else "needs more memory than this process has"
    left = f"; {mib(have)} were available to this process" if have is not None else ""
    return f"{what} {needs}{left}.\nNote: try " + "; or ".join(REMEDIES)


def check_fits(what: str, need: int, factor: float = 1.0) -> str | None:
    """``shortage_message`` when ``need`` bytes (times ``factor``, a safety margin) exceed
    ``headroom()``; None when they fit or the headroom is unknown."""
    have = headroom()
    if have is None or need * factor <= have:
        return None
    return shortage_message(what, int(need * factor), have)
