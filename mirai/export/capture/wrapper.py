"""Read an Inductor wrapper module as data: run its `call` over symbolic tensors and record what it does.

Inductor's Python wrapper allocates buffers, reinterprets views and launches Triton kernels in order.
Instead of parsing that code, `interpret` executes it with every runtime helper replaced by a recorder:
tensors are symbolic (a storage name, sympy sizes/strides/offset), sizes of dynamic dimensions are sympy
symbols, allocations become Buffers, each `kernel.run(...)` becomes a Launch with its grid worked out
from the kernel's chosen configuration, and each extern matmul (`extern_kernels.mm/bmm/addmm`, which
Inductor leaves to cuBLAS, and `torch.ops.mirai.bmm_rows`, a GEMM writing its result with the batch
inside the rows) becomes a Gemm that the generated code runs through cuBLASLt. Anything else
the export face cannot reproduce (another extern kernel, an aten fallback, a CPU buffer, a tensor
method) raises UnsupportedError naming it.

Written for the wrappers of torch 2.11 and 2.13 (see mirai.gpu.versions).
"""

from __future__ import annotations

import contextlib
import types

import sympy

from mirai.errors import CaptureError, UnsupportedError
from mirai.export.graph import (
    FUSION_GEMM,
    Buffer,
    Gemm,
    GraphInput,
    KernelArg,
    KernelGraph,
    KernelSource,
    Launch,
    View,
)
from mirai.gpu.kernels import load_kernel
from mirai.export.symbolic import expr_str


def dtype_name(dtype) -> str:
    return str(dtype).replace("torch.", "")


class SymTensor:
    """A tensor of the wrapper, known only by storage, dtype and symbolic layout."""

    __slots__ = ("base", "dtype", "sizes", "strides", "offset")

    def __init__(self, base, dtype, sizes, strides, offset=0):
        self.base = base
        self.dtype = dtype
        self.sizes = tuple(sympy.sympify(s) for s in sizes)
        self.strides = tuple(sympy.sympify(s) for s in strides)
        self.offset = sympy.sympify(offset)

    def view(self) -> View:
        return View(
            base=self.base,
            dtype=dtype_name(self.dtype),
            sizes=tuple(expr_str(s) for s in self.sizes),
            strides=tuple(expr_str(s) for s in self.strides),
            offset=expr_str(self.offset),
        )

    def size(self, dim=None):
        return self.sizes if dim is None else self.sizes[dim]

    def stride(self, dim=None):
        return self.strides if dim is None else self.strides[dim]

    def storage_offset(self):
        return self.offset

    def __getattr__(self, name):
        raise UnsupportedError(
            f"the generated code calls Tensor.{name}() outside a Triton kernel, which the export "
            "face cannot reproduce; rewrite the function so that Inductor fuses it into a kernel"
        )


def storage_numel(sizes, strides) -> sympy.Expr:
    """Elements a strided layout spans: 1 + sum((size - 1) * stride), 0 when empty."""
    sizes = [sympy.sympify(s) for s in sizes]
    if any(s == 0 for s in sizes):
        return sympy.Integer(0)
    return sympy.Integer(1) + sum(
        ((s - 1) * sympy.sympify(st) for s, st in zip(sizes, strides)), sympy.Integer(0)
    )


class _Unsupported:
    """Stands for helpers the export cannot use (extern_kernels, torch.ops.aten...): any call through
    it raises UnsupportedError naming what was called."""

    def __init__(self, what: str):
        self._what = what

    def __getattr__(self, name):
        return _Unsupported(f"{self._what}.{name}")

    def __call__(self, *args, **kwargs):
        raise UnsupportedError(
            f"the graph calls {self._what}, which is neither a Triton kernel nor a matmul (mirai "
            "exports Triton kernels and runs matmuls through cuBLASLt; other ops that Inductor "
            "leaves to aten or to a library such as cuDNN cannot be exported); rewrite that part "
            "of the function"
        )


