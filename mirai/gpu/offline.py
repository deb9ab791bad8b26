"""The one offline Triton driver: Triton compiles for a named GPU target in a process that has none.

Triton asks its active driver which target to compile for, which device and stream are current, and
(through Inductor's autotuner) how long a kernel takes. `OfflineDriver` answers the first questions
for a `GPUTarget` and never touches a GPU. Benchmarking has an explicit policy:

- "refuse" (export: GPU-less capture and compile): a timing request is an error, because a
  configuration chosen by a made-up time would be a wrong kernel; capture uses heuristics instead;
- "tie" (explorer): every configuration times 0, so an autotuned user kernel compiles its first one.

`offline_triton` makes such a driver active for a block, stops Inductor's kernel modules from
switching to the real (absent) GPU driver, and always restores both afterwards.

Written for the Triton releases of mirai.gpu.versions (`triton.backends.driver.GPUDriver`,
`triton.runtime.driver.set_active`).

    >>> from triton.backends.compiler import GPUTarget
    >>> with offline_triton(GPUTarget("cuda", 90, 32)):
    ...     from triton.runtime.driver import driver
    ...     driver.active.get_current_target().arch
    90
"""

from __future__ import annotations

import contextlib

from mirai.errors import MiraiError

BENCHMARK_POLICIES = ("refuse", "tie")


class BenchmarkRefused(MiraiError):
    """Something asked the offline driver to time a kernel under the "refuse" policy."""


def offline_driver(target, *, torch_device: str = "cuda", benchmark: str = "refuse"):
    """A Triton driver for `target` (a triton GPUTarget). `torch_device` is the device Triton is
    told tensors live on ("cuda" for Inductor's kernels, "cpu" where user tensors stay on the CPU).
    """
    import torch
    from triton.backends.driver import GPUDriver

    if benchmark not in BENCHMARK_POLICIES:
        raise MiraiError(f"benchmark policy {benchmark!r}: choose one of {BENCHMARK_POLICIES}")
    major, minor = (target.arch // 10, target.arch % 10) if isinstance(target.arch, int) else (0, 0)

    class OfflineDriver(GPUDriver):
        """Reports the target; launching or timing anything is not possible."""

        def __init__(self):  # GPUDriver's would import the CUDA runtime bindings
            self.get_device_capability = lambda device=None: (major, minor)
            self.get_current_stream = lambda device=None: 0
            self.get_current_device = lambda: 0
            self.set_current_device = lambda device: None

        def get_current_target(self):
            return target

        def get_active_torch_device(self):
            return torch.device(torch_device, 0) if torch_device != "cpu" else torch.device("cpu")

        def get_device_interface(self):
            return torch.cuda

        @staticmethod
        def is_active():
            return True

        def map_python_to_cpp_type(self, ty):
            from triton.backends.nvidia.driver import ty_to_cpp

            return ty_to_cpp(ty)

        def get_benchmarker(self):
            if benchmark == "tie":
                return lambda kernel_call, quantiles=None, **_: (
                    [0.0 for _ in quantiles] if quantiles else 0.0
                )
            raise BenchmarkRefused(
                "timing a kernel needs a GPU; offline (GPU-less) compilation picks configurations "
                "by heuristics"
            )

        def get_empty_cache_for_benchmark(self):
            if benchmark == "tie":
                return None
            raise BenchmarkRefused("timing a kernel needs a GPU")

        def clear_cache(self, cache):
            pass

    return OfflineDriver()


@contextlib.contextmanager
def offline_triton(target, *, torch_device: str = "cuda", benchmark: str = "refuse"):
    """Within: Triton compiles for `target` with an `offline_driver`; after: the previous driver and
    Inductor's driver switch are back, whatever happened inside."""
    from triton.runtime.driver import driver

    helpers = _inductor_helpers()
    previous_active = driver._active
    previous_switch = helpers.set_driver_to_gpu if helpers is not None else None
    driver.set_active(offline_driver(target, torch_device=torch_device, benchmark=benchmark))
    if helpers is not None:
        helpers.set_driver_to_gpu = lambda: None
    try:
        yield
    finally:
        if helpers is not None:
            helpers.set_driver_to_gpu = previous_switch
        driver._active = previous_active


def activate(target, *, torch_device: str = "cuda", benchmark: str = "refuse") -> None:
    """Make an offline driver active for the rest of the process (a GPU-less capture worker)."""
    from triton.runtime.driver import driver

    helpers = _inductor_helpers()
    if helpers is not None:
        helpers.set_driver_to_gpu = lambda: None
    driver.set_active(offline_driver(target, torch_device=torch_device, benchmark=benchmark))


def _inductor_helpers():
    """Inductor's triton_helpers: its kernel modules call set_driver_to_gpu() when imported."""
    try:
        from torch._inductor.runtime import triton_helpers
    except ImportError:  # pragma: no cover - torch without Inductor
        return None
    return triton_helpers
