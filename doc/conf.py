"""Sphinx configuration for sklearn-gpulda.

Build with ``python3 -m pip install -e ".[doc]" && python3 -m sphinx -W doc doc/_build/html``.
Optional pieces switch themselves on when their package is installed: the example gallery
(sphinx-gallery, once ``examples/README.txt`` exists) and the Markdown pages such as
``algorithm.md`` (myst-parser). Without them the build still succeeds, minus those pages.

Links into the Python, NumPy, SciPy and scikit-learn documentation (intersphinx) need the network,
and an unreachable inventory is a warning, which ``-W`` turns into a failed build; CI builds
offline. Set ``SKLEARN_GPULDA_INTERSPHINX=1`` to switch them on where the network is reachable.
"""

import importlib.util
import os
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parent
ROOT = DOC.parent
# Document this checkout even when another version of the package is installed.
sys.path.insert(0, str(ROOT))

import sklearn_gpulda  # noqa: E402

project = "sklearn-gpulda"
author = "sklearn-gpulda developers"
copyright = "sklearn-gpulda developers"
release = sklearn_gpulda.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.intersphinx",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
]

autosummary_generate = True
autodoc_default_options = {"members": True}
# numpydoc already lists a class's methods from its docstring sections; autosummary's own member
# tables would repeat them.
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False

if os.environ.get("SKLEARN_GPULDA_INTERSPHINX") == "1":
    intersphinx_mapping = {
        "python": ("https://docs.python.org/3", None),
        "numpy": ("https://numpy.org/doc/stable", None),
        "scipy": ("https://docs.scipy.org/doc/scipy", None),
        "sklearn": ("https://scikit-learn.org/stable", None),
    }
else:
    extensions.remove("sphinx.ext.intersphinx")

exclude_patterns = ["_build", "generated/*.examples", "auto_examples/*.ipynb",
                    "auto_examples/*.py", "auto_examples/*.zip"]
# Pages index.rst links only when they can be built here (see setup() below).
optional_pages = []
# performance.md, the measurements page, is not a page of its own: performance.rst
# (same name) includes it when myst-parser is here and the file exists.
include_performance_md = False

source_suffix = {".rst": "restructuredtext"}
if importlib.util.find_spec("myst_parser") is not None:
    extensions.append("myst_parser")
    source_suffix[".md"] = "markdown"
    myst_enable_extensions = ["dollarmath"]
    optional_pages += [p.stem for p in sorted(DOC.glob("*.md")) if p.stem != "performance"]
    include_performance_md = (DOC / "performance.md").is_file()
    exclude_patterns.append("performance.md")
else:
    exclude_patterns.append("*.md")

if importlib.util.find_spec("sphinx_gallery") is not None and any(
    (ROOT / "examples" / name).is_file() for name in ("README.txt", "README.rst")
):
    extensions.append("sphinx_gallery.gen_gallery")
    sphinx_gallery_conf = {
        "examples_dirs": str(ROOT / "examples"),
        "gallery_dirs": str(DOC / "auto_examples"),
        # Examples run at build time; only plot_*.py ones, so helpers in examples/ are left alone.
        "filename_pattern": r"/plot_",
        "download_all_examples": False,
        # The timing page would be written into doc/ itself, beside the sources.
        "write_computation_times": False,
    }
    optional_pages.append("auto_examples/index")

html_theme = "alabaster"
html_title = f"sklearn-gpulda {release}"
templates_path = []
html_static_path = []


def _fill_optional_pages(app, docname, source):
    if docname == "index":
        entries = "\n".join(f"   {page}" for page in optional_pages)
        source[0] = source[0].replace("   OPTIONAL_PAGES", entries)
    elif docname == "performance":
        if include_performance_md:
            block = ".. include:: performance.md\n   :parser: myst_parser.sphinx_\n"
        else:
            block = ("The engine's own measurements are kept in ``doc/performance.md`` in the "
                     "source tree; this build cannot show them (it needs myst-parser, or the "
                     "file is not there yet).\n")
        source[0] = source[0].replace("MEASURED_PAGES", block)


def _skip_metadata_requests(app, what, name, obj, skip, options):
    # scikit-learn adds set_fit_request (fit takes ``callback``) and its kin to every estimator
    # whose methods take metadata. Their docstrings are scikit-learn's, with references into
    # scikit-learn's own glossary that this build cannot resolve; scikit-learn documents them.
    if name.startswith("set_") and name.endswith("_request"):
        return True
    return skip


def setup(app):
    app.connect("source-read", _fill_optional_pages)
    app.connect("autodoc-skip-member", _skip_metadata_requests)
