"""Plan: a Capture and its compiled kernels -> a typed, frozen `ExportPlan` that the templates read.

Every field a template can read is declared in this file: `OpPlan` (one generated op), its
`OpTensor`s, `Binding`s, `Variant`s (each with its `Storage`s, `Temp`s, `LaunchStep`s with their
`Param`s, and `OutputCopy`s), embedded `Kernel`s, and `Wiring`, the one description of how the
forward op feeds the backward op.
Decisions live here, not in the templates:

- which storage each pointer comes from (an op input, an op output, a temporary allocation);
- how the forward op hands saved tensors to the backward op (as the original input, as a forward
  output, or as a residual: a flat output holding a buffer the backward reads);
- how each size symbol is bound from input shapes, and what is checked at run time.

The renderer, the generated Python API (through `Wiring.pick`) and `mirai.export.launch` (through the
manifest's `wiring`) all read the forward/backward wiring from `Wiring`; nothing else decides it.

>>> w = Wiring(num_outputs=1, backward_inputs=(Source("input", 0), Source("tangent", 0)),
...            gradients=(0, None))
>>> w.backward_args(["x", "w"], ["y"], [], ["dy"])
['x', 'dy']
>>> w.gradients_of(["dx"])
['dx', None]
>>> Wiring.from_json(w.to_json()) == w
True
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, fields

from mirai.errors import MiraiError, UnsupportedError
from mirai.gpu.precision import get as get_precision
from mirai.export.graph import (
    FUSION_GEMM,
    Capture,
    Gemm,
    KernelBinaries,
    KernelGraph,
    Launch,
    View,
)
from mirai.export.symbolic import free_symbols, parse, to_cpp

ELEMENT_SIZE = {
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "float64": 8,
    "int32": 4,
    "int64": 8,
    "int16": 2,
    "int8": 1,
    "uint8": 1,
    "bool": 1,
}
TF_TYPE = {
    "float32": ("float", "DT_FLOAT"),
    "float16": ("half", "DT_HALF"),
    "bfloat16": ("bfloat16", "DT_BFLOAT16"),
    "float64": ("double", "DT_DOUBLE"),
    "int32": ("int32", "DT_INT32"),
    "int64": ("int64", "DT_INT64"),
    "bool": ("bool", "DT_BOOL"),
    "uint8": ("uint8", "DT_UINT8"),
    "int8": ("int8", "DT_INT8"),
}
SCALAR_CTYPE = {
    "i1": "int32_t",
    "i8": "int8_t",
    "i16": "int16_t",
    "i32": "int32_t",
    "i64": "int64_t",
    "u1": "uint32_t",
    "u8": "uint8_t",
    "u16": "uint16_t",
    "u32": "uint32_t",
    "u64": "uint64_t",
    "fp16": "uint16_t",
    "bf16": "uint16_t",
    "fp32": "float",
    "fp64": "double",
}


# cuBLASLt's cudaDataType_t of each dtype its GEMMs take here
GEMM_DATA_TYPE = {"float32": "CUDA_R_32F", "float16": "CUDA_R_16F", "bfloat16": "CUDA_R_16BF"}


def tf_arg_name(name: str) -> str:
    """TensorFlow argument names are lower_snake_case starting with a letter."""
    snake = re.sub(r"[^a-z0-9_]", "_", re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower())
    return snake if re.match(r"^[a-z]", snake) else f"x_{snake}"


def py_op_name(op_name: str) -> str:
    """The Python name TensorFlow gives an op: CamelCase -> snake_case, as tf's op wrappers do."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])|(?<=[A-Z])([A-Z])(?=[a-z])", r"_\1\2", op_name).lower()


# -- the wiring of forward and backward ------------------------------------------------------------


@dataclass(frozen=True)
class Source:
    """Where a backward-op input comes from: a forward input, a user-visible forward output, a
    residual (a forward output kept for the backward only), or the tangent of a forward output."""

    kind: str  # "input", "output", "residual" or "tangent"
    index: int

    KINDS = ("input", "output", "residual", "tangent")

    def order(self) -> tuple[int, int]:
        """Where it stands among a backward op's inputs: by kind (KINDS), then by index."""
        return self.KINDS.index(self.kind), self.index


