"""A default fit on a GPU compiles no kernel: every kernel it launches ships precompiled (our
fatbins, CuPy's Thrust and CUB routines), so a first fit costs what later fits cost.

CuPy writes each kernel it compiles (NVRTC) to its cache folder, ``CUPY_CACHE_DIR``; a fit in a
fresh process with an empty folder must leave it empty. With ``CUPY_CACHE_SAVE_CUDA_SOURCE=1``
CuPy also saves the source of each, whose ``__global__`` names say what was compiled.
"""

import json
import os
import re
import subprocess
import sys

import pytest

FIT = """
import json, sys
from sklearn_gpulda import GPULatentDirichletAllocation
from sklearn_gpulda.datasets import load_kjv_chapters

X = load_kjv_chapters().data
lda = GPULatentDirichletAllocation(n_components={k}, random_state=0, device="cuda",
                                   algorithm="{algorithm}").fit(X)
json.dump({"device": str(lda.device_), "n_iter": int(lda.n_iter_)}, sys.stdout)
"""


def _compiled_kernels(cache):
    """``__global__`` names in the CUDA sources CuPy saved under ``cache`` (file -> names)."""
    found = {}
    for root, _, files in os.walk(cache):
        for name in files:
            path = os.path.join(root, name)
            if not name.endswith(".cu"):
                found.setdefault(os.path.relpath(path, cache), [])
                continue
            with open(path, errors="replace") as f:
                source = f.read()
            found[os.path.relpath(path, cache)] = re.findall(
                r"__global__\s+(?:void\s+)?(?:__launch_bounds__\([^)]*\)\s+)?(?:void\s+)?(\w+)",
                source)
    return found


@pytest.mark.gpu
@pytest.mark.parametrize("algorithm, k", [
    ("sparse", 20), ("sparse", 200),  # alpha's histogram table on the host, then the device
    # The dense engine (what 'auto' takes for large corpora at small K): below 32 topics its
    # kernels draw from one remnant block, at 64 from two whole blocks of 32; at 200 alpha's
    # table stays on the device.
    ("dense", 20), ("dense", 64), ("dense", 200),
])
def test_default_fit_compiles_no_kernel(tmp_path, algorithm, k):
    cache = tmp_path / "cupy_cache"
    cache.mkdir()
    env = dict(os.environ, CUPY_CACHE_DIR=str(cache), CUPY_CACHE_SAVE_CUDA_SOURCE="1")
    env.pop("SKLEARN_GPULDA_NVRTC", None)  # the fatbins, as a user's install has them
    script = FIT.replace("{k}", str(k)).replace("{algorithm}", algorithm)
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    info = json.loads(done.stdout.strip().splitlines()[-1])
    assert info["device"].startswith("cuda"), info
    compiled = _compiled_kernels(cache)
    names = sorted(name for names in compiled.values() for name in names)
    assert not compiled, (
        f"a default fit compiled {len(compiled)} module(s) at run time (a stale fatbin compiles "
        f"its whole file: run tools/build_kernels.py); kernels: {names}; files: {sorted(compiled)}")
