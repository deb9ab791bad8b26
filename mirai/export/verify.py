"""Verify generated ops: run their launch code (forward and every gradient) against PyTorch eager.

The reference is the @mirai.op function itself in float64 (integer inputs unchanged), on the same
inputs and upstream gradients. Errors are relative by norm: ||got - ref|| / ||ref||.

On a GPU (`device="cuda"`) the launch code runs the compiled kernels. With `device="cpu"` it runs,
unchanged, against mirai's CPU stand-ins for the CUDA driver and cuBLASLt, which interpret each
launched kernel's Triton source and compute each GEMM in IEEE fp32 (mirai.export.hostdriver). The
tolerance follows what the kernels compute where they run (`tolerance`). Where GEMMs run in TF32 on
the GPU, the error also depends on the function: a ReLU's mask flips wherever TF32 moves a value
across zero, which a float64 reference does not see. So each tensor's tolerance there is at least
PEER_FACTOR times the error of PyTorch itself computing the function in float32 with TF32 matmuls
on the same GPU, on the same inputs (`peer_errors`; the matmuls' operands cut to TF32 as a TF32
kernel reads them, mirai.gpu.tf32).

    >>> rows = verify(pffn, sample_inputs, "generated", batches=[64, 2000])  # doctest: +SKIP
    >>> rows = verify(pffn, sample_inputs, "generated", batches=[3, 17], device="cpu")  # doctest: +SKIP
"""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass
from pathlib import Path

from mirai.errors import MiraiError


def matmul_kinds(manifest: dict, target: str | None = None) -> set[str]:
    """What the matmuls of the build compute on `target` (default: every target): the `dots` that
    compile recorded from each kernel's TTIR ("ieee", "tf32", "fp16", ...), and those of its
    library GEMMs (the same on every target)."""
    kinds = set()
    for op in manifest["ops"].values():
        for variant in op["variants"]:
            for gemm in variant["gemms"]:
                kinds.update(gemm["dots"])
        for kernel in op["kernels"].values():
            for name, binary in kernel["binaries"].items():
                if target is None or name == target:
                    kinds.update(binary.get("dots", ()))
    return kinds


def tolerance(manifest: dict, device: str = "cuda") -> float:
    """The tolerance of a build's results on `device`, from its precision mode and what its
    matmuls compute (mirai.gpu.precision.tolerance; "cpu" is Triton's interpreter)."""
    from mirai.gpu import precision

    return precision.tolerance(manifest["precision"], matmul_kinds(manifest), device == "cpu")


# How far a TF32 build's error may exceed PyTorch's own TF32 error on the same function and inputs:
# both cut the same operands to TF32 (mirai.gpu.tf32), but accumulate in other orders.
PEER_FACTOR = 3.0


@dataclass
class Row:
    batch: int
    name: str  # "output0", "grad x", ...
    error: float
    tolerance: float

    @property
    def ok(self) -> bool:
        return self.error <= self.tolerance


def _rel(got, ref) -> float:
    import torch

    ref = ref.double()
    denom = torch.linalg.vector_norm(ref)
    diff = torch.linalg.vector_norm(got.double().to(ref.device) - ref)
    if torch.isnan(diff):
        return float("inf")  # NaN (e.g. memory no kernel wrote) is never within tolerance
    return float(diff / denom) if denom > 0 else float(diff)


