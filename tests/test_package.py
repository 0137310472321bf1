"""The package as installed: imports anywhere, ships what it needs."""

import subprocess
import sys
from pathlib import Path

import sklearn_gpulda


def test_import_does_not_import_cupy():
    # Machines without CuPy or a GPU must import the package; CuPy loads only for a GPU fit.
    code = "import sys, sklearn_gpulda; print('cupy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_bundled_corpus_and_kernel_sources_are_present():
    pkg = Path(sklearn_gpulda.__file__).parent
    assert (pkg / "data" / "kjv" / "docword.kjv_chapters.txt.gz").is_file()
    from sklearn_gpulda.backends.cuda.kernels import source_dir

    sources = {p.name for p in source_dir().glob("*.cu")}
    assert {"sample_sparse.cu", "counts.cu", "infer.cu", "sample_dense.cu"} <= sources