@dataclass(frozen=True)
class Wiring:
    """How a caller joins the two ops: the forward op returns `num_outputs` user outputs followed by
    the residuals; the backward op takes `backward_inputs`; forward input k gets the backward output
    `gradients[k]` as its gradient (None: no gradient)."""

    num_outputs: int
    backward_inputs: tuple[Source, ...] = ()
    gradients: tuple[int | None, ...] = ()

    def pick(self, source: Source, inputs, outputs, residuals, tangents):
        """The item `source` names, from whichever sequences the caller holds (tensors, or the
        Python expressions that name them in generated code)."""
        return {"input": inputs, "output": outputs, "residual": residuals, "tangent": tangents}[
            source.kind
        ][source.index]

    def backward_args(self, inputs, outputs, residuals, tangents) -> list:
        """The backward op's arguments, in order."""
        return [self.pick(s, inputs, outputs, residuals, tangents) for s in self.backward_inputs]

    def gradients_of(self, backward_results) -> list:
        """One gradient per forward input (None where it has none), from the backward op's results."""
        return [None if g is None else backward_results[g] for g in self.gradients]

    def to_json(self) -> dict:
        return {
            "num_outputs": self.num_outputs,
            "backward_inputs": [[s.kind, s.index] for s in self.backward_inputs],
            "gradients": list(self.gradients),
        }

    @classmethod
    def from_json(cls, data: dict) -> "Wiring":
        try:
            wiring = cls(
                int(data["num_outputs"]),
                tuple(Source(str(k), int(i)) for k, i in data["backward_inputs"]),
                tuple(None if g is None else int(g) for g in data["gradients"]),
            )
            bad = [s.kind for s in wiring.backward_inputs if s.kind not in Source.KINDS]
            if bad:
                raise ValueError(f"unknown source kind {bad[0]!r}")
            return wiring
        except (KeyError, TypeError, ValueError) as e:
            raise MiraiError(
                f"the manifest's wiring is malformed ({e}); rebuild with this mirai"
            ) from None


# -- one op ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OpTensor:
    """An input or output of a generated op. `shape` holds the captured size expressions ("s0",
    "8", "256*s0"); everything else a template needs is derived from it and `dtype`."""

    index: int
    name: str
    dtype: str
    shape: tuple[str, ...]
    kind: str  # inputs: input/output/residual/tangent (their Source kind); outputs: output/residual/grad
    aligned: bool = False  # the kernels need its data pointer 16-byte aligned
    source: Source | None = None  # backward-op inputs: where the caller takes it from

    @property
    def tf_name(self) -> str:
        return tf_arg_name(self.name)

    @property
    def tf_type(self) -> str:
        return TF_TYPE[self.dtype][0]

    @property
    def tf_enum(self) -> str:
        return TF_TYPE[self.dtype][1]

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def sizes(self) -> tuple[str, ...]:
        """Each dimension as a C++ expression over the symbols."""
        return tuple(to_cpp(s) for s in self.shape)

    @property
    def dim_symbols(self) -> tuple[tuple[str, ...], ...]:
        """The size symbols each dimension depends on (empty for a static dimension)."""
        return tuple(tuple(sorted(free_symbols(s))) for s in self.shape)


@dataclass(frozen=True)
class Binding:
    """Size symbol `symbol` is read from dimension `dim` of input `input`; it must be >= `min`."""

    symbol: str
    input: int
    dim: int
    min: int


@dataclass(frozen=True)
class Storage:
    """A graph storage that lives in an op input or output (`offset_bytes` into it)."""

    var: str
    kind: str  # "input" or "output"
    index: int
    offset_bytes: str = "0"


@dataclass(frozen=True)
class Temp:
    """A graph storage the op allocates for the duration of one run."""

    var: str
    bytes: str


@dataclass(frozen=True)
class Param:
    """One kernel parameter: a device pointer expression, or a scalar of C type `ctype`."""

    kind: str  # "ptr" or "scalar"
    expr: str
    ctype: str = ""
    check_i32: bool = False  # an index the kernel reads as int32: checked at run time
    name: str = ""


@dataclass(frozen=True)
class LaunchStep:
    """A Triton kernel launch: `kernel_index` into the op's embedded kernels, grid as C++."""

    kernel: str
    kernel_index: int
    grid: tuple[str, str, str]
    params: tuple[Param, ...]

    kind = "launch"