class _ExternKernels:
    """`extern_kernels` as the wrapper sees it: its matmuls are recorded as Gemm steps; any other
    extern kernel is unsupported."""

    def __init__(self, recorder: "_Recorder"):
        self._recorder = recorder

    def _gemm(self, op, a, b, out, bias=None, alpha=1, beta=1):
        tensors = [t for t in (a, b, out, bias) if t is not None]
        if not all(isinstance(t, SymTensor) for t in tensors):
            raise CaptureError(f"extern {op}: an operand is not a tensor of the graph")
        rank = len(out.sizes)
        if rank not in (2, 3) or len(a.sizes) != rank or len(b.sizes) != rank:
            raise UnsupportedError(f"extern {op} of rank {rank} operands")
        if len({t.dtype for t in (a, b, out)}) != 1:
            raise UnsupportedError(f"extern {op} with mixed operand dtypes")
        if bias is not None and len(bias.sizes) == 1:  # addmm's 1-D bias: a broadcast row
            bias = SymTensor(bias.base, bias.dtype, out.sizes, (0, bias.strides[0]), bias.offset)
        self._recorder.steps.append(
            Gemm(
                op=op,
                a=a.view(),
                b=b.view(),
                out=out.view(),
                bias=None if bias is None else bias.view(),
                alpha=float(alpha),
                beta=float(beta) if bias is not None else 0.0,
            )
        )
        return out

    def mm(self, a, b, *, out):
        return self._gemm("mm", a, b, out)

    def bmm(self, a, b, *, out):
        return self._gemm("bmm", a, b, out)

    def addmm(self, bias, a, b, *, alpha=1, beta=1, out):
        return self._gemm("addmm", a, b, out, bias, alpha, beta)

    def bias_addmm(self, bias, a, b, *, alpha=1, beta=1, out):
        return self._gemm("bias_addmm", a, b, out, bias, alpha, beta)

    def baddbmm(self, bias, a, b, *, alpha=1, beta=1, out):
        return self._gemm("baddbmm", a, b, out, bias, alpha, beta)

    def __getattr__(self, name):
        return getattr(_Unsupported("extern_kernels"), name)

    def bmm_rows(self, a, b, bias=None, acc=None):
        """`mirai::bmm_rows` (mirai.export.fusions.ops): a new [M, E, N] buffer that one GEMM
        writes as [E, M, N] with the batch inside the rows, the bias ([E, 1, N], broadcast over
        the rows) or the addend (an [M, E, N] tensor, seen the same way) as its C operand."""
        if not all(isinstance(t, SymTensor) for t in (a, b)):
            raise CaptureError("mirai::bmm_rows: an operand is not a tensor of the graph")
        (e, m, _), n = a.sizes, b.sizes[2]
        out = self._recorder.empty_strided((m, e, n), (e * n, n, 1), a.dtype)
        view = SymTensor(out.base, out.dtype, (e, m, n), (n, e * n, 1), out.offset)
        c = None
        if bias is not None:
            c = SymTensor(
                bias.base, bias.dtype, (e, m, n), (bias.strides[0], 0, bias.strides[2]), bias.offset
            )
        elif acc is not None:
            c = SymTensor(
                acc.base,
                acc.dtype,
                (e, m, n),
                (acc.strides[1], acc.strides[0], acc.strides[2]),
                acc.offset,
            )
        self._gemm(FUSION_GEMM, a, b, view, c)
        return out


class _Operators:
    """`torch.ops` as the wrapper sees it: `torch.ops.mirai.bmm_rows.default`, which Inductor calls
    as it is, becomes a GEMM; any other operator is unsupported."""

    def __init__(self, externs: _ExternKernels):
        self.mirai = types.SimpleNamespace(bmm_rows=types.SimpleNamespace(default=externs.bmm_rows))

    def __getattr__(self, name):
        return _Unsupported(f"torch.ops.{name}")


class _Recorder:
    def __init__(self, name: str, choose_config, gpu_globals: dict):
        self.name = name
        self.choose_config = choose_config
        self.gpu_globals = gpu_globals
        self.buffers: list[Buffer] = []
        self.steps: list = []
        self.kernels: dict[str, KernelSource] = {}
        self.handles: dict[str, object] = {}
        self.aligned: set[str] = set()

    # -- helpers the wrapper calls -------------------------------------------------------------
    def empty_strided(self, sizes, strides, dtype, *rest, **kwargs):
        name = f"buf{len(self.buffers)}"
        self.buffers.append(
            Buffer(name, dtype_name(dtype), expr_str(storage_numel(sizes, strides)))
        )
        return SymTensor(name, dtype, sizes, strides, 0)

    def empty_strided_cpu(self, *args, **kwargs):
        raise UnsupportedError("the graph allocates a CPU tensor; mirai exports GPU-only graphs")

    @staticmethod
    def reinterpret_tensor(tensor, sizes, strides, offset=0):
        return SymTensor(tensor.base, tensor.dtype, sizes, strides, tensor.offset + offset)

    @staticmethod
    def assert_size_stride(*args, **kwargs):
        return None

    def copy_if_misaligned(self, tensor):
        self.aligned.add(tensor.base)
        return tensor

    # -- kernels ---------------------------------------------------------------------------------
    def triton(self, kernel_name, source_code, device_str="cuda", *args, **kwargs):
        # Inductor hands a user-defined kernel (a triton_op's) over under the name it was written
        # under, each specialization (a stride of 1 made a constant) with a source of its own: a
        # second one gets a name of its own, `<name>_<n>`, its function keeping the first.
        name, n = kernel_name, 0
        while name in self.kernels and self.kernels[name].source != source_code:
            n += 1
            name = f"{kernel_name}_{n}"
        handle = _KernelHandle(self, name, source_code, function=kernel_name)
        self.handles[name] = handle
        return handle


