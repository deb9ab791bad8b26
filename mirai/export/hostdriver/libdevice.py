"""libdevice for Triton's interpreter: the device math functions Inductor's kernels call, on the CPU.

Triton's interpreter runs `tl.*` operations with NumPy but has no implementation of the libdevice
externs (`libdevice.exp`, `tanh`, `erf`, ...): they come back as None (triton-lang/triton#8825, still so
in Triton 3.7). Inductor's kernels call them, so the CPU driver gives each kernel module, and Inductor's
triton_helpers, this namespace instead: every function Inductor 2.11-2.13 emits, computed by the
matching torch CPU function in the operands' own dtype. Results agree with CUDA's libdevice to a few
ulp, not bit for bit, which the IEEE tolerance of the CPU check covers.
"""

from __future__ import annotations

import types


def _impl():
    import numpy as np
    import torch
    import triton.language as tl
    from triton.runtime.interpreter import TensorHandle, interpreter_semantic

    def operand(x):
        return x if isinstance(x, tl.tensor) else interpreter_semantic.to_tensor(x)

    def wrap(data, like, dtype=None):
        dtype = dtype or like.dtype.scalar
        ty = like.type.with_element_ty(dtype) if like.type.is_block() else dtype
        np_dtype = {tl.int1: np.bool_, tl.int32: np.int32, tl.int64: np.int64}.get(dtype)
        data = data.numpy()
        if np_dtype is None:
            np_dtype = like.handle.data.dtype
        return tl.tensor(TensorHandle(np.ascontiguousarray(data.astype(np_dtype)), dtype), ty)

    def function(name, torch_fn, result=None):
        def call(*args, _semantic=None, **_):
            tensors = [operand(a) for a in args]
            like = next((t for t in tensors if t.type.is_block()), tensors[0])
            values = [torch.from_numpy(np.asarray(t.handle.data)) for t in tensors]
            out = torch_fn(*values)
            return wrap(out, like, result)

        call.__name__ = name
        return call

    def ilogb(x):
        mantissa, exponent = torch.frexp(x)
        return torch.where(x == 0, torch.iinfo(torch.int32).min, exponent - 1)

    def fma(a, b, c):
        return (a.double() * b.double() + c.double()).to(a.dtype)

    special = torch.special
    table = {
        "abs": (torch.abs, None),
        "acos": (torch.acos, None),
        "acosh": (torch.acosh, None),
        "asin": (torch.asin, None),
        "asinh": (torch.asinh, None),
        "atan": (torch.atan, None),
        "atan2": (torch.atan2, None),
        "atanh": (torch.atanh, None),
        "ceil": (torch.ceil, None),
        "copysign": (torch.copysign, None),
        "cos": (torch.cos, None),
        "cosh": (torch.cosh, None),
        "cyl_bessel_i0": (special.i0, None),
        "cyl_bessel_i1": (special.i1, None),
        "erf": (torch.erf, None),
        "erfc": (torch.erfc, None),
        "erfcx": (special.erfcx, None),
        "erfinv": (torch.erfinv, None),
        "exp": (torch.exp, None),
        "exp2": (torch.exp2, None),
        "expm1": (torch.expm1, None),
        "fast_tanhf": (torch.tanh, None),
        "floor": (torch.floor, None),
        "fma": (fma, None),
        "fmod": (torch.fmod, None),
        "hypot": (torch.hypot, None),
        "ilogb": (ilogb, tl.int32),
        "isinf": (torch.isinf, tl.int1),
        "isnan": (torch.isnan, tl.int1),
        "j0": (special.bessel_j0, None),
        "j1": (special.bessel_j1, None),
        "ldexp": (lambda x, e: torch.ldexp(x, e.to(torch.int32)).to(x.dtype), None),
        "lgamma": (torch.lgamma, None),
        "llrint": (lambda x: torch.round(x).to(torch.int64), tl.int64),
        "log": (torch.log, None),
        "log10": (torch.log10, None),
        "log1p": (torch.log1p, None),
        "log2": (torch.log2, None),
        "mul_rn": (torch.mul, None),
        "nearbyint": (torch.round, None),
        "nextafter": (torch.nextafter, None),
        "pow": (lambda x, y: torch.pow(x, y.to(x.dtype)), None),
        "rsqrt": (torch.rsqrt, None),
        "signbit": (torch.signbit, tl.int1),
        "sin": (torch.sin, None),
        "sinh": (torch.sinh, None),
        "sqrt": (torch.sqrt, None),
        "tan": (torch.tan, None),
        "tanh": (torch.tanh, None),
        "trunc": (torch.trunc, None),
        "y0": (special.bessel_y0, None),
        "y1": (special.bessel_y1, None),
    }
    return types.SimpleNamespace(
        **{name: function(name, fn, result) for name, (fn, result) in table.items()}
    )


_NAMESPACE = None


def namespace():
    """The interpreter's libdevice (built on first use: it needs Triton's interpreter imported)."""
    global _NAMESPACE
    if _NAMESPACE is None:
        _NAMESPACE = _impl()
    return _NAMESPACE


def install(module) -> None:
    """Give a kernel module (and Inductor's triton_helpers, which its helpers run in) this libdevice."""
    from torch._inductor.runtime import triton_helpers

    triton_helpers.libdevice = namespace()
    if hasattr(module, "libdevice"):
        module.libdevice = namespace()
