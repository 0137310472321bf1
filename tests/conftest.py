"""Shared pytest set-up: tests marked ``gpu`` are skipped where no CUDA device can be used."""

import pytest


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU and CuPy (skipped without)")


def pytest_collection_modifyitems(config, items):
    gpu_items = [item for item in items if item.get_closest_marker("gpu") is not None]
    if not gpu_items:
        return
    from sklearn_gpulda._device import gpu_count

    if gpu_count() > 0:
        return
    skip = pytest.mark.skip(reason="no usable CUDA device (CuPy missing or no GPU)")
    for item in gpu_items:
        item.add_marker(skip)