class _AsyncCompileStandIn:
    def __init__(self, recorder: _Recorder):
        self._recorder = recorder

    def triton(self, *args, **kwargs):
        return self._recorder.triton(*args, **kwargs)

    def wait(self, scope):
        return None

    def __getattr__(self, name):
        return getattr(_Unsupported("async_compile"), name)


def config_dict(cfg) -> dict:
    """A Triton/Inductor Config as plain data."""
    data = {
        "kwargs": dict(sorted(cfg.kwargs.items())),
        "num_warps": int(cfg.num_warps),
        "num_stages": int(cfg.num_stages),
    }
    for key in ("num_ctas", "maxnreg"):
        value = getattr(cfg, key, None)
        if value not in (None, 1) or key == "num_ctas":
            data[key] = value if value is not None else 1
    return data


class _KernelHandle:
    def __init__(self, recorder: _Recorder, name: str, source: str, function: str):
        self.recorder = recorder
        self.name = name
        self.autotuner = load_kernel(function, source)
        cfg, origin = recorder.choose_config(function, source, self.autotuner, recorder.gpu_globals)
        self.config = cfg
        recorder.kernels[name] = KernelSource(
            name=name, source=source, config=config_dict(cfg), config_origin=origin,
            function="" if function == name else function,
        )  # fmt: skip

    def run(self, *args, stream=None, **kwargs):
        from torch._inductor.runtime.triton_heuristics import GridExpr

        tuner = self.autotuner
        signature = tuner.triton_meta["signature"]
        runtime = [k for k, v in signature.items() if v != "constexpr"]
        # The wrapper passes a kernel every argument but its declared constexprs, including those
        # specialized to constants: a stride of 1 in a user-defined kernel (a triton_op's,
        # mirai.export.fusions), xnumel = 1 in an Inductor reduction to one value. torch 2.13
        # lists a user-defined kernel's declared ones in inductor_meta; otherwise they are read
        # from the kernel's parameters.
        declared = tuner.inductor_meta.get("declared_constexpr_names")
        if declared is None:
            declared = [p.name for p in tuner.fn.params if p.is_constexpr]
        passed = [k for k in signature if k not in declared]
        extras = list(tuner.inductor_meta.get("extra_launcher_args", []))
        if len(args) != len(passed) + len(extras):
            raise CaptureError(
                f"kernel {self.name}: the wrapper passes {len(args)} arguments, its signature "
                f"has {len(passed)} runtime arguments and {len(extras)} launcher arguments"
            )
        values = dict(zip(passed + extras, args))
        constants = tuner.triton_meta.get("constants", {})
        for name in passed:
            if name not in runtime and values[name] != constants.get(name):
                raise CaptureError(
                    f"kernel {self.name}: argument {name} is {values[name]!r}, but the kernel was "
                    f"specialized to {constants.get(name)!r}"
                )
        kernel_args = []
        for name in runtime:
            kernel_args.append(_kernel_arg(self.name, name, signature[name], values[name]))
        meta = {**values, **self.config.kwargs}
        meta = {k: (v if not isinstance(v, SymTensor) else 0) for k, v in meta.items()}
        grid = GridExpr.from_meta(tuner.inductor_meta, self.config).eval_slow(meta)
        self.recorder.steps.append(
            Launch(
                kernel=self.name,
                args=tuple(kernel_args),
                grid=tuple(expr_str(sympy.sympify(g)) for g in grid),
            )
        )


def _kernel_arg(kernel: str, name: str, ctype: str, value) -> KernelArg:
    if ctype.startswith("*"):
        if not isinstance(value, SymTensor):
            raise CaptureError(f"kernel {kernel}: pointer argument {name} is {value!r}")
        return KernelArg(name=name, kind="ptr", ctype=ctype, view=value.view())
    if isinstance(value, float) or ctype.startswith("fp"):
        return KernelArg(name=name, kind="float", ctype=ctype, value=repr(float(value)))
    if isinstance(value, (int, sympy.Expr)) and not isinstance(value, bool):
        return KernelArg(name=name, kind="int", ctype=ctype, value=expr_str(sympy.sympify(value)))
    raise UnsupportedError(f"kernel {kernel}: argument {name} of type {ctype} is {value!r}")