def verify(
    op, samples, directory, batches=None, seed: int = 0, device: str = "cuda", runner=None
) -> list[Row]:
    """Compare the generated ops in `directory` with `op` at each batch size, on `device` ("cuda",
    or "cpu" for the CPU driver). `runner` runs them instead of the C interface: anything with
    HostRunner's `forward_backward(directory, inputs, grad_outputs)`, e.g. a HostRunner to reuse, or
    a front end's runner (mirai.export.frameworks.jax_cpu.JaxHostRunner, jax_run.JaxGpuRunner)."""
    import torch

    if device not in ("cuda", "cpu"):
        raise MiraiError(f"verify runs on 'cuda' or 'cpu', not {device!r}")
    if device == "cuda" and not torch.cuda.is_available():
        raise MiraiError(
            "mirai verify needs a CUDA GPU (the generated kernels run there); "
            "--cpu runs the launch code on the CPU driver instead"
        )
    manifest = json.loads((Path(directory) / "manifest.json").read_text())
    tol = tolerance(manifest, device)
    from mirai.gpu import precision

    tf32 = device == "cuda" and tol == precision.ARITHMETIC_TOLERANCE["tf32"]
    dynamic = bool(manifest["symbols"])
    if not dynamic:
        batches = [_built_batch(manifest)]  # a static build runs at the shapes it was built for
    elif not batches:
        batches = [None]
    own = False
    if device == "cuda" and runner is None:
        from mirai.export.launch import GeneratedFunction

        function = GeneratedFunction(directory, check_inputs=True)
        run = function.forward_backward
    else:
        from mirai.export.hostdriver import HostRunner

        own = runner is None
        runner = runner or HostRunner()
        run = lambda inputs, grads: runner.forward_backward(directory, inputs, grads)  # noqa: E731
    output_dtypes = [getattr(torch, o["dtype"]) for o in manifest["outputs"]]
    rows = []
    try:
        for batch in batches:
            raw = _samples_at(samples, batch)
            if not dynamic:
                _check_static_shapes(manifest, raw)
            g = torch.Generator(device=device).manual_seed(seed)
            inputs = []
            for t, spec in zip(raw, manifest["inputs"]):
                t = t.detach().to(device).contiguous()
                if t.is_floating_point():
                    # random values of the samples' scale, in the dtype the ops were built for (an
                    # fp16/bf16 build takes its floating inputs in that dtype)
                    dtype = getattr(torch, spec["dtype"])
                    scale = float(t.float().std()) if t.numel() > 1 else 1.0
                    t = (torch.randn(t.shape, device=device, generator=g) * scale).to(dtype)
                inputs.append(t)
            size = int(inputs[0].shape[0]) if inputs[0].dim() else 1
            x64 = [  # gradients where the op gives them (not for its no_grad parameters)
                t.double().requires_grad_(name not in op.no_grad) if t.is_floating_point() else t
                for name, t in zip(op.param_names, inputs)
            ]
            ref_out = op.fn(*x64)
            ref_out = (ref_out,) if isinstance(ref_out, torch.Tensor) else tuple(ref_out)
            grad_outs = [
                torch.randn(o.shape, device=device, generator=g).to(dtype)
                for o, dtype in zip(ref_out, output_dtypes)
            ]
            got_out, got_grads = run(inputs, grad_outs)
            diff_outs = [o for o in ref_out if o.requires_grad]
            if diff_outs:
                torch.autograd.backward(
                    diff_outs,
                    [go.double() for go, o in zip(grad_outs, ref_out) if o.requires_grad],
                )
            if device == "cuda":
                torch.cuda.synchronize()
            refs = {f"output{k}": ref.detach() for k, ref in enumerate(ref_out)}
            refs.update(
                (f"grad {name}", x.grad)
                for name, x in zip(op.param_names, x64)
                if getattr(x, "grad", None) is not None
            )
            peer = peer_errors(op, inputs, grad_outs, refs) if tf32 else {}
            for k, got in enumerate(got_out):
                name = f"output{k}"
                rows.append(Row(size, name, _rel(got, refs[name]), _allowed(tol, peer, name)))
            for param, got in zip(op.param_names, got_grads):
                name = f"grad {param}"
                if got is not None and name in refs:
                    rows.append(Row(size, name, _rel(got, refs[name]), _allowed(tol, peer, name)))
    finally:
        if own:
            runner.close()
    return rows


def _allowed(tol: float, peer: dict, name: str) -> float:
    return max(tol, PEER_FACTOR * peer[name]) if name in peer else tol


def peer_errors(op, inputs, grad_outs, refs: dict) -> dict:
    """The error of PyTorch computing `op` in float32 with TF32 matmuls against the float64
    references `refs`, per output and gradient. The matmuls' operands are cut to TF32 as a TF32
    kernel reads them (mirai.gpu.tf32): asked for TF32, cuBLAS still runs some small products in
    full FP32, which would leave the peer's error below what TF32 computes."""
    import torch

    from mirai.gpu.tf32 import tf32_matmuls

    with tf32_matmuls():
        x32 = [t.float().requires_grad_(True) if t.is_floating_point() else t for t in inputs]
        out = op.fn(*x32)
        out = (out,) if isinstance(out, torch.Tensor) else tuple(out)
        diff = [(o, g.float()) for o, g in zip(out, grad_outs) if o.requires_grad]
        if diff:
            torch.autograd.backward([o for o, _ in diff], [g for _, g in diff])
        torch.cuda.synchronize()
    got = {f"output{k}": o.detach() for k, o in enumerate(out)}
    got.update(
        (f"grad {name}", x.grad)
        for name, x in zip(op.param_names, x32)
        if getattr(x, "grad", None) is not None
    )
    return {name: _rel(got[name], ref) for name, ref in refs.items() if name in got}


def _built_batch(manifest: dict) -> int | None:
    sizes = manifest["inputs"][0]["sizes"] if manifest["inputs"] else []
    return int(sizes[0]) if sizes else None


def _samples_at(samples, batch):
    """The sample inputs at `batch`: `samples` is a list, or a function of the batch size (or of
    nothing, or with a default)."""
    if not callable(samples):
        return samples
    takes_batch = bool(inspect.signature(samples).parameters)
    return samples(batch) if batch is not None and takes_batch else samples()


def _check_static_shapes(manifest: dict, inputs) -> None:
    built = [[int(d) for d in i["sizes"]] for i in manifest["inputs"]]
    given = [list(t.shape) for t in inputs]
    if built != given:
        raise MiraiError(f"this static build is for input shapes {built}; the samples give {given}")


def table(rows: list[Row]) -> str:
    lines = ["| B | tensor | rel. error | tolerance | ok |", "|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r.batch} | {r.name} | {r.error:.2e} | {r.tolerance:g} | "
            f"{'yes' if r.ok else 'NO'} |"
        )
    return "\n".join(lines)