@dataclass(frozen=True)
class GemmMatrix:
    """One GEMM operand as C++: its pointer and its (batch, row, column) strides in elements."""

    ptr: str
    batch_stride: str
    row_stride: str
    col_stride: str


@dataclass(frozen=True)
class GemmStep:
    """A GEMM run through cuBLASLt: out = alpha * a @ b (+ bias), `batch` times.

    `bias` is "none", "vector" (a row vector added to every row: `c` points at it) or "matrix"
    (beta * c added). Sizes and strides are C++ expressions; the runtime maps the row-major problem
    onto cuBLASLt's column-major one."""

    op: str
    batch: str
    m: str
    n: str
    k: str
    a: GemmMatrix
    b: GemmMatrix
    out: GemmMatrix
    c: GemmMatrix | None
    bias: str
    alpha: str
    beta: str
    data_type: str  # mirai_rt's name of cuBLASLt's cudaDataType_t, e.g. "CUDA_R_32F"
    tf32: bool  # float32 operands may be rounded to TF32 (the precision mode allows it)
    shape: tuple[str, str, str, str]  # batch, m, n, k as captured size expressions

    @property
    def dots(self) -> str:
        """What its products compute, in the terms of compile's `dots`: "tf32", "ieee", "fp16"..."""
        if self.data_type == "CUDA_R_32F":
            return "tf32" if self.tf32 else "ieee"
        return {"CUDA_R_16F": "fp16", "CUDA_R_16BF": "bf16"}[self.data_type]

    kind = "gemm"


@dataclass(frozen=True)
class OutputCopy:
    """An output that is a view of another storage: copied into the output after the launches."""

    output: int
    bytes: str
    src: str


@dataclass(frozen=True)
class Binary:
    """One kernel's binary for one architecture, as the kernels header embeds it."""

    arch: int
    arch_name: str
    arch_specific: bool
    num_warps: int
    shared: int
    global_scratch_size: int
    global_scratch_align: int
    profile_scratch_size: int
    profile_scratch_align: int
    cubin_size: int
    cubin_hex: str = field(repr=False)
    ptx_literal: str = field(repr=False)


@dataclass(frozen=True)
class Kernel:
    """A kernel the op embeds: its entry function, a binary per architecture, its config (JSON)."""

    name: str
    function: str
    binaries: tuple[Binary, ...]
    config: str


@dataclass(frozen=True)
class Variant:
    """One way to run an op: its steps, where their storages live, and the copies into outputs.

    An op has one; a bucketed dynamic op (mirai.export.buckets) has one per batch bucket, each
    captured at its own sample batch, and runs the first whose `upto` bound holds for the batch."""

    storages: tuple[Storage, ...]
    temps: tuple[Temp, ...]
    steps: tuple[LaunchStep | GemmStep, ...]
    copies: tuple[OutputCopy, ...]
    sample: int | None = None  # the batch it was captured at (bucketed ops)
    upto: int | None = (
        None  # it serves batches <= upto; None: every batch the variants before leave
    )

    @property
    def launches(self) -> tuple[str, ...]:
        return tuple(s.kernel for s in self.steps if s.kind == "launch")

    @property
    def gemms(self) -> tuple[GemmStep, ...]:
        return tuple(s for s in self.steps if s.kind == "gemm")


