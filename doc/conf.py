"""Sphinx configuration for sklearn-gpulda.

Build with ``python3 -m pip install -e ".[doc]" && python3 -m sphinx doc doc/_build/html``.
Optional pieces switch themselves on when their package is installed: the example gallery
(sphinx-gallery, once ``examples/README.txt`` exists) and the Markdown pages such as
``algorithm.md`` (myst-parser). Without them the build still succeeds, minus those pages.
"""

import importlib.util
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

intersphinx_mapping = {
    "python": ("https://docs.python.org/3", None),
    "numpy": ("https://numpy.org/doc/stable", None),
    "scipy": ("https://docs.scipy.org/doc/scipy", None),
    "sklearn": ("https://scikit-learn.org/stable", None),
}

exclude_patterns = ["_build", "generated/*.examples", "auto_examples/*.ipynb",
                    "auto_examples/*.py", "auto_examples/*.zip"]
# Pages index.rst links only when they can be built here (see setup() below).
optional_pages = []

source_suffix = {".rst": "restructuredtext"}
if importlib.util.find_spec("myst_parser") is not None:
    extensions.append("myst_parser")
    source_suffix[".md"] = "markdown"
    myst_enable_extensions = ["dollarmath"]
    optional_pages += [p.stem for p in sorted(DOC.glob("*.md"))]
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


def setup(app):
    app.connect("source-read", _fill_optional_pages)
