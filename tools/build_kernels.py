#!/usr/bin/env python3
"""Compile every ``cuda/*.cu`` into one fatbin per file and check ptxas resource usage.

Each fatbin holds SASS for the architectures we support plus PTX for the newest one, so that
``sklearn_gpulda/backends/cuda/kernels.py`` can load it with ``cupy.RawModule(path=...)`` on any
of those GPUs and the driver can JIT the PTX on newer ones. ``-Xptxas -v`` output is parsed into
a table of registers / shared memory / stack per kernel and architecture; a register spill fails
the build (``--allow-spills`` turns that into a warning), because a spill in a sampling kernel
costs far more than the occupancy it buys.

Usage::

    python tools/build_kernels.py                 # every default architecture
    python tools/build_kernels.py --arch 90       # quick build for the GPU at hand
    python tools/build_kernels.py --src /tmp/k --out /tmp/k/out --force

Only the standard library is used: ``setup.py`` runs this script inside pip's isolated build
environment, where nothing else is installed.

Exit status: 0 on success or when there is nothing to compile, 1 on a compile error, a spill
(without ``--allow-spills``) or a missing nvcc, 2 on bad arguments.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SRC = ROOT / "cuda"
DEFAULT_OUT = ROOT / "sklearn_gpulda" / "_fatbin"
DEFAULT_ARCHS = (75, 80, 86, 89, 90)

# --use_fast_math is deliberately absent: it flushes denormals and approximates division and
# logarithms, which would move draws away from the NumPy engine's (doc/algorithm.md).
BASE_FLAGS = ("-std=c++17", "-O3", "-lineinfo", "--fatbin", "-Xptxas", "-v")
HEADER_SUFFIXES = (".cuh", ".h", ".hpp")

_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(sm_\d+a?)'")
_PROPS = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")


def parse_archs(values):
    """Turn ``["80,86", "sm_90"]`` into ``[80, 86, 90]`` (sorted, unique)."""
    archs = set()
    for value in values:
        for item in value.replace(",", " ").split():
            digits = re.sub(r"^(sm_|compute_)", "", item.strip().lower()).replace(".", "")
            if not digits.isdigit() or int(digits) < 50:
                raise argparse.ArgumentTypeError(f"not a CUDA architecture: {item!r}")
            archs.add(int(digits))
    if not archs:
        raise argparse.ArgumentTypeError("--arch needs at least one architecture")
    return sorted(archs)


def gencode_flags(archs):
    """SASS for every architecture, PTX only for the newest: older GPUs never need to JIT."""
    flags = []
    for arch in archs:
        flags += ["-gencode", f"arch=compute_{arch},code=sm_{arch}"]
    newest = max(archs)
    flags += ["-gencode", f"arch=compute_{newest},code=compute_{newest}"]
    return flags


def find_nvcc(explicit=None):
    """Path of the nvcc to use, or None.

    An nvcc named explicitly (argument, then ``SKLEARN_GPULDA_NVCC``) is the only candidate: if it
    is wrong we say none was found rather than quietly building with a different toolkit.
    Otherwise PATH, then ``$CUDA_HOME``/``$CUDA_PATH``, then ``/usr/local/cuda``.
    """
    named = explicit or os.environ.get("SKLEARN_GPULDA_NVCC")
    if named:
        candidates = [shutil.which(named) or named]
    else:
        candidates = [shutil.which("nvcc")]
        for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
            if home:
                candidates.append(os.path.join(home, "bin", "nvcc"))
    for candidate in candidates:
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def nvcc_version(nvcc):
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=True).stdout
    lines = [line.strip() for line in out.splitlines() if line.strip()]
    return lines[-1] if lines else "unknown"


def parse_ptxas(log):
    """Resource usage per ``(function, arch)`` from ``-Xptxas -v`` output.

    Returns a dict mapping ``(name, arch)`` to a dict with ``entry`` (a kernel, as opposed to a
    non-inlined device function), ``registers``, ``smem``, ``stack``, ``spill_stores`` and
    ``spill_loads``. ptxas prints one architecture's functions together, so a device function
    belongs to the architecture of the last entry function announced before it.
    """
    stats = {}
    entries = set()
    arch = "sm_?"
    current = None
    for line in log.splitlines():
        match = _ENTRY.search(line)
        if match:
            name, arch = match.groups()
            entries.add((name, arch))
            current = None
            continue
        match = _PROPS.search(line)
        if match:
            current = (match.group(1), arch)
            stats.setdefault(current, {"registers": 0, "smem": 0, "stack": 0,
                                       "spill_stores": 0, "spill_loads": 0})
            continue
        match = _FRAME.search(line)
        if match and current is not None:
            stack, stores, loads = (int(g) for g in match.groups())
            stats[current].update(stack=stack, spill_stores=stores, spill_loads=loads)
            continue
        match = _USED.search(line)
        if match and current is not None:
            stats[current]["registers"] = int(match.group(1))
            smem = _SMEM.search(line)
            stats[current]["smem"] = int(smem.group(1)) if smem else 0
    for key, value in stats.items():
        value["entry"] = key in entries
    return stats


def other_output(log):
    """Compiler output that is not the -v resource report: warnings the reader must see."""
    kept = []
    for line in log.splitlines():
        if line.startswith("ptxas info") or _FRAME.search(line) or not line.strip():
            continue
        kept.append(line)
    return "\n".join(kept)


class Job:
    def __init__(self, source, out_dir, archs, key):
        self.source = source
        self.fatbin = out_dir / f"{source.stem}.fatbin"
        # The stamp remembers how the fatbin was made (so that a quick --arch 90 build is not
        # mistaken for a full one) and keeps the ptxas log, so the table and the spill check
        # cover files that were up to date and not recompiled.
        self.stamp = out_dir / f"{source.stem}.fatbin.json"
        self.archs = archs
        self.key = key
        self.log = ""
        self.error = None
        self.seconds = 0.0
        self.compiled = False

    def up_to_date(self, newest_header):
        if not (self.fatbin.is_file() and self.stamp.is_file()):
            return False
        try:
            stamp = json.loads(self.stamp.read_text())
        except (OSError, ValueError):
            return False
        if stamp.get("key") != self.key:
            return False
        built = self.fatbin.stat().st_mtime
        if self.source.stat().st_mtime > built or newest_header > built:
            return False
        self.log = stamp.get("ptxas", "")
        return True

    def run(self, nvcc, include_dir, threads, verbose):
        tmp = self.fatbin.with_name(self.fatbin.name + ".tmp")
        cmd = [nvcc, *BASE_FLAGS, f"-I{include_dir}", *gencode_flags(self.archs)]
        if threads > 1 and len(self.archs) > 1:
            cmd += ["--threads", str(threads)]
        cmd += ["-o", str(tmp), str(self.source)]
        if verbose:
            print("  $ " + " ".join(cmd), flush=True)
        start = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        self.seconds = time.perf_counter() - start
        self.log = proc.stdout + proc.stderr
        if proc.returncode != 0:
            self.error = f"nvcc exited with status {proc.returncode}"
            tmp.unlink(missing_ok=True)
            return
        # Written under a temporary name and renamed, so an interrupted build never leaves a
        # truncated fatbin that looks newer than its source.
        os.replace(tmp, self.fatbin)
        self.stamp.write_text(json.dumps({"key": self.key, "ptxas": self.log}, indent=1))
        self.compiled = True


def format_table(jobs, archs):
    rows = []
    spills = []
    arch_names = [f"sm_{a}" for a in archs]
    for job in jobs:
        stats = parse_ptxas(job.log)
        names = sorted({name for name, _ in stats}, key=lambda n: (not any(
            stats.get((n, a), {}).get("entry") for a in arch_names), n))
        for name in names:
            label = name if any(stats.get((name, a), {}).get("entry") for a in arch_names) \
                else f"{name} (device fn)"
            cells = []
            for arch in arch_names:
                s = stats.get((name, arch))
                if s is None:
                    cells.append("-")
                    continue
                cell = f"{s['registers']}/{s['smem']}/{s['stack']}"
                if s["spill_stores"] or s["spill_loads"]:
                    cell += "!"
                    spills.append(f"{job.source.name}: {name} on {arch} spills "
                                  f"{s['spill_stores']} bytes (stores), "
                                  f"{s['spill_loads']} bytes (loads)")
                cells.append(cell)
            rows.append([job.source.name, label, *cells])
    header = ["file", "kernel", *arch_names]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in [header, *rows]]
    return lines, spills


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Compile cuda/*.cu into fatbins (SASS per architecture + PTX for the newest) "
                    "and fail on register spills.")
    parser.add_argument("--src", type=Path, default=DEFAULT_SRC,
                        help="folder of the .cu files and their headers (default: %(default)s)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help="where <stem>.fatbin files are written (default: %(default)s)")
    parser.add_argument("--arch", nargs="+", metavar="CC",
                        help="architectures to build, e.g. '--arch 90' or '--arch 80,90' "
                             "(default: %s)" % ",".join(map(str, DEFAULT_ARCHS)))
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1,
                        help="parallel compilations over files and architectures "
                             "(default: %(default)s)")
    parser.add_argument("--force", action="store_true", help="rebuild even when up to date")
    parser.add_argument("--allow-spills", action="store_true",
                        help="report register spills as a warning instead of failing")
    parser.add_argument("--nvcc", help="nvcc to use (default: $SKLEARN_GPULDA_NVCC, then PATH)")
    parser.add_argument("-v", "--verbose", action="store_true", help="echo the nvcc command lines")
    args = parser.parse_args(argv)

    try:
        archs = parse_archs(args.arch) if args.arch else list(DEFAULT_ARCHS)
    except argparse.ArgumentTypeError as exc:
        parser.error(str(exc))
    if args.jobs < 1:
        parser.error("-j must be at least 1")

    src = args.src.resolve()
    sources = sorted(src.glob("*.cu")) if src.is_dir() else []
    if not sources:
        print(f"build_kernels: no .cu files in {src}; nothing to compile.")
        return 0

    nvcc = find_nvcc(args.nvcc)
    if nvcc is None:
        named = args.nvcc or os.environ.get("SKLEARN_GPULDA_NVCC")
        where = f"{named!r} is not an executable" if named else \
            "set SKLEARN_GPULDA_NVCC or put nvcc on PATH"
        print(f"build_kernels: nvcc not found ({where}).", file=sys.stderr)
        return 1
    version = nvcc_version(nvcc)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)

    key = {"nvcc": version, "flags": list(BASE_FLAGS), "gencode": gencode_flags(archs)}
    headers = [p for p in src.iterdir() if p.suffix in HEADER_SUFFIXES]
    # Any header may be included by any kernel file; rebuilding all on a header change is cheap
    # next to missing a dependency.
    newest_header = max((p.stat().st_mtime for p in headers), default=0.0)
    jobs = [Job(s, out, archs, key) for s in sources]
    stale = [job for job in jobs if args.force or not job.up_to_date(newest_header)]

    print(f"build_kernels: {nvcc} ({version}); "
          f"SASS {' '.join(f'sm_{a}' for a in archs)} + PTX compute_{max(archs)}")
    for job in jobs:
        if job not in stale:
            print(f"  up to date: {job.fatbin.name}")
    if stale:
        workers = min(args.jobs, len(stale))
        # Cores left over after one process per file go to nvcc's own per-architecture threads.
        threads = max(1, min(len(archs), args.jobs // workers))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            futures = {job: pool.submit(job.run, nvcc, src, threads, args.verbose) for job in stale}
        for job, future in futures.items():
            if future.exception() is not None:
                job.error = f"{type(future.exception()).__name__}: {future.exception()}"
        for job in stale:
            status = f"FAILED ({job.error})" if job.error else "ok"
            print(f"  compiled {job.source.name} -> {job.fatbin.name} "
                  f"in {job.seconds:.1f} s: {status}")
            extra = other_output(job.log)
            if extra:
                print("    " + extra.replace("\n", "\n    "))

    failed = [job for job in jobs if job.error]
    ok_jobs = [job for job in jobs if not job.error]
    lines, spills = format_table(ok_jobs, archs)
    if len(lines) > 1:
        print("registers/shared bytes/stack bytes per kernel ('!' = spills):")
        for line in lines:
            print("  " + line)
    # The verdict goes to stderr; flush the report first so a CI log shows them in order.
    sys.stdout.flush()
    if failed:
        print(f"build_kernels: {len(failed)} file(s) failed to compile: "
              + ", ".join(job.source.name for job in failed), file=sys.stderr)
        return 1
    if spills:
        stream = sys.stdout if args.allow_spills else sys.stderr
        word = "warning" if args.allow_spills else "error"
        for message in spills:
            print(f"build_kernels: {word}: {message}", file=stream)
        if not args.allow_spills:
            print("build_kernels: register spills are errors (pass --allow-spills to only warn).",
                  file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