@dataclass(frozen=True)
class OpPlan:
    """One generated op, fully resolved: the templates read these fields and nothing else.

    `kernels` are those of every variant (the op embeds them all); `dispatch` names the size symbol
    that picks the variant, empty when there is one."""

    op_name: str
    graph: str  # "forward" or "backward"
    description: str
    inputs: tuple[OpTensor, ...]
    outputs: tuple[OpTensor, ...]
    all_symbols: tuple[str, ...]
    bindings: tuple[Binding, ...]
    variants: tuple[Variant, ...]
    kernels: tuple[Kernel, ...]
    dispatch: str = ""

    @property
    def namespace(self) -> str:
        return "mirai_" + tf_arg_name(self.op_name)

    @property
    def py_name(self) -> str:
        return py_op_name(self.op_name)

    @property
    def max_rank(self) -> int:
        return max([t.rank for t in self.inputs + self.outputs] + [1])

    def template_fields(self) -> dict:
        """The flat dict a template renders with: every field and derived property above."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        for name in ("namespace", "py_name", "max_rank"):
            data[name] = getattr(self, name)
        return data


@dataclass(frozen=True)
class Residual:
    """A forward buffer the backward reads, output flat by the forward op."""

    buffer: str
    index: int
    dtype: str
    numel: str


@dataclass(frozen=True)
class ExportPlan:
    """Both ops of one export and how they are joined."""

    name: str
    forward: OpPlan
    backward: OpPlan | None
    residuals: tuple[Residual, ...]
    wiring: Wiring

    @property
    def ops(self) -> tuple[OpPlan, ...]:
        return (self.forward,) if self.backward is None else (self.forward, self.backward)


# -- building the plan -----------------------------------------------------------------------------


def _remedy(op: str) -> str:
    """What to build otherwise when cuBLASLt cannot run a GEMM as the graph lays it out: Inductor's
    own matmuls can be Triton templates instead; a fusion's GEMM (`bmm_rows`, which gate_up_down
    also emits) runs in cuBLASLt only, so the way out is to build without that fusion."""
    if op == FUSION_GEMM:
        return "build without the bmm_rows and gate_up_down fusions (fuse='none' or --fuse none)"
    return "build with gemm='triton' (--gemm triton)"


def _is_dense(view: View, sizes) -> bool:
    expected = "1"
    strides = []
    for size in reversed(sizes):
        strides.append(expected)
        expected = f"({expected})*({size})"
    strides.reverse()
    return (
        all(parse(a) == parse(b) or parse(s) == 1 for a, b, s in zip(view.strides, strides, sizes))
        and parse(view.offset) == 0
    )


def _numel(sizes) -> str:
    return "*".join(f"({s})" for s in sizes) or "1"


def _check_launchable(kernel) -> None:
    for b in kernel.binaries:
        if b.num_ctas != 1 or tuple(b.cluster_dims) not in ((1, 1, 1), (0, 0, 0)):
            raise UnsupportedError(f"kernel {b.name} uses thread-block clusters on {b.target}")
        if b.launch_cooperative_grid or b.launch_pdl:
            raise UnsupportedError(
                f"kernel {b.name} needs a cooperative or PDL launch on {b.target}"
            )


def _mutated_args(source: str) -> set[str]:
    """The argument names a kernel's Inductor metadata lists as mutated ('mutated_arg_names')."""
    found = re.search(r"['\"]mutated_arg_names['\"]\s*:\s*\[([^\]]*)\]", source)
    return set(re.findall(r"['\"](\w+)['\"]", found.group(1))) if found else set()


def _cubin_hex(data: bytes) -> str:
    lines = []
    for start in range(0, len(data), 20):
        chunk = data[start : start + 20]
        lines.append("    " + ",".join(f"0x{b:02x}" for b in chunk) + ",")
    return "\n".join(lines)


def _ptx_literal(ptx: str) -> str:
    delimiter = "mirai_ptx"
    if f'){delimiter}"' in ptx:
        raise MiraiError("PTX contains the raw-string delimiter")
    return f'R"{delimiter}({ptx}){delimiter}"'


def _kernels(compiled: dict, sources: dict) -> tuple[Kernel, ...]:
    entries = []
    for name in sorted(compiled):
        k: KernelBinaries = compiled[name]
        binaries = tuple(
            Binary(
                arch=b.cc,
                arch_name=b.arch,
                arch_specific=b.arch_specific,
                num_warps=b.num_warps,
                shared=b.shared,
                global_scratch_size=b.global_scratch_size,
                global_scratch_align=b.global_scratch_align,
                profile_scratch_size=b.profile_scratch_size,
                profile_scratch_align=b.profile_scratch_align,
                cubin_size=len(b.cubin),
                cubin_hex=_cubin_hex(b.cubin),
                ptx_literal=_ptx_literal(b.ptx),
            )
            for b in k.binaries
        )
        config = json.dumps(sources[name].config, sort_keys=True)
        entries.append(Kernel(name, k.function, binaries, config))
    return tuple(entries)


