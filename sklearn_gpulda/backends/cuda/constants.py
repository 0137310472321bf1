"""The numbers of ``cuda/constants.cuh``, read from the header so each is written once.

The header's lines ``constexpr int kName = <decimal>;`` are parsed at import; the header ships
with the package (``cuda_src/``) for the NVRTC fallback, so it is there wherever the kernels are.
The comments of the header say what each number is.
"""

import re

from .kernels import source_dir

_CONSTANT = re.compile(r"^\s*constexpr\s+int\s+(k\w+)\s*=\s*(\d+)\s*;", re.MULTILINE)


def read_constants(path=None):
    """``{name: value}`` of every integer constant of ``constants.cuh``."""
    text = (path or source_dir() / "constants.cuh").read_text()
    found = {name: int(value) for name, value in _CONSTANT.findall(text)}
    if not found:
        raise RuntimeError(f"no constants found in {path or source_dir() / 'constants.cuh'}")
    return found


_VALUES = read_constants()

WARP = _VALUES["kWarp"]
ROW_PAD = _VALUES["kRowPad"]
MAX_TOPICS = _VALUES["kMaxTopics"]
SHARED_MAX_TOPICS = _VALUES["kSharedMaxTopics"]
SAMPLE_BLOCK = _VALUES["kSampleBlock"]
SAMPLE_BLOCK_MAX = _VALUES["kSampleBlockMax"]
COUNT_BLOCK = _VALUES["kCountBlock"]
SHORT_DOC_MAX = _VALUES["kShortDocMax"]
HIST_MAX_TOPICS = _VALUES["kHistMaxTopics"]
LONG_HIST_WINDOW = _VALUES["kLongHistWindow"]
INFER_BLOCK = _VALUES["kInferBlock"]
DENSE_MAX_TOPICS = _VALUES["kDenseMaxTopics"]
DENSE_BLOCK = _VALUES["kDenseBlock"]
DENSE_BLOCK_MAX = _VALUES["kDenseBlockMax"]
DENSE_LOGLIK_BLOCK = _VALUES["kDenseLoglikBlock"]
DENSE_LOGLIK_TOKENS = _VALUES["kDenseLoglikTokens"]
BATCH_BLOCK = _VALUES["kBatchBlock"]
MH_BLOCK = _VALUES["kMhBlock"]
MH_SHARED_TOTALS = _VALUES["kMhSharedTotals"]
