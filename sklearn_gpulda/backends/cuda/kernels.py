"""The one place that loads CUDA kernels.

``get_function(stem, name)`` returns a kernel of ``cuda/<stem>.cu``: from the precompiled
``_fatbin/<stem>.fatbin`` shipped as package data when it loads on the current GPU, otherwise
compiled from source with NVRTC (sources in the source tree's ``cuda/`` or the installed
``cuda_src/``). Modules are memoised per (device, stem). CuPy is imported lazily, so this module
imports on machines without it.

``launch`` is the thin launcher every engine call goes through: it checks that each array argument
is a C-contiguous CuPy array of the declared dtype and casts each scalar to the declared C type
(CuPy would pass a Python int as a 64-bit ``long long`` and a float as a ``double``).
"""

import os
from pathlib import Path

import numpy as np

# This module lives in backends/cuda/; the fatbins and kernel sources are the package's.
_PKG = Path(__file__).resolve().parents[2]
_MODULES = {}
_FUNCTIONS = {}


def source_dir():
    """Directory holding the ``.cu``/``.cuh`` sources (source tree first, then the package copy)."""
    for cand in (_PKG.parent / "cuda", _PKG / "cuda_src"):
        if cand.is_dir():
            return cand
    raise FileNotFoundError(
        f"no CUDA sources found next to {_PKG} (looked for ../cuda and cuda_src/)"
    )


def _fatbin_path(stem):
    return _PKG / "_fatbin" / f"{stem}.fatbin"


def _compile(stem):
    import cupy

    src_dir = source_dir()
    code = (src_dir / f"{stem}.cu").read_text()
    return cupy.RawModule(code=code, options=("-std=c++17", f"-I{src_dir}"), backend="nvrtc")


def _fatbin_is_current(stem, path):
    """A fatbin older than its sources (a developer edited a kernel) must not shadow them.

    Only a source tree's ``cuda/`` can be edited after a build; the installed ``cuda_src/`` copy is
    written by the installer after the fatbins, so its times say nothing and are not compared.
    """
    src_dir = _PKG.parent / "cuda"
    if not src_dir.is_dir():
        return True
    newest = max((p.stat().st_mtime for p in src_dir.glob("*.cu*")), default=0.0)
    return path.stat().st_mtime >= newest


def get_function(stem, name):
    """Kernel ``name`` of ``cuda/<stem>.cu`` on the current CuPy device.

    Parameters
    ----------
    stem : str
        Kernel file name without ``.cu``.
    name : str
        ``extern "C"`` entry point.

    Returns
    -------
    cupy.RawKernel
    """
    import cupy

    dev = cupy.cuda.runtime.getDevice()
    key = (dev, stem, name)
    fn = _FUNCTIONS.get(key)
    if fn is not None:
        return fn
    mod = _MODULES.get((dev, stem))
    path = _fatbin_path(stem)
    if (
        mod is None
        and path.is_file()
        and os.environ.get("SKLEARN_GPULDA_NVRTC") != "1"
        and _fatbin_is_current(stem, path)
    ):
        try:
            mod = cupy.RawModule(path=str(path))
            fn = mod.get_function(name)  # loading happens here: no SASS/PTX for this GPU raises
        except cupy.cuda.driver.CUDADriverError:
            mod = None
    if mod is None:
        mod = _compile(stem)
    _MODULES[(dev, stem)] = mod
    if fn is None:
        fn = mod.get_function(name)
    _FUNCTIONS[key] = fn
    return fn


# C types a launcher may declare for an argument.
_SCALARS = {
    "i32": np.int32,
    "u32": np.uint32,
    "i64": np.int64,
    "f32": np.float32,
    "f64": np.float64,
}


#: Array specs seen, as dtypes (np.dtype of a type each launch cost a little every argument).
_DTYPES = {}
_NULL = np.uintp(0)


def launch(stem, name, grid, block, args, shared_mem=0):
    """Check and launch one kernel.

    Parameters
    ----------
    stem, name : str
        See :func:`get_function`.
    grid, block : int or tuple of int
    args : sequence of (value, spec)
        ``spec`` is a NumPy dtype for an array argument (the array must be a C-contiguous CuPy
        array of exactly that dtype, or None for a null pointer), or one of ``'i32', 'u32',
        'i64', 'f32', 'f64'`` for a scalar.
    shared_mem : int
        Dynamic shared memory in bytes; the kernel's limit is raised when it exceeds 48 KB.
    """
    import cupy

    # A small batch of online learning makes about eighty launches, so the checks here are
    # written to cost little host time per launch.
    fn = get_function(stem, name)
    ndarray = cupy.ndarray
    cast = []
    for i, (value, spec) in enumerate(args):
        if spec.__class__ is str:
            cast.append(_SCALARS[spec](value))
            continue
        if value is None:
            cast.append(_NULL)
            continue
        if not isinstance(value, ndarray):
            raise TypeError(
                f"{name}: argument {i} must be a cupy.ndarray, got {type(value).__name__}"
            )
        dtype = _DTYPES.get(spec)
        if dtype is None:
            dtype = _DTYPES[spec] = np.dtype(spec)
        if value.dtype is not dtype and value.dtype != dtype:
            raise TypeError(f"{name}: argument {i} must have dtype {dtype}, got {value.dtype}")
        if not value._c_contiguous:
            raise ValueError(f"{name}: argument {i} must be C-contiguous")
        cast.append(value)
    if shared_mem > 48 * 1024 and fn.max_dynamic_shared_size_bytes < shared_mem:
        fn.max_dynamic_shared_size_bytes = int(shared_mem)
    grid = tuple(grid) if isinstance(grid, (tuple, list)) else (grid,)
    block = tuple(block) if isinstance(block, (tuple, list)) else (block,)
    fn(grid, block, tuple(cast), shared_mem=int(shared_mem))
