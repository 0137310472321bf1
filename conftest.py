"""Collection rules for the doctests under ``sklearn_gpulda`` (``--doctest-modules``).

``sklearn_gpulda.dask`` needs the optional ``dask`` extra; where it is not installed its modules
are not collected, as ``tests/test_dask.py`` skips itself.
"""

import importlib.util

collect_ignore_glob = []
if importlib.util.find_spec("distributed") is None:
    collect_ignore_glob.append("sklearn_gpulda/dask/*")
