"""What a worker runs once before it says it is ready, so the first request is as fast as the next:
a tiny model through torch.jit and Torch-MLIR, and a tiny Triton kernel compiled GPU-less.

(It lives in a file, not a string: Triton reads a kernel's source from its file.)
"""

from __future__ import annotations

import os
import tempfile

import triton
import triton.language as tl


@triton.jit
def _copy_kernel(src, dst, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offsets, tl.load(src + offsets, mask=offsets < n), mask=offsets < n)


def _tiny_model():
    import torch

    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(4, 4)

        def forward(self, x):
            return torch.relu(self.linear(x))

    return Tiny(), torch.randn(4, 4)


def _warm_torch_mlir() -> None:
    import torch
    from torch_mlir import fx

    model, example = _tiny_model()
    with torch.no_grad():
        torch.jit.trace(model, (example,))
    for output_type in ("torch", "linalg-on-tensors", "tosa", "stablehlo"):
        fx.export_and_import(model, example, output_type=output_type)


def _warm_triton() -> None:
    import torch

    from mirai.explorer.irtypes.triton_gpuless import gpuless_triton, parse_target

    saved = os.environ.get("TRITON_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="mirai-warmup-") as cache:
        os.environ["TRITON_CACHE_DIR"] = cache
        try:
            with gpuless_triton(parse_target("cuda:90")):
                x = torch.zeros(64)
                _copy_kernel[(1,)](x, x, 64, BLOCK=64)
        finally:
            if saved is None:
                os.environ.pop("TRITON_CACHE_DIR", None)
            else:
                os.environ["TRITON_CACHE_DIR"] = saved


WARMUPS = [_warm_torch_mlir, _warm_triton]


def warm_up(log) -> None:
    """Run every warm-up; a failing one is logged, never fatal (requests report their own errors)."""
    import warnings

    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    for step in WARMUPS:
        try:
            step()
        except Exception as err:  # noqa: BLE001 - a warm-up must never stop the worker
            log(f"warm-up {step.__name__} failed: {type(err).__name__}: {err}")
