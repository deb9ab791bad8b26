"""Precision modes: what `precision="tf32"` and its siblings mean, in one registry.

A mode says how float32 matmuls may compute (`torch.set_float32_matmul_precision`), which dtype the
op's floating inputs and outputs take, and how far results may be from float64. Capture, the CLI,
verify and the GPU checks read it; nothing else spells a mode.

    >>> get("bf16").dtype, get("tf32").matmul
    ('bfloat16', 'high')
    >>> names()
    ('tf32', 'ieee', 'fp16', 'bf16')
"""

from __future__ import annotations

from dataclasses import dataclass

from mirai.errors import MiraiError

# Relative error by norm allowed for results of each kind of arithmetic: fp32 throughout ("ieee"),
# float32 matmuls on TF32 tensor cores (inputs rounded to a 10-bit mantissa), and ops whose inputs and
# outputs are fp16 / bf16 (their rounding dominates, whatever the matmuls do).
ARITHMETIC_TOLERANCE = {"ieee": 1e-4, "tf32": 1e-2}


@dataclass(frozen=True)
class Precision:
    name: str
    matmul: str  # torch.set_float32_matmul_precision while capturing: "high" allows TF32
    dtype: str | None  # the dtype of the op's floating inputs and outputs; None: the samples'
    tolerance: float | None  # None: follows what the kernels' matmuls compute (see `tolerance`)
    help: str

    def cast(self, samples):
        """The sample inputs as this mode's ops take them: floating tensors in its dtype."""
        if self.dtype is None:
            return samples
        import torch

        dtype = getattr(torch, self.dtype)
        return [
            s.to(dtype) if isinstance(s, torch.Tensor) and s.is_floating_point() else s
            for s in samples
        ]


PRECISIONS = {
    p.name: p
    for p in (
        Precision("tf32", "high", None, None, "float32 ops; matmuls may use TF32 tensor cores"),
        Precision("ieee", "highest", None, None, "float32 ops; matmuls in IEEE fp32"),
        Precision("fp16", "high", "float16", 2e-2, "float16 inputs and outputs"),
        Precision("bf16", "high", "bfloat16", 5e-2, "bfloat16 inputs and outputs"),
    )
}
DEFAULT = "tf32"


def names() -> tuple[str, ...]:
    """The modes, as the CLI offers them."""
    return tuple(PRECISIONS)


def get(name: str | Precision) -> Precision:
    if isinstance(name, Precision):
        return name
    try:
        return PRECISIONS[name]
    except KeyError:
        raise MiraiError(
            f"unknown precision {name!r}; choose one of {', '.join(PRECISIONS)}"
        ) from None


def tolerance(name: str, dots, interpreted: bool = False) -> float:
    """The tolerance of a build in mode `name` whose kernels' matmuls compute `dots` (e.g. {"ieee"},
    from the TTIR). float32 modes: TF32's where some matmul uses TF32, else IEEE's; Triton's
    interpreter (`interpreted`) computes every dot in IEEE fp32, so IEEE's there.

    >>> tolerance("tf32", {"tf32"}), tolerance("tf32", {"ieee"}), tolerance("tf32", {"tf32"}, True)
    (0.01, 0.0001, 0.0001)
    """
    mode = get(name)
    if mode.tolerance is not None:
        return mode.tolerance
    if "tf32" in set(dots) and not interpreted:
        return ARITHMETIC_TOLERANCE["tf32"]
    return ARITHMETIC_TOLERANCE["ieee"]
