"""Compiling user Triton code without a GPU: the offline Triton driver (mirai.gpu.offline) for a chosen
GPUTarget, launches turned into compilations, and torch's "cuda" device mapped to the CPU so ordinary
scripts run.

Written for the Triton releases of mirai.gpu.versions (`JITFunction.run(*args, grid, warmup,
**kwargs)`, `driver.set_active`); `check_triton_version` says so on any other version.

    with gpuless_triton(parse_target("cuda:90")) as kernels:
        run_user_code(code, workdir)     # kernel[grid](...) compiles, nothing runs
    kernels[0].asm["ptx"]
"""

from __future__ import annotations

import contextlib

from mirai.explorer.errors import ExplorerError


def check_triton_version() -> None:
    from mirai.errors import VersionError
    from mirai.gpu import versions

    try:
        versions.check_triton()
    except VersionError as err:
        raise ExplorerError(
            "this Triton is not supported by the GPU-less Triton compilation", str(err)
        )


def parse_target(spec: str):
    """A request's Triton target in any spelling of mirai.gpu.targets ('cuda:90', 'sm_80',
    'hip:gfx942', optionally ':<warp size>') -> GPUTarget."""
    from mirai.errors import MiraiError
    from mirai.gpu.targets import compile_target

    try:
        return compile_target(spec)
    except MiraiError as err:
        raise ExplorerError(f"bad triton_target {spec!r}", str(err)) from None


def _is_gpu(device) -> bool:
    import torch

    if isinstance(device, torch.device):
        return device.type in ("cuda", "hip")
    return isinstance(device, str) and device.split(":")[0] in ("cuda", "hip")


def _cpu_mode():
    import torch
    from torch.overrides import TorchFunctionMode

    class GpuToCpu(TorchFunctionMode):
        """Tensors asked for on 'cuda' are made on the CPU (only their dtype and shape matter here)."""

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            if func is torch.Tensor.cuda:
                return args[0]
            if _is_gpu(kwargs.get("device")):
                kwargs["device"] = "cpu"
            if func is torch.Tensor.to:
                args = tuple("cpu" if _is_gpu(a) else a for a in args)
            return func(*args, **kwargs)

    return GpuToCpu()


@contextlib.contextmanager
def gpuless_triton(target):
    """Within: Triton launches compile for `target` and are recorded (in order) in the yielded list."""
    import torch
    from triton.runtime.jit import JITFunction

    from mirai.gpu.offline import offline_triton

    check_triton_version()
    compiled: list = []
    original_run = JITFunction.run

    def compile_only(self, *args, grid, warmup, **kwargs):
        kernel = original_run(self, *args, grid=grid, warmup=True, **kwargs)
        if kernel is not None and all(kernel is not k for k in compiled):
            compiled.append(kernel)
        return kernel

    patches = {
        (JITFunction, "run"): compile_only,
        (torch.cuda, "synchronize"): lambda *a, **k: None,
        (torch.cuda, "set_device"): lambda *a, **k: None,
        (torch.cuda, "current_device"): lambda: 0,
    }
    saved = {key: getattr(*key) for key in patches}
    for (owner, name), value in patches.items():
        setattr(owner, name, value)
    try:
        # user tensors stay on the CPU; an autotuned kernel compiles its first configuration
        with offline_triton(target, torch_device="cpu", benchmark="tie"), _cpu_mode():
            yield compiled
    finally:
        for (owner, name), value in saved.items():
            setattr(owner, name, value)