class _TorchStandIn:
    """`torch` as the wrapper sees it: dtypes as usual, device guards as no-ops."""

    def __init__(self, torch, externs: _ExternKernels):
        self._torch = torch
        self.cuda = types.SimpleNamespace(
            _DeviceGuard=lambda index: contextlib.nullcontext(), set_device=lambda index: None
        )
        self.ops = _Operators(externs)

    def __getattr__(self, name):
        return getattr(self._torch, name)


def _symbolic_fold(builtin, symbolic):
    """`max`/`min` for the wrapper: sympy's Max/Min where a size is symbolic (Inductor writes
    `max(1, (63 + s0) // 64)` in strides), Python's own otherwise.

    >>> fold = _symbolic_fold(max, sympy.Max)
    >>> s0 = sympy.Symbol("s0", integer=True, positive=True)
    >>> fold(1, (63 + s0) // 64)  # at least 1 already, for s0 >= 1
    floor(s0/64 + 63/64)
    >>> fold(n for n in (2, 7)), fold(3, 5)
    (7, 5)
    """

    def fold(*args, **kwargs):
        if kwargs:  # key= or default=: sizes are never compared that way
            return builtin(*args, **kwargs)
        items = list(args[0]) if len(args) == 1 else list(args)  # an iterable is read once
        if any(isinstance(a, sympy.Basic) for a in items):
            return symbolic(*items)
        return builtin(items)

    return fold


def interpret(
    name: str,
    source: str,
    inputs: list[GraphInput],
    output_names,
    choose_config,
    gpu_globals: dict | None = None,
) -> tuple[KernelGraph, dict[str, KernelSource]]:
    """Run the wrapper module `source` symbolically; return its KernelGraph and its kernels."""
    import torch
    import torch._inductor.async_compile as async_compile_module

    recorder = _Recorder(name, choose_config, gpu_globals or {})
    namespace = {"__name__": f"mirai_wrapper_{name}", "__file__": f"<mirai wrapper {name}>"}
    original = async_compile_module.AsyncCompile
    async_compile_module.AsyncCompile = lambda *a, **k: _AsyncCompileStandIn(recorder)
    try:
        exec(compile(source, namespace["__file__"], "exec"), namespace)
    finally:
        async_compile_module.AsyncCompile = original

    externs = _ExternKernels(recorder)
    namespace.update(
        torch=_TorchStandIn(torch, externs),
        empty_strided_cuda=recorder.empty_strided,
        empty_strided_cpu=recorder.empty_strided_cpu,
        empty_strided_cpu_pinned=recorder.empty_strided_cpu,
        empty_strided=recorder.empty_strided_cpu,
        reinterpret_tensor=recorder.reinterpret_tensor,
        assert_size_stride=recorder.assert_size_stride,
        assert_alignment=recorder.assert_size_stride,
        copy_if_misaligned=recorder.copy_if_misaligned,
        get_raw_stream=lambda index: 0,
        extern_kernels=externs,
        aten=_Unsupported("aten"),
        alloc_from_pool=_Unsupported("alloc_from_pool"),
        start_graph=lambda *a, **k: None,
        end_graph=lambda *a, **k: None,
        max=_symbolic_fold(max, sympy.Max),
        min=_symbolic_fold(min, sympy.Min),
    )
    args = []
    for spec in inputs:
        if spec.kind == "symint":
            args.append(sympy.sympify(spec.symbol))
        else:
            args.append(
                SymTensor(spec.name, getattr(torch, spec.dtype), spec.sizes, spec.strides, 0)
            )
    result = namespace["call"](list(args))
    outputs = []
    for value in result:
        if value is None:
            outputs.append(None)
        elif isinstance(value, SymTensor):
            outputs.append(value.view())
        elif isinstance(value, (int, sympy.Expr)):
            outputs.append(expr_str(sympy.sympify(value)))
        else:
            raise CaptureError(f"graph {name} returns an unexpected {type(value).__name__}")
    aligned_inputs = tuple(
        GraphInput(**{**i.__dict__, "aligned": i.name in recorder.aligned}) for i in inputs
    )
    graph = KernelGraph(
        name=name,
        inputs=aligned_inputs,
        buffers=tuple(recorder.buffers),
        steps=tuple(recorder.steps),
        outputs=tuple(outputs),
        output_names=tuple(output_names),
        source=source,
    )
    return graph, recorder.kernels
