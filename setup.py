"""Build hook: precompile the CUDA kernels into fatbins at install time.

Metadata lives in pyproject.toml; this file only adds a ``build_py`` step that

* runs ``tools/build_kernels.py`` when an nvcc is available (``SKLEARN_GPULDA_NVCC`` or PATH),
  writing ``sklearn_gpulda/_fatbin/<stem>.fatbin`` into the built package, or into the source tree
  for an editable install (so ``pip install -e .`` leaves fatbins next to the code that loads them);
* copies ``cuda/*.cu`` and ``cuda/*.cuh`` into the built package as ``sklearn_gpulda/cuda_src/``,
  because an installed package has no ``cuda/`` folder beside it and the NVRTC fallback in
  ``sklearn_gpulda/backends/cuda/kernels.py`` needs the sources.

Without nvcc the build still succeeds: the package imports and runs on the CPU everywhere, and on
a GPU the kernels are compiled by NVRTC on first use. ``SKLEARN_GPULDA_SKIP_KERNELS=1`` skips the
compile step on purpose (quick reinstalls, machines whose nvcc is too old).
"""

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
PACKAGE = "sklearn_gpulda"
CUDA_DIR = HERE / "cuda"
BUILD_SCRIPT = HERE / "tools" / "build_kernels.py"


def _note(message):
    # pip shows a build backend's stderr with -v or when the build fails; that is enough for a note.
    print(f"sklearn-gpulda build: {message}", file=sys.stderr, flush=True)


def _truthy(value):
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}


def _load_build_script():
    # Imported from its file path because tools/ is not a package and must not become one.
    spec = importlib.util.spec_from_file_location("_sklearn_gpulda_build_kernels", BUILD_SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class build_py_with_kernels(build_py):
    """``build_py`` followed by copying the CUDA sources and compiling the fatbins."""

    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            # An editable install imports from the source tree, where backends/cuda/kernels.py reads cuda/
            # directly; the fatbins go beside the code that loads them.
            self._compile_kernels(HERE / PACKAGE / "_fatbin")
            return
        # Resolved now: the build script runs with its own working directory.
        package_dir = Path(self.build_lib).resolve() / PACKAGE
        self._copy_sources(package_dir / "cuda_src")
        # Compiled under build/ rather than straight into the package so that the build
        # script's bookkeeping (stamps with the ptxas report) stays out of the wheel, and a
        # repeated `pip install .` reuses fatbins whose sources did not change.
        cache = Path(self.get_finalized_command("build").build_base).resolve() / "kernels"
        if self._compile_kernels(cache):
            target = package_dir / "_fatbin"
            target.mkdir(parents=True, exist_ok=True)
            for source in sorted(CUDA_DIR.glob("*.cu")):
                shutil.copy2(cache / f"{source.stem}.fatbin", target / f"{source.stem}.fatbin")

    def _copy_sources(self, target):
        sources = sorted(CUDA_DIR.glob("*.cu")) + sorted(CUDA_DIR.glob("*.cuh"))
        if not sources:
            return
        target.mkdir(parents=True, exist_ok=True)
        for path in sources:
            shutil.copy2(path, target / path.name)

    def _compile_kernels(self, out_dir):
        """Compile cuda/*.cu into ``out_dir``; False when skipped (the build goes on without)."""
        if not any(CUDA_DIR.glob("*.cu")):
            _note("no cuda/*.cu sources here; nothing to precompile.")
            return False
        if _truthy(os.environ.get("SKLEARN_GPULDA_SKIP_KERNELS")):
            _note("SKLEARN_GPULDA_SKIP_KERNELS is set: not precompiling kernels; "
                  "on a GPU they will be compiled with NVRTC on first use.")
            return False
        if not BUILD_SCRIPT.is_file():
            _note(f"{BUILD_SCRIPT} is missing; not precompiling kernels.")
            return False
        nvcc = _load_build_script().find_nvcc()
        if nvcc is None:
            _note("nvcc not found (set SKLEARN_GPULDA_NVCC to use one): installing without "
                  "precompiled kernels; on a GPU they will be compiled with NVRTC on first use.")
            return False
        # Spills only warn here: they cost speed, not correctness, and a user's newer nvcc should
        # not block an install. CI runs the script without --allow-spills, where they fail.
        cmd = [sys.executable, str(BUILD_SCRIPT), "--out", str(out_dir), "--nvcc", nvcc,
               "--allow-spills"]
        _note("compiling kernels: " + " ".join(cmd))
        result = subprocess.run(cmd, cwd=HERE)
        if result.returncode != 0:
            raise SystemExit(
                f"sklearn-gpulda build: kernel compilation failed (exit {result.returncode}). "
                "Fix the error above, point SKLEARN_GPULDA_NVCC at another nvcc, or set "
                "SKLEARN_GPULDA_SKIP_KERNELS=1 to install without precompiled kernels.")
        return True


setup(cmdclass={"build_py": build_py_with_kernels})