class _OpBuilder:
    """Collects one op's inputs, outputs, storages and copies; `finish` freezes them into an OpPlan."""

    def __init__(self, capture: Capture, op_name: str, graph: KernelGraph, compiled: dict):
        self.capture = capture
        self.op_name = op_name
        self.graph = graph
        self.compiled = compiled
        self.inputs: list[OpTensor] = []
        self.outputs: list[OpTensor] = []
        self.storage: dict[str, Storage | Temp] = {}  # graph storage name -> where it lives
        self.copies: list[tuple[int, View]] = []  # (output index, source view)

    def add_input(self, name, dtype, shape, kind, source: Source | None = None) -> int:
        self.inputs.append(
            OpTensor(len(self.inputs), name, dtype, tuple(shape), kind, False, source)
        )
        return len(self.inputs) - 1

    def add_output(self, name, dtype, shape, kind) -> int:
        self.outputs.append(OpTensor(len(self.outputs), name, dtype, tuple(shape), kind))
        return len(self.outputs) - 1

    def mark_aligned(self, index: int, aligned: bool) -> None:
        t = self.inputs[index]
        self.inputs[index] = OpTensor(t.index, t.name, t.dtype, t.shape, t.kind, aligned, t.source)

    def bind(self, graph_name: str, kind: str, index: int, offset_bytes: str = "0") -> None:
        self.storage[graph_name] = Storage(f"p_{graph_name}", kind, index, offset_bytes)

    def storage_kind(self, graph_name: str) -> str | None:
        s = self.storage.get(graph_name)
        return s.kind if isinstance(s, Storage) else None

    def pointer(self, view: View) -> str:
        base = self.storage[view.base].var
        offset = parse(view.offset)
        if offset == 0:
            return base
        return f"{base} + ({to_cpp(offset)}) * {ELEMENT_SIZE[view.dtype]}"

    def buffer_bytes(self, name: str) -> str:
        buf = self.graph.buffer(name)
        return to_cpp(parse(f"({buf.numel})*{ELEMENT_SIZE[buf.dtype]}"))

    def symbols(self) -> tuple[str, ...]:
        return tuple(sorted(self.capture.symbols, key=lambda s: int(s[1:])))

    def bindings(self) -> tuple[Binding, ...]:
        out = []
        for symbol in self.symbols():
            for i, inp in enumerate(self.inputs):
                if symbol in inp.shape:
                    lo = self.capture.symbol_ranges.get(symbol, (1, None))[0]
                    out.append(Binding(symbol, i, inp.shape.index(symbol), int(lo)))
                    break
            else:
                raise UnsupportedError(
                    f"{self.op_name}: no input of the op has a dimension equal to size symbol {symbol}"
                )
        return tuple(out)

    def written(self) -> list[tuple[str, str]]:
        """(storage, step name) for every storage a step writes: a GEMM's output, and the pointer
        arguments Inductor names out_ptr/in_out_ptr or lists among a kernel's mutated arguments."""
        out = []
        for step in self.graph.steps:
            if isinstance(step, Gemm):
                out.append((step.out.base, step.op))
                continue
            source = self.capture.kernels.get(self.graph.name, {}).get(step.kernel)
            mutated = _mutated_args(source.source) if source is not None else set()
            for arg in step.args:
                if arg.kind == "ptr" and (
                    arg.name.startswith(("out_ptr", "in_out_ptr")) or arg.name in mutated
                ):
                    out.append((arg.view.base, step.kernel))
        return out

    def check_inputs_kept(self) -> None:
        """A TensorFlow op must leave its inputs as they are: refuse a step that writes one."""
        for base, step in self.written():
            s = self.storage.get(base)
            if isinstance(s, Storage) and s.kind == "input":
                name = self.inputs[s.index].name
                raise UnsupportedError(
                    f"{self.op_name}: {step} writes into the op's input {name!r} (#{s.index}); a "
                    "TensorFlow op cannot change its inputs in place: return the new value "
                    "instead of modifying an argument"
                )

    def steps(self) -> tuple[LaunchStep | GemmStep, ...]:
        steps = []
        for step in self.graph.steps:
            if isinstance(step, Gemm):
                steps.append(self.gemm(step))
            elif isinstance(step, Launch):
                steps.append(self.launch(step))
            else:
                raise UnsupportedError(f"{self.op_name}: a step of kind {type(step).__name__}")
        return tuple(steps)

    def matrix(self, view: View) -> GemmMatrix:
        """A rank-2 or rank-3 view as a GEMM operand (a rank-2 one has batch stride 0)."""
        strides = [to_cpp(parse(s)) for s in view.strides]
        batch = strides[0] if len(strides) == 3 else "0"
        return GemmMatrix(self.pointer(view), batch, strides[-2], strides[-1])

    def gemm(self, g: Gemm) -> GemmStep:
        data_type = GEMM_DATA_TYPE.get(g.out.dtype)
        if data_type is None:
            raise UnsupportedError(
                f"{self.op_name}: a {g.out.dtype} matmul ({g.op}) that Inductor leaves to cuBLAS; "
                "mirai runs those in cuBLASLt for float32, float16 and bfloat16 only: compute the "
                "matmul in one of those dtypes"
            )
        for name, view in (("first operand", g.a), ("second operand", g.b), ("output", g.out)):
            if "1" not in (view.strides[-1], view.strides[-2]):
                raise UnsupportedError(
                    f"{self.op_name}: the {name} of {g.op} has strides {view.strides}: neither "
                    f"rows nor columns are contiguous, which cuBLASLt cannot read; {_remedy(g.op)}"
                )
        sizes = [to_cpp(parse(s)) for s in g.out.sizes]
        shape = (g.out.sizes[0] if len(g.out.sizes) == 3 else "1",) + (
            g.out.sizes[-2],
            g.out.sizes[-1],
            g.a.sizes[-1],
        )
        bias, c = "none", None
        if g.bias is not None:
            c = self.matrix(g.bias)
            if parse(g.bias.strides[-2]) == 0:
                if parse(g.bias.strides[-1]) != 1 or g.beta != 1.0:
                    raise UnsupportedError(
                        f"{self.op_name}: {g.op} adds a broadcast bias with stride "
                        f"{g.bias.strides[-1]} and beta {g.beta}; cuBLASLt's bias epilogue takes "
                        f"a contiguous vector with beta 1: {_remedy(g.op)}"
                    )
                bias = "vector"
            else:
                bias = "matrix"
        return GemmStep(
            op=g.op,
            batch=sizes[0] if len(sizes) == 3 else "1",
            m=sizes[-2],
            n=sizes[-1],
            k=to_cpp(parse(g.a.sizes[-1])),
            a=self.matrix(g.a),
            b=self.matrix(g.b),
            out=self.matrix(g.out),
            c=c,
            bias=bias,
            alpha=repr(float(g.alpha)),
            beta=repr(float(g.beta)),
            data_type=data_type,
            tf32=g.out.dtype == "float32"
            and get_precision(self.capture.precision).matmul != "highest",
            shape=shape,
        )

    def launch(self, step: Launch) -> LaunchStep:
        names = sorted(self.compiled)
        kernel = self.compiled[step.kernel]
        _check_launchable(kernel)
        args = {a.name: a for a in step.args}
        params = []
        for name, ctype in kernel.params:
            if name not in args:
                raise UnsupportedError(f"kernel {step.kernel}: no value for parameter {name}")
            arg = args[name]
            if arg.kind == "ptr":
                params.append(Param("ptr", self.pointer(arg.view)))
                continue
            cty = SCALAR_CTYPE.get(ctype)
            if cty is None:
                raise UnsupportedError(f"kernel {step.kernel}: parameter type {ctype}")
            expr = to_cpp(arg.value) if arg.kind == "int" else arg.value
            check = ctype == "i32" and arg.kind == "int"
            params.append(Param("scalar", expr, cty, check, name))
        grid = tuple(to_cpp(g) for g in step.grid)
        return LaunchStep(step.kernel, names.index(step.kernel), grid, tuple(params))

    def finish(self, graph_name: str, description: str, sources: dict) -> OpPlan:
        """Every buffer not yet an input or output is a temporary; freeze the op."""
        for buf in self.graph.buffers:
            if buf.name not in self.storage:
                self.storage[buf.name] = Temp(f"p_{buf.name}", self.buffer_bytes(buf.name))
        self.check_inputs_kept()
        copies = tuple(
            OutputCopy(
                output=index,
                bytes=to_cpp(
                    parse(f"({_numel(self.outputs[index].shape)})*{ELEMENT_SIZE[v.dtype]}")
                ),
                src=self.pointer(v),
            )
            for index, v in self.copies
        )
        return OpPlan(
            op_name=self.op_name,
            graph=graph_name,
            description=description,
            inputs=tuple(self.inputs),
            outputs=tuple(self.outputs),
            all_symbols=self.symbols(),
            bindings=self.bindings(),
            variants=(
                Variant(
                    storages=tuple(s for s in self.storage.values() if isinstance(s, Storage)),
                    temps=tuple(s for s in self.storage.values() if isinstance(s, Temp)),
                    steps=self.steps(),
                    copies=copies,
                ),
            ),
            kernels=_kernels(self.compiled, sources),
        )


