"""Shared pytest set-up: tests marked ``gpu`` are skipped where no CUDA device can be used."""

import pytest

from sklearn_gpulda.datasets import load_kjv_chapters, make_lda_corpus


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU and CuPy (skipped without)")


def pytest_collection_modifyitems(config, items):
    gpu_items = [item for item in items if item.get_closest_marker("gpu") is not None]
    if not gpu_items:
        return
    from sklearn_gpulda._runtime.device import gpu_count

    if gpu_count() > 0:
        return
    skip = pytest.mark.skip(reason="no usable CUDA device (CuPy missing or no GPU)")
    for item in gpu_items:
        item.add_marker(skip)


# Corpora the corpus and layout tests share.
@pytest.fixture(scope="module")
def kjv():
    return load_kjv_chapters().data


@pytest.fixture(scope="module")
def synthetic():
    return make_lda_corpus(n_docs=300, n_words=700, n_topics=8, doc_length=60,
                           random_state=3).data


@pytest.fixture(scope="module", params=["kjv", "synthetic"])
def counts(request):
    return request.getfixturevalue(request.param)
