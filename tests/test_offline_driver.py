"""The one offline Triton driver (mirai.gpu.offline): what it reports, its benchmarking policies, and
that the previous driver is always back after the block."""

from __future__ import annotations

import pytest
from triton.backends.compiler import GPUTarget
from triton.runtime.driver import driver

from mirai.gpu.offline import BenchmarkRefused, offline_triton


def test_reports_the_target_and_restores_the_previous_driver():
    before = driver._active
    with offline_triton(GPUTarget("hip", "gfx942", 64)):
        assert driver.active.get_current_target() == GPUTarget("hip", "gfx942", 64)
        with offline_triton(GPUTarget("cuda", 80, 32)):
            assert driver.active.get_current_target().arch == 80
            assert driver.active.get_device_capability() == (8, 0)
        assert driver.active.get_current_target().arch == "gfx942"
    assert driver._active is before


def test_restores_after_an_error_inside():
    from torch._inductor.runtime import triton_helpers

    before, switch = driver._active, triton_helpers.set_driver_to_gpu
    with pytest.raises(RuntimeError, match="inside"):
        with offline_triton(GPUTarget("cuda", 90, 32)):
            triton_helpers.set_driver_to_gpu()  # a kernel module's import: no effect here
            assert driver.active.get_current_target().arch == 90
            raise RuntimeError("inside")
    assert driver._active is before and triton_helpers.set_driver_to_gpu is switch


def test_benchmarking_policies():
    with offline_triton(GPUTarget("cuda", 90, 32), benchmark="refuse"):
        with pytest.raises(BenchmarkRefused, match="needs a GPU"):
            driver.active.get_benchmarker()
    with offline_triton(GPUTarget("cuda", 90, 32), benchmark="tie", torch_device="cpu"):
        bench = driver.active.get_benchmarker()
        assert bench(lambda: None, quantiles=[0.5, 0.2]) == [0.0, 0.0]
        assert driver.active.get_active_torch_device().type == "cpu"