def _output_buffers(graph: KernelGraph, views, builder: _OpBuilder, first_output: int) -> None:
    """Let each dense output own its buffer (the kernels write the TF output in place); copy the rest."""
    owned = set()
    for j, view in enumerate(views):
        out_index = first_output + j
        sizes = builder.outputs[out_index].shape
        buf = next((b for b in graph.buffers if b.name == view.base), None)
        if (
            buf is not None
            and view.base not in owned
            and _is_dense(view, sizes)
            and parse(buf.numel) == parse(_numel(sizes))
        ):
            owned.add(view.base)
            builder.bind(view.base, "output", out_index)
        else:
            if not _is_dense(View(view.base, view.dtype, view.sizes, view.strides, "0"), sizes):
                raise UnsupportedError(
                    f"{builder.op_name}: output {j} is a strided view of another tensor; "
                    "return a fresh tensor (e.g. .contiguous() or .clone())"
                )
            builder.copies.append((out_index, view))


def _input_order(capture: Capture, tensor_inputs) -> list[int]:
    """Parameter index of each tensor input of the forward graph (Dynamo orders them by first use)."""
    order = list(capture.input_order) or list(range(len(tensor_inputs)))
    if len(order) != len(tensor_inputs) or sorted(order) != list(range(len(capture.inputs))):
        raise UnsupportedError(
            f"{capture.name}: the forward graph takes {len(tensor_inputs)} tensors for "
            f"{len(capture.inputs)} inputs (unused or duplicated inputs are not supported)"
        )
    return order


