"""How much memory this process may still allocate, and the one message for an input that needs more.

Three ceilings bound an allocation: the memory the machine has free (Linux ``MemAvailable``),
what the memory cgroup the process runs in leaves (a container's limit: ``docker run --memory``,
a Kubernetes limit, a systemd unit's ``MemoryMax``; ``cgroup_memory``: cgroup v2's ``memory.max``
less ``memory.current``, or v1's ``memory.limit_in_bytes`` less ``memory.usage_in_bytes``, at the
tightest level of the hierarchy, reclaimable file cache not counted as used), and the address
space this process may still map (``RLIMIT_AS``, what ``ulimit -v``, ``prlimit`` and container
runtimes set, minus what the process already maps). ``available_memory()`` is the smaller of the
first two (what new processes, a run's workers, can have) and ``headroom()`` the smallest of all
three; every place that can tell the size of what it is about to allocate (an NPZ's declared
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


def machine_memory() -> int | None:
    """Bytes of the machine's memory available to new processes now (Linux ``MemAvailable``, else
    free physical pages), whatever a cgroup allows; None when this platform does not say."""
    found = _proc_kib("/proc/meminfo", "MemAvailable:")
    if found is None:
        try:
            found = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (AttributeError, ValueError, OSError):
            found = None
    return found


def available_memory() -> int | None:
    """Bytes of memory available to new processes now: the machine's (``machine_memory``) and no
    more than the memory cgroup leaves (``cgroup_memory``); None when this platform says neither."""
    found = machine_memory()
    cgroup = cgroup_memory()
    left = None if cgroup is None else max(0, cgroup[0] - cgroup[1])
    known = [x for x in (found, left) if x is not None]
    return min(known) if known else None


#: cgroup v1 writes "no limit" as a huge number (the largest page-aligned 63-bit value).
_UNLIMITED = 2**62


def cgroup_memory(proc_cgroup: str = "/proc/self/cgroup", mountinfo: str = "/proc/self/mountinfo"
                  ) -> tuple[int, int] | None:
    """``(limit, used)`` in bytes of the memory cgroup level that leaves this process the least
    (its own cgroup and every ancestor up to the mount's root), ``used`` without the inactive
    file cache the kernel reclaims before it kills; None where no level sets a limit (or this is
    not Linux). The paths are parameters for tests of layouts this machine does not have."""
    found = []
    for root, path, version in _memory_cgroups(proc_cgroup, mountinfo):
        parts = [p for p in path.split("/") if p]
        for depth in range(len(parts), -1, -1):
            level = os.path.join(root, *parts[:depth])
            limit_used = _level(level, version)
            if limit_used is not None:
                found.append(limit_used)
    return min(found, key=lambda lu: lu[0] - lu[1]) if found else None


def _memory_cgroups(proc_cgroup: str, mountinfo: str) -> list[tuple[str, str, int]]:
    """``(mount point, this process's path under it, version)`` of the v2 hierarchy and of v1's
    memory controller, as /proc/self/cgroup and /proc/self/mountinfo say."""
    try:
        with open(proc_cgroup, encoding="utf-8") as f:
            memberships = [line.rstrip("\n").split(":", 2) for line in f if line.count(":") >= 2]
        with open(mountinfo, encoding="utf-8") as f:
            mounts = [line.split() for line in f]
    except OSError:
        return []
    v2_path = next((path for _, controllers, path in memberships if _ == "0" and controllers == ""), None)
    v1_path = next((path for _, controllers, path in memberships if "memory" in controllers.split(",")), None)
    found = []
    for fields in mounts:
        if "-" not in fields:
            continue
        dash = fields.index("-")
        fstype, options, mount_root, point = fields[dash + 1], fields[-1], fields[3], fields[4]
        if fstype == "cgroup2" and v2_path is not None:
            found.append((point, _under(v2_path, mount_root), 2))
        elif fstype == "cgroup" and "memory" in options.split(",") and v1_path is not None:
            found.append((point, _under(v1_path, mount_root), 1))
    return found


def _under(path: str, mount_root: str) -> str:
    """A cgroup path made relative to what the mount shows (a container sees its own cgroup as ``/``)."""
    if mount_root not in ("", "/") and (path == mount_root or path.startswith(mount_root.rstrip("/") + "/")):
        return path[len(mount_root.rstrip("/")):] or "/"
    return path


def _level(folder: str, version: int) -> tuple[int, int] | None:
    """``(limit, used)`` of one cgroup folder, or None when it sets no limit (or cannot be read)."""
    names = ("memory.max", "memory.current", "inactive_file") if version == 2 else \
        ("memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file")
    try:
        with open(os.path.join(folder, names[0]), encoding="ascii") as f:
            raw = f.read().strip()
        if raw == "max" or not raw.isdigit() or int(raw) >= _UNLIMITED:
            return None
        with open(os.path.join(folder, names[1]), encoding="ascii") as f:
            used = int(f.read().strip())
    except (OSError, ValueError):
        return None
    inactive = 0
    try:
        with open(os.path.join(folder, "memory.stat"), encoding="ascii") as f:
            for line in f:
                key, _, value = line.partition(" ")
                if key == names[2]:
                    inactive = int(value)
                    break
    except (OSError, ValueError):
        pass
    return int(raw), max(0, used - inactive)


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
