"""What every command shares: user errors, argument types, devices, model files."""

import argparse
import os
import re
from pathlib import Path


class CommandError(Exception):
    """A problem with the user's input, reported as one line on stderr (exit status 2)."""


def one_line(exc):
    """An exception's message on one line, for errors that quote a library's message."""
    return " ".join(str(exc).split()) or type(exc).__name__


# --------------------------------------------------------------------------- argument types

def non_negative_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {value}")
    return value


def positive_int(text):
    value = non_negative_int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


# The one place the command line decides what a device string is. It accepts exactly what the
# estimator's ``device`` parameter accepts, case included ('CUDA' is rejected by both), so a
# command never fails later, inside fit, on a value it let through. To be replaced by the
# estimator's own parser once the package has one (sklearn_gpulda/_device.py).
_DEVICE = re.compile(r"auto|cpu|cuda|cuda:[0-9]+")


def parse_device(text):
    """``text`` if it is a valid ``device`` (auto, cpu, cuda, cuda:N), else a usage error."""
    if _DEVICE.fullmatch(text):
        return text
    raise argparse.ArgumentTypeError(
        f"expected auto, cpu, cuda or cuda:N (lower case), got {text!r}")


def resolve_device(device):
    """The device a fit will use (``'cpu'`` or ``'cuda:N'``), asked before the data is loaded."""
    from sklearn_gpulda._engines import resolve_device as resolve

    try:
        return resolve(device)
    except RuntimeError as exc:  # a GPU was asked for and none is usable
        raise CommandError(str(exc)) from None


def describe_device(device):
    """One human line for a fitted ``device_`` string such as ``'cpu'`` or ``'cuda:0'``."""
    if device.startswith("cuda"):
        index = int(device.partition(":")[2] or 0)
        try:
            import cupy

            props = cupy.cuda.runtime.getDeviceProperties(index)
            name = props["name"]
            name = name.decode() if isinstance(name, bytes) else name
            memory = props["totalGlobalMem"] / 2**30
            return (f"CUDA engine on GPU {index}: {name} (compute capability "
                    f"{props['major']}.{props['minor']}, {memory:.0f} GiB)")
        except Exception:  # the description is cosmetic; never fail a finished fit over it
            return f"CUDA engine on GPU {index}"
    return f"NumPy reference engine on the CPU ({os.cpu_count() or '?'} logical cores)"


# --------------------------------------------------------------------------- files

def check_output_path(path, option):
    """Fail now, not after a long fit, if ``path`` cannot be written as a file."""
    if path.is_dir():
        raise CommandError(f"{option} {path} is a directory; name a file, such as "
                           f"{path / 'model.joblib'}")
    existing = path.parent
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise CommandError(f"{option} {path}: cannot create a folder inside {existing}, "
                           "which is a file")
    target = path if path.exists() else existing
    if not os.access(target, os.W_OK):
        raise CommandError(f"{option} {path}: no permission to write to {target}")


def write_file(path, write, option):
    """Create ``path``'s folders and call ``write(path)``, turning OS errors into one line."""
    try:
        if path.parent != Path(""):
            path.parent.mkdir(parents=True, exist_ok=True)
        write(path)
    except OSError as exc:
        raise CommandError(f"cannot write {option} {path}: {one_line(exc)}") from None


def load_model(path):
    """The object saved in ``path`` by joblib, checked to be a fitted topic model."""
    if not path.is_file():
        raise CommandError(f"model file not found: {path}")
    import joblib

    try:
        saved = joblib.load(path)
    # Unpickling a file that is not a joblib file can fail in many ways (UnpicklingError,
    # KeyError, EOFError, ModuleNotFoundError, ...); every one of them means the same to a user.
    except Exception as exc:
        raise CommandError(f"cannot load {path} with joblib ({type(exc).__name__}: "
                           f"{one_line(exc)})") from None
    final = saved.steps[-1][1] if hasattr(saved, "steps") else saved
    if not hasattr(final, "components_"):
        raise CommandError(f"{path} holds a {type(saved).__name__}, not a fitted topic model "
                           "(nothing with components_)")
    return saved


def describe_saved(saved):
    """``'Pipeline(CountVectorizer, GPULatentDirichletAllocation)'`` or the class name."""
    if hasattr(saved, "steps"):
        return f"Pipeline({', '.join(type(step).__name__ for _, step in saved.steps)})"
    return type(saved).__name__