def _plan_forward(capture: Capture, compiled: dict):
    """The forward op builder, its residuals, and how each saved tensor reaches the backward op."""
    graph = capture.forward
    b = _OpBuilder(capture, f"{capture.name}Fwd", graph, compiled)
    tensor_inputs = [i for i in graph.inputs if i.kind == "tensor"]
    order = _input_order(capture, tensor_inputs)
    for spec in capture.inputs:
        b.add_input(spec.name, spec.dtype, spec.sizes, "input")
    for gi, param in zip(tensor_inputs, order):
        b.bind(gi.name, "input", param)
        b.mark_aligned(param, gi.aligned)
    n_user = len(capture.outputs)
    for spec in capture.outputs:
        b.add_output(spec.name, spec.dtype, spec.sizes, "output")
    _output_buffers(graph, graph.outputs[:n_user], b, 0)

    # Saved tensors: name -> (how the backward op gets them, the view it reads).
    residuals: list[Residual] = []
    saved_sources: dict[str, tuple[Source, View]] = {}
    input_index = {gi.name: param for gi, param in zip(tensor_inputs, order)}
    for name, index in capture.saved.items():
        view = graph.outputs[index]
        if not isinstance(view, View):
            continue  # a saved size symbol: the backward binds it from shapes
        if view.base in input_index:
            saved_sources[name] = (Source("input", input_index[view.base]), view)
        elif b.storage_kind(view.base) == "output":
            saved_sources[name] = (Source("output", b.storage[view.base].index), view)
        else:
            existing = next((r for r in residuals if r.buffer == view.base), None)
            if existing is None:
                buf = graph.buffer(view.base)
                existing = Residual(view.base, len(residuals), buf.dtype, buf.numel)
                residuals.append(existing)
                out = b.add_output(
                    f"residual_{existing.index}", buf.dtype, (buf.numel,), "residual"
                )
                b.bind(view.base, "output", out)
            saved_sources[name] = (Source("residual", existing.index), view)
    return b, residuals, saved_sources


