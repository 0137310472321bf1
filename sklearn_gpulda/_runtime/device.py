"""The ``device`` parameter, parsed in one place, and what crosses between host and device.

``device`` is ``'auto'``, ``'cpu'``, ``'cuda'`` or ``'cuda:N'``; ``'cuda:N,M,...'`` (or a list of
GPU ordinals or ``'cuda:N'`` strings) names several GPUs of one host, over which a batch fit
spreads its documents (the registry of :mod:`sklearn_gpulda.backends` says which algorithms can).
:func:`parse_device` checks the spelling only; :func:`resolve_device` checks it against this
machine (CuPy importable, the GPU ordinals present). CuPy is imported lazily, so this module
imports on machines without it.
"""

import re
from dataclasses import dataclass

import numpy as np

#: Spellings of ``device`` other than the ``'cuda:N'`` forms.
DEVICE_WORDS = ("auto", "cpu", "cuda")


@dataclass(frozen=True)
class Device:
    """Where a sampler runs: the CPU, or one or more GPUs of this host.

    Attributes
    ----------
    kind : {'cpu', 'cuda'}
    indices : tuple of int
        GPU ordinals (empty for the CPU).
    """

    kind: str
    indices: tuple = ()

    def __str__(self):
        if self.kind == "cpu":
            return "cpu"
        return "cuda:" + ",".join(str(i) for i in self.indices)

    @property
    def lead(self):
        """The first GPU alone (the CPU for the CPU): where work that runs on one GPU goes when
        several are named (online learning, inference)."""
        return self if self.kind == "cpu" else Device("cuda", self.indices[:1])

    @property
    def index(self):
        """The one GPU ordinal; ValueError for the CPU or several GPUs."""
        if self.kind != "cuda" or len(self.indices) != 1:
            raise ValueError(f"{self} is not a single GPU")
        return self.indices[0]


CPU = Device("cpu")


_BYTE_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
               "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}


def parse_bytes(value, name="max_device_memory"):
    """A number of bytes from an int, None, or a string such as ``'8GB'``, ``'1.5 GiB'``.

    Raises
    ------
    ValueError
        A string that is not a positive number with one of the units B, KB, MB, GB, TB, KiB,
        MiB, GiB, TiB (decimal and binary multiples, any case).
    """
    if value is None:
        return None
    if not isinstance(value, str):
        return int(value)
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", value)
    unit = match and match.group(2).upper()
    if not match or unit not in _BYTE_UNITS or float(match.group(1)) <= 0:
        raise ValueError(f"{name} must be a number of bytes or a string such as '8GB' or "
                         f"'512MiB', got {value!r}")
    return int(float(match.group(1)) * _BYTE_UNITS[unit])


def parse_device(value):
    """Check the spelling of ``device``.

    Parameters
    ----------
    value : str, or list or tuple of int or str
        A list names GPUs: ordinals, or ``'cuda:N'`` strings.

    Returns
    -------
    kind : {'auto', 'cpu', 'cuda'}
    indices : tuple of int or None
        The GPU ordinals named, or None where none is named ('auto', 'cpu', 'cuda').

    Raises
    ------
    ValueError
        Anything else, with the accepted forms in the message. Spelling is exact (``'CUDA'`` is
        refused), as for every other string parameter of scikit-learn.
    """
    if isinstance(value, (list, tuple)) and value:
        return parse_device("cuda:" + ",".join(_gpu_ordinal(item) for item in value))
    if not isinstance(value, str):
        raise ValueError(f"device must be a string or a list of GPUs, got "
                         f"{type(value).__name__}")
    if value in DEVICE_WORDS:
        return value, None
    kind, sep, rest = value.partition(":")
    parts = rest.split(",")
    # ASCII digits only: str.isdigit also accepts '²', which int() then refuses.
    if kind == "cuda" and sep and all(p.isascii() and p.isdigit() for p in parts):
        indices = tuple(int(p) for p in parts)
        if len(set(indices)) == len(indices):
            return "cuda", indices
    raise ValueError(
        f"device must be 'auto', 'cpu', 'cuda', 'cuda:N' or 'cuda:N,M,...' (distinct GPU "
        f"numbers), got {value!r}"
    )


