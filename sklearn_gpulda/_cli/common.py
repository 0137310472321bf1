"""What every command shares: user errors, argument types, devices, model files."""

import argparse
import os


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


def n_jobs(text):
    """A thread count as scikit-learn reads ``n_jobs``: a positive number, or -1 for every core
    (-2 all but one, and so on); 0 is an error."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value == 0:
        raise argparse.ArgumentTypeError("must not be 0 (use -1 for every core)")
    return value


def parse_device(text):
    """``text`` if it is a valid ``device``, else a usage error.

    The estimator's own parser decides (``sklearn_gpulda._runtime.device.parse_device``), so the
    command
    line accepts exactly what the ``device`` parameter accepts, case included ('CUDA' is refused
    by both), and a command never fails later, inside fit, on a value it let through.
    """
    from sklearn_gpulda._runtime.device import parse_device as parse

    try:
        parse(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected auto, cpu, cuda or cuda:N (lower case), got {text!r}") from None
    return text


def resolve_device(device):
    """The device a fit will use (``'cpu'`` or ``'cuda:N'``), asked before the data is loaded."""
    from sklearn_gpulda._runtime import device as _device

    try:
        return str(_device.resolve_device(device))
    except RuntimeError as exc:  # a GPU was asked for and none is usable
        raise CommandError(str(exc)) from None


def describe_device(device):
    """One human line for a fitted ``device_`` string such as ``'cpu'`` or ``'cuda:0'``."""
    from sklearn_gpulda._runtime import device as _device

    kind, indices = _device.parse_device(device)
    if kind == "cpu":
        return f"NumPy reference engine on the CPU ({os.cpu_count() or '?'} logical cores)"
    cupy, _ = _device.import_cupy()
    if cupy is None:  # the description is cosmetic; never fail a finished fit over it
        return "CUDA engine on " + ", ".join(f"GPU {i}" for i in indices or (0,))
    return "CUDA engine on " + _device.describe_device(device)


# --------------------------------------------------------------------------- files

def check_input_file(path, what):
    """Fail with one line unless ``path`` is a file to read; ``what`` names it ('input file')."""
    if path.is_file():
        return
    if path.is_dir():
        raise CommandError(f"{what} {path} is a directory; name a file inside it")
    if path.exists():  # a FIFO or a device: the commands read their input more than once
        raise CommandError(f"{what} {path} is not a regular file")
    raise CommandError(f"{what} not found: {path}")


def check_output_path(path, option):
    """Fail now, not after a long fit, if ``path`` cannot be written as a file.

    The folder must exist already: creating it would turn a typing mistake in a folder name into
    a model saved somewhere the user does not look.
    """
    if path.is_dir():
        raise CommandError(f"{option} {path} is a directory; name a file, such as "
                           f"{path / 'model.joblib'}")
    folder = path.parent
    if not folder.exists():
        raise CommandError(f"output folder does not exist: {folder} ({option} {path}); "
                           "create it first")
    if not folder.is_dir():
        raise CommandError(f"{option} {path}: cannot write inside {folder}, which is a file")
    target = path if path.exists() else folder
    if not os.access(target, os.W_OK):
        raise CommandError(f"{option} {path}: no permission to write to {target}")


def write_file(path, write, option):
    """Call ``write(path)``, turning OS errors into one line (the folder is not created)."""
    try:
        write(path)
    except OSError as exc:
        raise CommandError(f"cannot write {option} {path}: {one_line(exc)}") from None


def load_model(path):
    """The object saved in ``path`` by joblib, checked to be a fitted topic model."""
    check_input_file(path, "model file")
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
