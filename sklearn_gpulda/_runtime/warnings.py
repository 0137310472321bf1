"""Warnings that point at the user's line, however deep in the package they are raised."""

import os
import sys
import warnings

import sklearn

# Frames in these folders are ours or scikit-learn's wrappers around our methods (_fit_context,
# set_output); the warning belongs to the first frame outside them.
_INSIDE = tuple(
    os.path.dirname(os.path.abspath(module.__file__)) + os.sep
    for module in (sys.modules[__name__.split(".")[0]], sklearn)
)


def warn_caller(message, category=UserWarning):
    """``warnings.warn`` with the location of the caller of the public method."""
    # stacklevel 1 is this function, 2 its caller (the frame _getframe(1) returns), and so on.
    frame, level = sys._getframe(1), 2
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_INSIDE):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)
