"""GPU check of the explorer's GPU-less Triton compilation: the PTX that `triton_nvptx` answers for
sm_90 (compiled here, without a GPU) is loaded and launched on a real Hopper GPU and its results
compared with NumPy.

    python tests/explorer/gpu_check_triton.py prepare gpu-check/     # CPU machine, mirai's venv
    python3 tests/explorer/gpu_check_triton.py run gpu-check/        # GPU machine (CuPy)

`prepare` writes, per kernel, the PTX and the launch facts (name, warps, shared memory, arguments);
`run` needs only CuPy and NumPy. Exit status 1 if a result is wrong.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# name -> (user code, how `run` builds the arguments and the expected result)
KERNELS = {
    "add": """
import torch, triton, triton.language as tl

@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)

x = torch.randn(5000, device="cuda")
add_kernel[(triton.cdiv(5000, 1024),)](x, x, torch.empty_like(x), 5000, BLOCK=1024)
""",
    "softmax": """
import torch, triton, triton.language as tl

@triton.autotune(configs=[triton.Config({}, num_warps=4), triton.Config({}, num_warps=8)], key=["n_cols"])
@triton.jit
def softmax_kernel(out_ptr, in_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(in_ptr + row * n_cols + cols, mask=cols < n_cols, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * n_cols + cols, num / tl.sum(num, axis=0), mask=cols < n_cols)

x = torch.randn(64, 1000, device="cuda")
softmax_kernel[(64,)](torch.empty_like(x), x, 1000, BLOCK=1024)
""",
}


def prepare(out_dir: Path) -> None:
    sys.path.insert(0, str(ROOT))
    from mirai.explorer.irtypes import Context
    from mirai.explorer.irtypes.triton import compile_kernels

    out_dir.mkdir(parents=True, exist_ok=True)
    for name, code in KERNELS.items():
        with tempfile.TemporaryDirectory() as work:
            ctx = Context(request={"code": code}, workdir=Path(work))
            ctx.triton_cache_dir = Path(work) / "triton"
            (kernel,), _ = compile_kernels(ctx, "cuda:90")
        (out_dir / f"{name}.ptx").write_text(kernel.asm["ptx"])
        facts = {
            "entry": kernel.name,
            "num_warps": kernel.metadata.num_warps,
            "shared": kernel.metadata.shared,
            "target": kernel.metadata.target.arch,
        }
        (out_dir / f"{name}.json").write_text(json.dumps(facts))
        print(f"prepared {name}: {facts}")


def run(in_dir: Path) -> int:
    import cupy as cp
    import numpy as np

    failures = 0
    rng = np.random.default_rng(0)
    for name in KERNELS:
        facts = json.loads((in_dir / f"{name}.json").read_text())
        module = cp.RawModule(path=str(in_dir / f"{name}.ptx"))
        kernel = module.get_function(facts["entry"])
        block = (32 * facts["num_warps"],)
        scratch = (np.uint64(0), np.uint64(0))  # Triton's hidden global/profile scratch pointers
        if name == "add":
            x = cp.asarray(rng.standard_normal(5000, dtype=np.float32))
            y = cp.asarray(rng.standard_normal(5000, dtype=np.float32))
            out = cp.empty_like(x)
            args = (x, y, out, np.int32(5000), *scratch)
            kernel((5,), block, args, shared_mem=facts["shared"])
            expected = cp.asnumpy(x) + cp.asnumpy(y)
        else:
            x = cp.asarray(rng.standard_normal((64, 1000), dtype=np.float32))
            out = cp.empty_like(x)
            kernel((64,), block, (out, x, np.int32(1000), *scratch), shared_mem=facts["shared"])
            host = cp.asnumpy(x).astype(np.float64)
            e = np.exp(host - host.max(axis=1, keepdims=True))
            expected = e / e.sum(axis=1, keepdims=True)
        cp.cuda.Device().synchronize()
        error = float(np.abs(cp.asnumpy(out) - expected).max())
        ok = error < 1e-5
        failures += not ok
        print(f"{name}: {facts} max abs error {error:.2e} {'ok' if ok else 'WRONG'}")
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("prepare", "run"):
        raise SystemExit(__doc__)
    if sys.argv[1] == "prepare":
        prepare(Path(sys.argv[2]))
        sys.exit(0)
    sys.exit(run(Path(sys.argv[2])))
