"""What this host lets the process use: cores, the load of other processes, and memory.

The CPU engine sizes its team of workers and refuses a chain that cannot fit from these; each
reader returns None (or a safe default) where the platform does not say.
"""

import os


def _read_int(path):
    """The integer in a one-line file such as a cgroup's ``memory.max``; None for 'max', a
    missing file or anything else."""
    try:
        with open(path) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _cgroup_room():
    """Bytes this process's memory cgroup may still take (v2, else v1), or None if unlimited.

    ``MemAvailable`` is the whole machine's: in a container or under ``systemd-run -p
    MemoryMax=`` the limit is the cgroup's, and a chain that fits the machine was killed or hit
    MemoryError minutes into its allocations instead of being refused here.
    """
    # v2: the process's group and each group above it may set a limit; the tightest counts.
    path = ""
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                if line.startswith("0::"):
                    path = line[3:].strip().strip("/")
    except OSError:
        pass
    parts = path.split("/") if path else []
    rooms = []
    for depth in range(len(parts), -1, -1):
        folder = "/".join(["/sys/fs/cgroup", *parts[:depth]])
        limit = _read_int(folder + "/memory.max")
        if limit is not None:
            rooms.append(max(0, limit - (_read_int(folder + "/memory.current") or 0)))
    if rooms:
        return min(rooms)
    limit = _read_int("/sys/fs/cgroup/memory/memory.limit_in_bytes")
    if limit is not None and limit < 1 << 60:  # v1 writes a huge number for no limit
        used = _read_int("/sys/fs/cgroup/memory/memory.usage_in_bytes") or 0
        return max(0, limit - used)
    return None


def _address_space_room():
    """Bytes of address space ``ulimit -v`` (RLIMIT_AS) still leaves this process, or None."""
    try:
        import resource

        limit = resource.getrlimit(resource.RLIMIT_AS)[0]
        if limit == resource.RLIM_INFINITY:
            return None
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return max(0, limit - int(line.split()[1]) * 1024)
    except (ImportError, OSError, ValueError):
        pass
    return None


def available_memory():
    """Bytes of host memory this process may still allocate (Linux): the least of the
    machine's available memory, its cgroup's room and its address-space limit's room; None
    where none can be read."""
    rooms = [_cgroup_room(), _address_space_room()]
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    rooms.append(int(line.split()[1]) * 1024)
    except OSError:
        pass
    rooms = [r for r in rooms if r is not None]
    return min(rooms) if rooms else None


def _cgroup_cores():
    """The cores a cgroup (v2) CPU quota allows this process, or None without one."""
    try:
        with open("/sys/fs/cgroup/cpu.max") as f:
            quota, period = f.read().split()[:2]
        if quota == "max":
            return None
        return max(1, int(int(quota) / int(period)))
    except (OSError, ValueError):
        return None


def usable_cores():
    """Cores this process may run on: its CPU affinity where the platform reports it, else
    the machine's count, and no more than a cgroup's CPU quota allows."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    quota = _cgroup_cores()
    return max(1, min(n, quota) if quota else n)


def _runnable_now():
    """Tasks runnable on the machine now, this one included (Linux), or None."""
    try:
        with open("/proc/loadavg") as f:
            return int(f.read().split()[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        return None


def busy_elsewhere(cores=None):
    """Cores, of :func:`usable_cores`, that other processes keep busy now (a float).

    The 1-minute load average, but no more than the tasks runnable right now other than the
    caller (``/proc/loadavg``): the average alone still counts this process's own workers for
    a minute after a fit, and its own work before the call. Where this process may use only
    part of the machine, the machine's load is scaled to that part.
    """
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        return 0.0
    running = _runnable_now()
    if running is not None:
        load = min(load, max(0, running - 1))
    cores = usable_cores() if cores is None else cores
    total = os.cpu_count() or cores
    return max(0.0, load * min(1.0, cores / total))