def _gpu_ordinal(item):
    """One GPU of a ``device`` list as the digits of its ordinal."""
    if isinstance(item, (int, np.integer)) and not isinstance(item, bool) and item >= 0:
        return str(int(item))
    if isinstance(item, str) and item.startswith("cuda:") and "," not in item:
        return item[5:]
    raise ValueError(f"a device list holds GPU ordinals or 'cuda:N' strings, got {item!r}")


def import_cupy():
    """CuPy, or the reason it cannot be used here.

    Returns
    -------
    cupy : module or None
    reason : str
        Empty when CuPy imported and sees at least one GPU; otherwise what went wrong, including
        the underlying exception, so a broken installation is not reported as a missing GPU.
    """
    try:
        import cupy
    except Exception as exc:  # ImportError, or a CuPy that fails while loading CUDA libraries
        return None, f"CuPy does not import ({type(exc).__name__}: {exc})"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # no driver, or a driver too old for this CuPy
        return None, f"CuPy imports but sees no usable GPU ({type(exc).__name__}: {exc})"
    if count < 1:
        return None, "CuPy imports but the driver reports no GPU"
    return cupy, ""


def gpu_count():
    """Number of GPUs CuPy can use (0 without CuPy)."""
    cupy, _ = import_cupy()
    return 0 if cupy is None else int(cupy.cuda.runtime.getDeviceCount())


def resolve_device(value):
    """The :class:`Device` a fit with ``device=value`` uses on this machine.

    ``'auto'`` is GPU 0 when CuPy sees one, else the CPU; ``'cuda'`` is GPU 0.

    Raises
    ------
    ValueError
        The spelling is wrong.
    RuntimeError
        A GPU was asked for and CuPy cannot use it, or a GPU ordinal is out of range; the message
        says why and what to do.
    """
    kind, indices = parse_device(value)
    if kind == "cpu":
        return CPU
    cupy, reason = import_cupy()
    if kind == "auto":
        return CPU if cupy is None else Device("cuda", (0,))
    if cupy is None:
        raise RuntimeError(
            f"device={value!r} needs CuPy and a CUDA GPU: {reason}. Install the CUDA extra "
            "(pip install 'sklearn-gpulda[cuda13]', or [cuda12] for a CUDA 12 driver) or use "
            "device='cpu'"
        )
    indices = indices or (0,)
    count = cupy.cuda.runtime.getDeviceCount()
    missing = [i for i in indices if i >= count]
    if missing:
        raise RuntimeError(
            f"device={value!r} names GPU {missing[0]}, but this machine has {count} "
            f"(numbered 0 to {count - 1})"
        )
    return Device("cuda", indices)


def describe_device(device):
    """One human line for a device, e.g. ``'GPU 0: NVIDIA H200 (compute capability 9.0, 139.8
    GiB)'``."""
    if isinstance(device, str):
        kind, indices = parse_device(device)
        device = CPU if kind == "cpu" else Device("cuda", indices or (0,))
    if device.kind == "cpu":
        return "CPU (NumPy engine)"
    cupy, reason = import_cupy()
    if cupy is None:
        return f"{device} (not usable here: {reason})"
    lines = []
    for index in device.indices:
        props = cupy.cuda.runtime.getDeviceProperties(index)
        name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
        lines.append(
            f"GPU {index}: {name} (compute capability {props['major']}.{props['minor']}, "
            f"{props['totalGlobalMem'] / 2**30:.1f} GiB)"
        )
    return "; ".join(lines)


def free_device_bytes(cupy):
    """Bytes a new allocation on the current GPU can use: the driver's free memory plus what
    CuPy's pool holds unused. Returns ``(free, total)``."""
    free, total = cupy.cuda.runtime.memGetInfo()
    return free + cupy.get_default_memory_pool().free_bytes(), total


def is_device_array(x):
    """True for CuPy arrays and cupyx sparse matrices."""
    return type(x).__module__.startswith("cupy")


def array_module(x):
    """CuPy for a device array, NumPy for anything else."""
    if is_device_array(x):
        import cupy

        return cupy
    return np


def to_host(x):
    """Host twin of a device array (NumPy or SciPy sparse); anything else unchanged."""
    return x.get() if is_device_array(x) else x


def to_device(cupy, x, dtype=None):
    """A CuPy copy of a host array (or the array itself when already on the device)."""
    if is_device_array(x):
        return x if dtype is None else x.astype(dtype, copy=False)
    return cupy.asarray(np.asarray(x) if dtype is None else np.asarray(x, dtype=dtype))
