"""``sklearn_gpulda._runtime.device``: the one parse of ``device``, and its resolution on this
machine."""

import types

import numpy as np
import pytest

import sklearn_gpulda._runtime.device as device_module
from sklearn_gpulda._runtime.device import (
    CPU,
    Device,
    describe_device,
    parse_device,
    resolve_device,
)


@pytest.mark.parametrize("text, parsed", [
    ("auto", ("auto", None)), ("cpu", ("cpu", None)), ("cuda", ("cuda", None)),
    ("cuda:0", ("cuda", (0,))), ("cuda:3", ("cuda", (3,))), ("cuda:0,1", ("cuda", (0, 1))),
])
def test_parse_accepts(text, parsed):
    assert parse_device(text) == parsed


@pytest.mark.parametrize("text", ["CUDA", "Cpu", "gpu", "cuda:", "cuda:x", "cuda:-1", "cuda:0,0",
                                  " cpu", "cuda:²", "tpu:0", "cuda:0,"])
def test_parse_refuses(text):
    with pytest.raises(ValueError, match="device must be 'auto', 'cpu', 'cuda'"):
        parse_device(text)


@pytest.mark.parametrize("value, parsed", [
    ([0, 1], ("cuda", (0, 1))), ((2,), ("cuda", (2,))), (["cuda:1", "cuda:0"], ("cuda", (1, 0))),
    ([np.int64(3), "cuda:0"], ("cuda", (3, 0))),
])
def test_parse_accepts_a_list_of_gpus(value, parsed):
    assert parse_device(value) == parsed


@pytest.mark.parametrize("value, message", [
    ([0, 0], "distinct GPU numbers"), ([-1], "GPU ordinals or 'cuda:N'"),
    ([True], "GPU ordinals or 'cuda:N'"), (["cpu"], "GPU ordinals or 'cuda:N'"),
    (["cuda:0,1"], "GPU ordinals or 'cuda:N'"), ([], "a string or a list of GPUs"),
    (["cuda:x"], "device must be"), (0, "a string or a list of GPUs"),
])
def test_parse_refuses_bad_lists(value, message):
    with pytest.raises(ValueError, match=message):
        parse_device(value)


def test_lead_is_the_first_gpu():
    assert Device("cuda", (2, 0)).lead == Device("cuda", (2,))
    assert CPU.lead == CPU


def _fake_cupy(n_gpus):
    runtime = types.SimpleNamespace(getDeviceCount=lambda: n_gpus)
    return types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=runtime))


def test_resolve_without_cupy(monkeypatch):
    monkeypatch.setattr(device_module, "import_cupy",
                        lambda: (None, "CuPy does not import (ImportError: libcudart.so.13)"))
    assert resolve_device("auto") == CPU and resolve_device("cpu") == CPU
    with pytest.raises(RuntimeError, match=r"needs CuPy and a CUDA GPU: CuPy does not import "
                                           r"\(ImportError: libcudart.so.13\)"):
        resolve_device("cuda:0")


def test_resolve_checks_the_gpu_number(monkeypatch):
    monkeypatch.setattr(device_module, "import_cupy", lambda: (_fake_cupy(2), ""))
    assert resolve_device("auto") == Device("cuda", (0,))
    assert str(resolve_device("cuda")) == "cuda:0"
    assert resolve_device("cuda:1").index == 1
    assert str(resolve_device("cuda:0,1")) == "cuda:0,1"
    with pytest.raises(RuntimeError,
                       match=r"names GPU 2, but this machine has 2 \(numbered 0 to 1\)"):
        resolve_device("cuda:2")


def test_import_reason_names_the_exception(monkeypatch):
    import builtins

    real = builtins.__import__

    def broken(name, *args, **kwargs):
        if name == "cupy":
            raise ImportError("libnvrtc.so.13: cannot open shared object file")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", broken)
    cupy, reason = device_module.import_cupy()
    assert cupy is None and "libnvrtc.so.13" in reason and "ImportError" in reason


def test_describe_without_a_gpu(monkeypatch):
    monkeypatch.setattr(device_module, "import_cupy", lambda: (None, "no GPU here"))
    assert describe_device("cpu") == "CPU (NumPy engine)"
    assert describe_device("cuda:1") == "cuda:1 (not usable here: no GPU here)"


def test_single_gpu_index():
    assert Device("cuda", (3,)).index == 3
    with pytest.raises(ValueError, match="not a single GPU"):
        Device("cuda", (0, 1)).index
    with pytest.raises(ValueError, match="not a single GPU"):
        CPU.index


