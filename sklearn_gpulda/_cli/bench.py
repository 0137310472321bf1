"""``bench``: run a script from the repository's ``benchmarks/`` folder (source checkouts only)."""

import ast
import os
import subprocess
import sys
from pathlib import Path


def benchmarks_dir():
    """The repository's ``benchmarks/`` folder, or None when running from an installed package."""
    root = Path(__file__).resolve().parents[2]  # sklearn_gpulda/_cli/bench.py -> the checkout
    folder = root / "benchmarks"
    # pyproject.toml beside it tells a source checkout from a site-packages that happens to hold
    # some other project's "benchmarks" folder.
    if folder.is_dir() and (root / "pyproject.toml").is_file():
        return folder
    return None


def list_benchmarks(folder):
    """``[(name, summary)]`` for each runnable script, summary being its docstring's first line."""
    found = []
    if folder is None:
        return found
    for path in sorted(folder.glob("*.py")):
        if path.name.startswith("_"):
            continue
        try:
            doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        except (SyntaxError, UnicodeDecodeError, OSError):
            doc = ""
        found.append((path.stem, doc.strip().splitlines()[0] if doc.strip() else ""))
    return found


def bench_epilog():
    folder = benchmarks_dir()
    if folder is None:
        return ("No benchmarks/ folder: benchmark scripts ship with the source repository, not "
                "with the installed package.")
    scripts = list_benchmarks(folder)
    if not scripts:
        return f"No benchmark scripts in {folder} yet."
    width = max(len(name) for name, _ in scripts)
    lines = [f"scripts in {folder}:"]
    lines += [f"  {name:<{width}}  {summary}".rstrip() for name, summary in scripts]
    lines.append("'bench SCRIPT --help' shows a script's own options.")
    return "\n".join(lines)


def run_bench(args):
    folder = benchmarks_dir()
    if folder is None:
        print("bench: the benchmark scripts live in the benchmarks/ folder of the source "
              "repository, which an installed package does not include. Run this command from a "
              "clone of the repository (after 'pip install -e .').", file=sys.stderr)
        return 2
    scripts = dict(list_benchmarks(folder))
    if args.script is None:
        print(bench_epilog())
        return 0
    name = args.script[:-3] if args.script.endswith(".py") else args.script
    if name not in scripts and f"bench_{name}" in scripts:
        name = f"bench_{name}"  # 'bench cuda' for benchmarks/bench_cuda.py
    if name not in scripts:
        available = ", ".join(scripts) or "none yet"
        print(f"bench: no benchmark named {args.script!r} in {folder} (available: {available})",
              file=sys.stderr)
        return 2
    env = dict(os.environ)
    # The script runs with benchmarks/ as its sys.path[0]; put the repository first so it
    # imports this checkout's package even when it is not installed.
    root = str(folder.parent)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    command = [sys.executable, str(folder / f"{name}.py"), *args.args]
    return subprocess.run(command, env=env).returncode
