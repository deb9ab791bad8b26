"""The data that flows between mirai's export stages: plain, frozen, picklable values.

capture -> KernelGraph (per graph) + KernelSource (per kernel)
compile -> KernelBinaries (per kernel): a CompiledKernel per target
render  -> files

Sizes, strides, offsets and launch arguments are kept as strings of sympy expressions over the
graph's size symbols (e.g. "s0", "256*s0"), so every value here is plain data: it pickles, compares and
prints deterministically. `mirai.export.symbolic` turns the strings back into expressions.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from mirai.gpu import precision as precision_modes


@dataclass(frozen=True)
class TensorSpec:
    """A user-facing tensor: dtype name (torch's, e.g. "float32") and symbolic sizes."""

    name: str
    dtype: str
    sizes: tuple[str, ...]

    @property
    def rank(self) -> int:
        return len(self.sizes)


@dataclass(frozen=True)
class View:
    """A strided view of a storage: a graph input or a buffer, with an element offset."""

    base: str
    dtype: str
    sizes: tuple[str, ...]
    strides: tuple[str, ...]
    offset: str = "0"


@dataclass(frozen=True)
class GraphInput:
    """One argument of an Inductor graph: a tensor (with its expected layout) or a size symbol."""

    name: str
    kind: str  # "tensor" or "symint"
    dtype: str = ""
    sizes: tuple[str, ...] = ()
    strides: tuple[str, ...] = ()
    symbol: str = ""  # for kind == "symint": the symbol it carries
    aligned: bool = False  # the graph requires 16-byte alignment of its data pointer


@dataclass(frozen=True)
class Buffer:
    """A storage that the graph allocates: `numel` elements of `dtype`."""

    name: str
    dtype: str
    numel: str


@dataclass(frozen=True)
class KernelArg:
    """One runtime argument of a kernel launch: a pointer to a view, or a scalar expression."""

    name: str
    kind: str  # "ptr", "int" or "float"
    ctype: str  # Triton signature type, e.g. "*fp32", "i32", "i64", "fp32"
    view: View | None = None
    value: str = ""


@dataclass(frozen=True)
class Launch:
    """One kernel launch: which kernel, its runtime arguments, and the grid as expressions."""

    kernel: str
    args: tuple[KernelArg, ...]
    grid: tuple[str, str, str]


# Gemm.op of the GEMM a fusion hands to cuBLASLt itself (`mirai::bmm_rows`, which the bmm_rows and
# gate_up_down fusions emit; mirai.export.fusions.ops), not one Inductor left to a library.
FUSION_GEMM = "bmm_rows"


@dataclass(frozen=True)
class Gemm:
    """A matrix multiply that Inductor leaves to a GEMM library (its extern mm/bmm/addmm), or a
    fusion's (FUSION_GEMM): out = alpha * (a @ b) + beta * bias, batched over a leading dimension
    for rank-3 views. `bias` is None, a row vector broadcast over the rows (strides (0, 1)), or a
    full matrix."""

    op: str  # Inductor's extern kernel ("mm", "bmm", "addmm", "bias_addmm", "baddbmm") or FUSION_GEMM
    a: View
    b: View
    out: View
    bias: View | None = None
    alpha: float = 1.0
    beta: float = 1.0


@dataclass(frozen=True)
class KernelGraph:
    """What one Inductor graph (forward or backward) does, as data.

    `inputs` are the graph's arguments in call order, `buffers` the storages it allocates, `steps` what
    it runs in order (Triton kernel launches and library GEMMs), `outputs` the views it returns.
    """

    name: str
    inputs: tuple[GraphInput, ...]
    buffers: tuple[Buffer, ...]
    steps: tuple  # Launch or Gemm, in order
    outputs: tuple  # View, a symbol expression string, or None (no gradient), per output
    output_names: tuple[str, ...]
    source: str = field(default="", repr=False, compare=False)  # Inductor's wrapper module

    def buffer(self, name: str) -> Buffer:
        return next(b for b in self.buffers if b.name == name)

    @property
    def launches(self) -> tuple[Launch, ...]:
        return tuple(s for s in self.steps if isinstance(s, Launch))

    @property
    def gemms(self) -> tuple[Gemm, ...]:
        return tuple(s for s in self.steps if isinstance(s, Gemm))


@dataclass(frozen=True)
class KernelSource:
    """A Triton kernel as Inductor generated it, with the launch configuration chosen for it."""

    name: str
    source: str  # the kernel's Python module source
    config: dict = field(hash=False)  # kwargs (block sizes), num_warps, num_stages, ...
    config_origin: str = ""  # "autotuned on <GPU>" or "heuristic (GPU-less)"
    function: str = (
        ""  # its def in `source`, where `name` differs (the variants of a bucketed build)
    )

    @property
    def entry(self) -> str:
        """The kernel's function in its source, and so the entry of its binaries."""
        return self.function or self.name


@dataclass(frozen=True)
class CompiledKernel:
    """A kernel compiled for one target: its binaries and what a launcher must know."""

    name: str
    function: str  # symbol of the entry in the module
    target: str  # e.g. "sm_90"
    arch: str  # the PTX's .target: "sm_80", or "sm_90a" (arch-specific: runs on 9.0 only)
    ptx: str
    cubin: bytes = field(repr=False)
    params: tuple[tuple[str, str], ...]  # runtime parameters (name, triton type), in order
    num_warps: int
    num_ctas: int
    shared: int
    global_scratch_size: int
    global_scratch_align: int
    profile_scratch_size: int
    profile_scratch_align: int
    cluster_dims: tuple[int, int, int] = (1, 1, 1)
    launch_cooperative_grid: bool = False
    launch_pdl: bool = False
    # what its matmuls compute, from the TTIR's tt.dot ops: "ieee" / "tf32" / "tf32x3" for float32
    # operands, else the operands' type ("fp16", "bf16", ...); empty when it has no matmul
    dots: tuple[str, ...] = ()

    def metadata(self) -> dict:
        data = dataclasses.asdict(self)
        data.pop("ptx")
        data.pop("cubin")
        data["params"] = [list(p) for p in self.params]
        data["cluster_dims"] = list(self.cluster_dims)
        data["dots"] = list(self.dots)
        return data

    @property
    def cc(self) -> int:
        """The compute capability the binary is for, e.g. 90."""
        return int(self.arch.removeprefix("sm_").rstrip("af"))

    @property
    def arch_specific(self) -> bool:
        """True for "sm_90a"-style binaries: their cubin and PTX run on exactly that architecture."""
        return not self.arch[-1].isdigit()


@dataclass(frozen=True)
class KernelBinaries:
    """One kernel compiled for every target of a build, lowest architecture first."""

    name: str
    binaries: tuple[CompiledKernel, ...]

    @property
    def function(self) -> str:
        return self.binaries[0].function

    @property
    def params(self) -> tuple[tuple[str, str], ...]:
        return self.binaries[0].params


@dataclass(frozen=True)
class Capture:
    """Everything capture produced for one @mirai.op function."""

    name: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    grad_inputs: tuple[int, ...]  # indices of the inputs that get a gradient
    symbols: dict = field(hash=False)  # symbol -> (input index, dim) that binds it
    input_order: tuple[int, ...] = ()  # forward graph tensor k -> input (parameter) index
    symbol_ranges: dict = field(default_factory=dict, hash=False)  # symbol -> (min, max or None)
    forward: KernelGraph = None
    backward: KernelGraph | None = None
    saved: dict = field(default_factory=dict, hash=False)  # bwd input name -> fwd output index
    kernels: dict = field(default_factory=dict, hash=False)  # graph name -> {kernel: KernelSource}
    target: str = "sm_90"  # the device the capture was made for (see targets.capture_target)
    precision: str = precision_modes.DEFAULT
    gemm: str = "auto"  # the GEMM policy (mirai.export.capture.inductor.GEMM_POLICIES)
    # graph name -> what autotuning measured for each GEMM (GPU builds): times of the best cuBLAS
    # and Triton choices, and the kind kept
    gemm_timings: dict = field(default_factory=dict, hash=False)
    origin: str = ""  # "gpu:<device name>" or "gpuless:<target>"
    versions: dict = field(default_factory=dict, hash=False)
    # fusion name -> rewrites it made in the traced graph (mirai.export.fusions)
    fused: dict = field(default_factory=dict, hash=False)