def _plan_backward(capture: Capture, compiled: dict, saved_sources: dict, residuals):
    """The backward op builder, and which backward output is the gradient of each forward input."""
    graph = capture.backward
    b = _OpBuilder(capture, f"{capture.name}Bwd", graph, compiled)
    sources: dict[Source, int] = {}

    def source_input(source: Source) -> int:
        if source in sources:
            return sources[source]
        if source.kind == "input":
            spec = capture.inputs[source.index]
            name, dtype, shape = spec.name, spec.dtype, spec.sizes
        elif source.kind == "output":
            spec = capture.outputs[source.index]
            name, dtype, shape = f"fwd_{spec.name}", spec.dtype, spec.sizes
        elif source.kind == "residual":
            r = residuals[source.index]
            name, dtype, shape = f"residual_{r.index}", r.dtype, (r.numel,)
        else:
            if source.index >= len(capture.outputs):
                raise UnsupportedError(
                    f"{b.op_name}: the backward takes a gradient for output {source.index} of a "
                    f"function with {len(capture.outputs)}; AOTAutograd adds outputs for "
                    "arguments the function changes in place, which a TensorFlow op cannot do: "
                    "compute new tensors instead"
                )
            spec = capture.outputs[source.index]
            name, dtype, shape = f"grad_{spec.name}", spec.dtype, spec.sizes
        sources[source] = b.add_input(name, dtype, shape, source.kind, source)
        return sources[source]

    bindings = []  # (graph input, its source, byte offset)
    for gi in graph.inputs:
        if gi.kind != "tensor":
            continue
        tangent = re.fullmatch(r"tangents_(\d+)", gi.name)
        if tangent:
            bindings.append((gi.name, Source("tangent", int(tangent.group(1)) - 1), "0"))
        elif gi.name in saved_sources:
            source, view = saved_sources[gi.name]
            offset = to_cpp(parse(view.offset) * ELEMENT_SIZE[view.dtype])
            bindings.append((gi.name, source, offset))
        else:
            raise UnsupportedError(
                f"{b.op_name}: cannot tell where backward input {gi.name} comes from"
            )
    # The op takes its inputs in one order whatever order AOTAutograd saved them in (forward
    # inputs, outputs, residuals, tangents, each by index), so that the buckets of a build, whose
    # graphs may save the same tensors in other orders, keep one interface.
    for source in sorted({s for _, s, _ in bindings}, key=Source.order):
        source_input(source)
    for name, source, offset in bindings:
        b.bind(name, "input", source_input(source), offset)
    # Every size symbol needs an input to be read from.
    for symbol, (k, _dim) in sorted(capture.symbols.items()):
        if not any(symbol in i.shape for i in b.inputs):
            source_input(Source("input", k))
    # Gradients: one per tensor input of the forward graph, None where there is none.
    tensor_positions = [p for p, i in enumerate(capture.forward.inputs) if i.kind == "tensor"]
    order = _input_order(capture, tensor_positions)
    position_of = {param: p for p, param in zip(tensor_positions, order)}
    gradients: list[int | None] = []
    grad_views = []
    for k, spec in enumerate(capture.inputs):
        p = position_of[k]
        view = graph.outputs[p] if p < len(graph.outputs) else None
        if isinstance(view, View):
            gradients.append(b.add_output(f"grad_{spec.name}", spec.dtype, spec.sizes, "grad"))
            grad_views.append(view)
        else:
            gradients.append(None)
    _output_buffers(graph, grad_views, b, 0)
    return b, tuple(gradients)


def plan(capture: Capture, compiled: dict) -> ExportPlan:
    """The typed plan of both ops of `capture`, from its kernels compiled per graph
    (`compiled["forward"]`, `compiled["backward"]`: kernel name -> KernelBinaries)."""
    fwd, residuals, saved_sources = _plan_forward(capture, compiled["forward"])
    n_user = len(capture.outputs)
    description = (
        f"Forward of {capture.name}: {len(fwd.inputs)} inputs, {n_user} outputs"
        + (f" and {len(residuals)} residuals for {capture.name}Bwd" if residuals else "")
        + "."
    )
    forward = fwd.finish("forward", description, capture.kernels["forward"])
    if capture.backward is None or not capture.backward.steps:
        return ExportPlan(capture.name, forward, None, tuple(residuals), Wiring(n_user))
    bwd, gradients = _plan_backward(capture, compiled["backward"], saved_sources, residuals)
    description = (
        f"Backward of {capture.name}: gradients of "
        + ", ".join(o.tf_name.removeprefix("grad_") for o in bwd.outputs)
        + "."
    )
    backward = bwd.finish("backward", description, capture.kernels["backward"])
    wiring = Wiring(n_user, tuple(i.source for i in backward.inputs), gradients)
    return ExportPlan(capture.name, forward, backward, tuple(residuals), wiring)