def test_parse_bytes_units_and_errors():
    from sklearn_gpulda._runtime.device import parse_bytes

    assert parse_bytes(None) is None and parse_bytes(123) == 123
    assert parse_bytes("8GB") == 8 * 10**9 and parse_bytes("512MiB") == 512 * 2**20
    assert parse_bytes(" 1.5 gib ") == 3 * 2**29 and parse_bytes("100") == 100
    for bad in ("", "GB", "8XB", "-1GB", "0MB", "8 G B"):
        with pytest.raises(ValueError, match="max_device_memory must be"):
            parse_bytes(bad)


def test_estimator_rejects_a_bad_memory_budget():
    from sklearn_gpulda import GPULatentDirichletAllocation

    X = np.ones((4, 3))
    with pytest.raises(ValueError, match="max_device_memory must be"):
        GPULatentDirichletAllocation(max_device_memory="lots", device="cpu").fit(X)


def test_counts_go_up_reads_every_sparse_format(monkeypatch):
    # A batch fit on several GPUs keeps the whole count matrix on the first unless it may need
    # streaming; the size check must work for every SciPy format (check_estimator feeds them
    # all). One GPU keeps host counts on the host (no CuPy kernel compiled to check them).
    import contextlib

    import scipy.sparse as sp

    from sklearn_gpulda._input.validation import counts_go_up

    asked = []
    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(
        Device=lambda index: asked.append(index) or contextlib.nullcontext()))
    monkeypatch.setattr(device_module, "import_cupy", lambda: (fake, ""))
    free = {"bytes": 10**9}
    monkeypatch.setattr(device_module, "free_device_bytes", lambda cp: (free["bytes"], 2 * 10**9))
    X = sp.random(50, 40, density=0.2, format="csr", random_state=0)
    gpu = Device("cuda", (0,))
    gpus = Device("cuda", (0, 1))
    for fmt in ("csr", "csc", "coo", "bsr", "lil", "dok", "dia"):
        assert counts_go_up(X.asformat(fmt), gpus, None) is True, fmt
        assert counts_go_up(X.asformat(fmt), gpu, None) is False, fmt
    assert counts_go_up(X.toarray(), gpus, None) is True
    # Several GPUs: the counts go to the first one named, if they fit there.
    asked.clear()
    assert counts_go_up(X, Device("cuda", (3, 1)), None) is True
    assert asked == [3]
    free["bytes"] = 8 * X.nnz  # an eighth of it is less than the counts: keep them on the host
    assert counts_go_up(X, Device("cuda", (3, 1)), None) is False
    assert counts_go_up(X, gpus, 10**9) is False  # a budget: they may have to be streamed
    assert counts_go_up(X, CPU, None) is False


def test_counts_kept_on_the_host_for_a_gpu_fit_keep_their_integers():
    # A batch GPU fit whose counts stay on the host (to be streamed) checks them without making
    # integers float64: the same checks and messages, no copy of the values.
    import scipy.sparse as sp

    from sklearn_gpulda import GPULatentDirichletAllocation
    from sklearn_gpulda._input.validation import check_counts

    X = sp.random(30, 12, density=0.3, format="csr", random_state=0, dtype=np.float64)
    X.data = np.ceil(X.data * 5)
    lda = GPULatentDirichletAllocation()
    whom = "GPULatentDirichletAllocation.fit"
    for data in (X.astype(np.int64), X.astype(np.int32).tocoo(), X.astype(np.int64).toarray()):
        got = check_counts(lda, data, reset=True, whom=whom, device=CPU, keep_integers=True)
        assert got.dtype.kind == "i" and lda.n_features_in_ == 12
        np.testing.assert_array_equal(sp.csr_matrix(got).toarray(), X.toarray())
    for data in (X, X.astype(np.float32)):  # floats as scikit-learn has them
        assert check_counts(lda, data, reset=True, whom=whom, device=CPU,
                            keep_integers=True).dtype == data.dtype
    negative = X.astype(np.int64)
    negative.data[0] = -1
    with pytest.raises(ValueError, match="Negative values in data passed to " + whom):
        check_counts(lda, negative, reset=True, whom=whom, device=CPU, keep_integers=True)
    nan = X.copy()
    nan.data[0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        check_counts(lda, nan, reset=True, whom=whom, device=CPU, keep_integers=True)
    with pytest.raises(ValueError, match="X has 11 features"):
        check_counts(lda, X[:, :11].astype(np.int64), reset=False, whom=whom, device=CPU,
                     keep_integers=True)
