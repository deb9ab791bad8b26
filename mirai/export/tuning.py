"""Tuning tables: what autotuning on a GPU chose, kept as data that a GPU-less build reads.

Tune once, build anywhere. `mirai tune` captures a function on a GPU at one or more batch sizes,
where Inductor's autotuner times every candidate, and writes what it kept to a JSON file:

- for each GEMM (keyed by dtype, the sizes and strides of its operands and the sizes of its
  result): cuBLAS or a Triton template, with the template's blocks, and the best time of each kind;
  a template autotuning kept stays only where the whole op ran faster with it than with cuBLAS
  (`TuningTable.op_checked`; mirai.export.opcheck times the ops);
- for each pointwise or reduction kernel (keyed by graph, kernel name and Inductor's size hints,
  which Inductor rounds up to powers of two, so a key is a shape bucket): the launch configuration
  that ran fastest.

A GPU-less build given the table (`mirai build --tuning FILE`) takes those choices wherever its own
capture meets the same key, and its heuristics elsewhere; the manifest says which, kernel by
kernel. A key the table lacks (another batch, a kernel another torch fused differently) is not an
error: the build reports how much of it the table covered, and names the kernels it missed.

    >>> table = TuningTable(device="H200", target="sm_90", precision="tf32", versions={})
    >>> table.kernel_entry("forward", "triton_poi_fused_0", {"x": 1024}) is None
    True
"""

from __future__ import annotations

import ast
import json
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from mirai.errors import MiraiError

SCHEMA = 2
GEMM_KINDS = ("cublas", "triton")
# the blocks that name a GEMM template's configuration (Inductor's mm/bmm templates)
TEMPLATE_KEYS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_stages", "num_warps")


def gemm_key(dtype: str, operands, result_sizes) -> str:
    """A GEMM's key: its dtype, the sizes and strides of its operands (a transposed view is another
    kernel, and times otherwise), and the sizes of its result, e.g.
    `float32:8x64x256(256,2048,1),8x256x1024(262144,1024,1)->8x64x1024`.

    >>> gemm_key("torch.float32", [([8, 64, 256], [256, 2048, 1]), ([8, 256, 1024], None)], [8, 64, 1024])
    'float32:8x64x256(256,2048,1),8x256x1024(?)->8x64x1024'
    """

    def dims(sizes) -> str:
        return "x".join(str(int(s)) for s in sizes)

    def strides(values) -> str:
        return ",".join(str(int(s)) for s in values) if values is not None else "?"

    parts = ",".join(f"{dims(sizes)}({strides(st)})" for sizes, st in operands)
    return f"{str(dtype).replace('torch.', '')}:{parts}->{dims(result_sizes)}"


def table_graph(graph: str, has_backward: bool) -> str:
    """The graph a table keys a kernel under: a training op's "forward" and "backward", and
    "inference" for a forward compiled without a backward (an inference build, or a function with
    nothing to differentiate). Such a forward writes no residuals, so Inductor generates other
    kernels than the training forward's under the same names, and they are tuned apart.

    >>> table_graph("forward", has_backward=False), table_graph("forward", has_backward=True)
    ('inference', 'forward')
    """
    return graph if has_backward else "inference"


def kernel_key(graph: str, name: str, size_hints) -> str:
    """A kernel's key: graph, kernel name and Inductor's size hints (a shape bucket).

    >>> kernel_key("backward", "triton_red_fused_sum_0", {"x": 8192, "r0_": 128})
    'backward:triton_red_fused_sum_0:r0_=128,x=8192'
    """
    hints = ",".join(f"{k}={int(v)}" for k, v in sorted((size_hints or {}).items()))
    return f"{graph}:{name}:{hints}"


def templates_won(rounds: dict) -> bool:
    """The op check's rule: a graph keeps its templates only if its op ran faster with them in
    every round than with every GEMM in cuBLAS in any round ({"table": [ms of each round] with
    the table's choices, "cublas": [ms of each round] with cuBLAS only}). A win of the medians
    within the rounds' spread is noise, and cuBLAS is what a build takes without a table.

    >>> templates_won({"table": [0.130, 0.133, 0.136], "cublas": [0.139, 0.140, 0.142]})
    True
    >>> templates_won({"table": [0.130, 0.136, 0.141], "cublas": [0.139, 0.140, 0.142]})
    False
    """
    return max(rounds["table"]) < min(rounds["cublas"])


def op_check_record(rounds: dict) -> dict:
    """What a table entry keeps of one graph's op check: each build's median and its rounds."""
    import statistics

    return {name: round(statistics.median(times), 5) for name, times in sorted(rounds.items())} | {
        "rounds": {name: [round(t, 5) for t in times] for name, times in sorted(rounds.items())}
    }


@dataclass(frozen=True)
class GemmEntry:
    """What one GEMM should run as: cuBLAS, or the Triton template with `config`."""

    kind: str
    config: dict = field(default_factory=dict, hash=False)  # TEMPLATE_KEYS, for "triton"
    ms: dict = field(default_factory=dict, hash=False)  # best time of each kind measured
    # the whole-op check of a template autotuning kept: graph, op times, the template's blocks
    op_check: dict = field(default_factory=dict, hash=False)

    def __post_init__(self):
        if self.kind not in GEMM_KINDS:
            raise MiraiError(f"a GEMM runs as one of {GEMM_KINDS}, not {self.kind!r}")
        if self.kind == "triton" and sorted(self.config) != sorted(TEMPLATE_KEYS):
            raise MiraiError(
                f"a Triton GEMM entry needs the template blocks {', '.join(TEMPLATE_KEYS)}; "
                f"got {sorted(self.config)}"
            )


@dataclass(frozen=True)
class TuningTable:
    """Autotuning's choices for one target and precision, measured on `device`."""

    device: str
    target: str
    precision: str
    versions: dict = field(hash=False)  # torch/triton versions the measurements ran with
    gemms: dict = field(default_factory=dict, hash=False)  # gemm_key -> GemmEntry
    kernels: dict = field(default_factory=dict, hash=False)  # kernel_key -> config dict

    @property
    def origin(self) -> str:
        torch = self.versions.get("torch", "?")
        return f"tuning table measured on {self.device} (torch {torch})"

    def kernel_entry(self, graph: str, name: str, size_hints) -> dict | None:
        return self.kernels.get(kernel_key(graph, name, size_hints))

    def gemm_entry(self, key: str) -> GemmEntry | None:
        return self.gemms.get(key)

    def check(self, target: str, precision: str) -> None:
        """Refuse a table measured for another target or precision than the build's."""
        if self.target != target or self.precision != precision:
            raise MiraiError(
                f"the tuning table was measured for {self.target} at precision {self.precision} "
                f"(on {self.device}); this build is for {target} at {precision}: tune for it with "
                f"mirai tune --target {target} --precision {precision}"
            )

    def merged(self, other: "TuningTable") -> "TuningTable":
        """This table with `other`'s entries added (they win where both have a key)."""
        other.check(self.target, self.precision)
        return TuningTable(
            device=self.device,
            target=self.target,
            precision=self.precision,
            versions=dict(self.versions),
            gemms={**self.gemms, **other.gemms},
            kernels={**self.kernels, **other.kernels},
        )

    def op_checked(self, graph_keys: dict, times: dict) -> "TuningTable":
        """This table with the templates of each graph whose op ran no faster with them than with
        every GEMM in cuBLAS turned back to cuBLAS; each template entry notes the check.

        `graph_keys`: {graph: the GEMM keys of its op}; `times`: {graph: {"table": [ms of the op
        with these choices, each round], "cublas": [ms with cuBLAS only, each round]}}, judged by
        `templates_won`. A key in several graphs stays a template only if every graph that has it
        kept its templates.

        >>> t = GemmEntry("triton", {k: 1 for k in TEMPLATE_KEYS}, {"triton": 0.01, "cublas": 0.02})
        >>> table = TuningTable("H200", "sm_90", "tf32", {}, gemms={"a": t, "b": t})
        >>> checked = table.op_checked({"forward": {"a"}, "backward": {"b"}},
        ...     {"forward": {"table": [0.030, 0.031], "cublas": [0.041, 0.040]},
        ...      "backward": {"table": [0.09, 0.08], "cublas": [0.07, 0.07]}})
        >>> checked.gemms["a"].kind, checked.gemms["b"].kind, checked.gemms["b"].op_check["kept"]
        ('triton', 'cublas', False)
        """
        verdicts: dict[str, list] = {}
        for graph, keys in graph_keys.items():
            if graph not in times:
                continue
            ms = op_check_record(times[graph])
            kept = templates_won(times[graph])
            for key in keys:
                verdicts.setdefault(key, []).append((graph, ms, kept))
        gemms = dict(self.gemms)
        for key, found in verdicts.items():
            entry = gemms.get(key)
            if entry is None or entry.kind != "triton":
                continue
            kept = all(k for _, _, k in found)
            check = {
                "graphs": {graph: ms for graph, ms, _ in found},
                "kept": kept,
                "template": dict(entry.config),
            }
            gemms[key] = GemmEntry(
                kind="triton" if kept else "cublas",
                config=dict(entry.config) if kept else {},
                ms=dict(entry.ms),
                op_check=check,
            )
        return TuningTable(
            device=self.device,
            target=self.target,
            precision=self.precision,
            versions=dict(self.versions),
            gemms=gemms,
            kernels=dict(self.kernels),
        )

    def kernels_of(self, other: "TuningTable", graphs) -> "TuningTable":
        """This table with the kernel configurations of `graphs` taken from `other` in place of its
        own: where the op check turned a graph back to cuBLAS, its kernels are those of the
        cuBLAS-only build (other fusions, other names), tuned there.

        >>> a = TuningTable("H200", "sm_90", "tf32", {}, kernels={"forward:k0:x=8": {"n": 1},
        ...     "backward:k1:x=8": {"n": 1}})
        >>> b = TuningTable("H200", "sm_90", "tf32", {}, kernels={"backward:k2:x=8": {"n": 2}})
        >>> sorted(a.kernels_of(b, {"backward"}).kernels)
        ['backward:k2:x=8', 'forward:k0:x=8']
        """
        graphs = set(graphs)

        def keep(tbl, inside):
            return {
                k: v for k, v in tbl.kernels.items() if (k.split(":", 1)[0] in graphs) == inside
            }

        return replace(self, kernels=keep(self, False) | keep(other, True))

    # -- files ---------------------------------------------------------------------------------
    def to_json(self) -> dict:
        return {
            "schema": SCHEMA,
            "device": self.device,
            "target": self.target,
            "precision": self.precision,
            "versions": dict(sorted(self.versions.items())),
            "gemms": {
                k: {"kind": e.kind, "config": dict(e.config), "ms": dict(e.ms)}
                | ({"op_check": e.op_check} if e.op_check else {})
                for k, e in sorted(self.gemms.items())
            },
            "kernels": {k: self.kernels[k] for k in sorted(self.kernels)},
        }

    def save(self, path: str | os.PathLike) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=1) + "\n")
        os.replace(tmp, path)
        return path

    @classmethod
    def from_json(cls, data, where: str = "the tuning table") -> "TuningTable":
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            found = data.get("schema") if isinstance(data, dict) else type(data).__name__
            raise MiraiError(
                f"{where} is not a mirai tuning table of schema {SCHEMA} (found {found!r}); "
                "write it with mirai tune"
            )
        try:
            gemms = {
                str(k): GemmEntry(
                    kind=v["kind"],
                    config={str(c): int(n) for c, n in v.get("config", {}).items()},
                    ms={str(c): float(n) for c, n in v.get("ms", {}).items()},
                    op_check=dict(v.get("op_check") or {}),
                )
                for k, v in data["gemms"].items()
            }
            kernels = {str(k): _kernel_config(v) for k, v in data["kernels"].items()}
            return cls(
                device=str(data["device"]),
                target=str(data["target"]),
                precision=str(data["precision"]),
                versions={str(k): str(v) for k, v in data.get("versions", {}).items()},
                gemms=gemms,
                kernels=kernels,
            )
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise MiraiError(f"{where} is malformed: {type(err).__name__}: {err}") from None

    @classmethod
    def load(cls, path: str | os.PathLike) -> "TuningTable":
        path = Path(path)
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            raise MiraiError(f"no tuning table at {path}; write one with mirai tune") from None
        except (OSError, ValueError) as err:
            raise MiraiError(f"cannot read the tuning table {path}: {err}") from None
        return cls.from_json(data, where=str(path))


def _kernel_config(value) -> dict:
    """A kernel's launch configuration as capture records it (mirai.export.capture.wrapper)."""
    config = {
        "kwargs": {str(k): int(v) for k, v in value["kwargs"].items()},
        "num_warps": int(value["num_warps"]),
        "num_stages": int(value["num_stages"]),
    }
    if not config["kwargs"]:
        raise ValueError("a kernel configuration without block sizes")
    return config


_SIZE_HINTS = re.compile(r"size_hints\s*=\s*(\{[^{}]*\})")


def size_hints(source: str) -> dict:
    """The size hints in a kernel module's heuristics decorator ({} for a template).

    >>> size_hints("@triton_heuristics.reduction(size_hints={'x': 64, 'r0_': 2048}, reduction_hint=1)")
    {'x': 64, 'r0_': 2048}
    """
    found = _SIZE_HINTS.search(source)
    if found is None:
        return {}
    try:
        hints = ast.literal_eval(found.group(1))
    except (ValueError, SyntaxError):
        return {}
    return {str(k): int(v) for k, v in hints.items()} if isinstance(hints, dict) else {}


def table_from_capture(capture, device: str) -> TuningTable:
    """The choices a GPU capture made (kernel configurations, GEMM kinds), as a table.

    Kernels whose configuration was not measured (a single candidate, or a GPU-less pick) are
    left out, so a table never passes a heuristic off as a measurement; GEMMs likewise."""
    kernels = {}
    for graph, found in capture.kernels.items():
        graph = table_graph(graph, capture.backward is not None)
        for name, kernel in found.items():
            if not kernel.config_origin.startswith("autotuned"):
                continue
            hints = size_hints(kernel.source)
            if not hints:
                continue  # a template: its GEMM entry carries its blocks
            kernels[kernel_key(graph, name, hints)] = _kernel_config(kernel.config)
    gemms = {}
    for entries in capture.gemm_timings.values():
        for entry in entries:
            if entry.get("source") != "measured" or "key" not in entry:
                continue
            chosen = entry["chosen"]
            config = dict(entry.get("config") or {}) if chosen == "triton" else {}
            if chosen == "triton" and sorted(config) != sorted(TEMPLATE_KEYS):
                continue  # a template of another family: nothing a GPU-less build could match
            gemms[entry["key"]] = GemmEntry(kind=chosen, config=config, ms=dict(entry["ms"]))
    return TuningTable(
        device=device,
        target=capture.target,
        precision=capture.precision,
        versions=dict(capture.versions or {}),
        gemms=gemms,
        kernels=kernels,
    )


def tune(
    fn,
    samples: dict,
    *,
    target: str = "sm_90",
    precision: str | None = None,
    gemm: str | None = None,
    fuse=None,
    builds: dict | None = None,
    op_check: bool = True,
    progress: bool = True,
) -> TuningTable:
    """Capture `fn` on this machine's GPU with each of `samples` ({label: sample inputs}, e.g.
    {"batch 64": [...]}) and return what autotuning chose, all of them in one table. `builds`
    ({label: folder}) also writes the GPU build of each, as `mirai.build` on this GPU would.
    `fuse` names the graph-level fusions the builds to be made from the table will use (None: as
    mirai.build's default for `fn`).

    With `op_check`, where autotuning kept Triton templates the op is built a second time with
    every GEMM in cuBLAS, both builds' forward and backward ops are timed side by side, and a
    graph keeps its templates only if its op ran faster with them (mirai.export.opcheck)."""
    import tempfile

    from mirai.export.build import build
    from mirai.export.capture import capture, use_gpu
    from mirai.export.capture.inductor import DEFAULT_GEMM
    from mirai.export.progress import BuildProgress
    from mirai.gpu.precision import DEFAULT as DEFAULT_PRECISION
    from mirai.gpu.targets import get_target

    if not use_gpu(None):
        raise MiraiError(
            "mirai tune measures on a GPU, and torch sees none here; run it on a machine with "
            "the GPU the ops will run on, then build anywhere with mirai build --tuning FILE"
        )
    import torch

    from mirai.export import fusions

    device = torch.cuda.get_device_name()
    tgt = get_target(target)
    fuse = fusions.default(fn) if fuse is None else fusions.check(fuse)
    table = None
    with BuildProgress(progress) as show, tempfile.TemporaryDirectory(prefix="mirai-tune-") as tmp:
        for number, (label, inputs) in enumerate(samples.items()):
            work = Path(tmp) / str(number)  # this sample's own folders
            options = dict(
                precision=precision or DEFAULT_PRECISION,
                gpu=True,
                gemm=gemm or DEFAULT_GEMM,
                fuse=fuse,
            )
            folder = (builds or {}).get(label) or (work / "tuned" if op_check else None)
            with show.stage(f"autotune {fn.name} ({label}) on {device}"):
                if folder is not None:
                    built = build(fn, inputs, folder, target=tgt.name, progress=False, **options)
                    cap = built.capture
                else:
                    cap = capture(fn, inputs, target=tgt, **options)
            found = table_from_capture(cap, device)
            if op_check and any(e.kind == "triton" for e in found.gemms.values()):
                found = _checked_in_op(fn, inputs, folder, cap, found, work, tgt, options, show)
            show.note(
                f"{label}: {len(found.kernels)} kernel configurations, "
                f"{len(found.gemms)} GEMMs ("
                + ", ".join(
                    f"{sum(e.kind == k for e in found.gemms.values())} {k}" for k in GEMM_KINDS
                )
                + ")"
            )
            table = found if table is None else table.merged(found)
    if table is None:
        raise MiraiError("nothing to tune: no sample inputs given")
    return table


def _checked_in_op(fn, inputs, folder, cap, found, work, tgt, options, show) -> TuningTable:
    """`found` after the whole-op check of its templates against a build with cuBLAS only."""
    from mirai.export import opcheck
    from mirai.export.build import build

    plain = work / "cublas"
    with show.stage(f"build {fn.name} with every GEMM in cuBLAS, to check the templates"):
        built = build(
            fn, inputs, plain, target=tgt.name, progress=False, **{**options, "gemm": "cublas"}
        )
    with show.stage("time both builds' ops side by side (GPU time, as CUDA graphs)"):
        times = opcheck.op_times({"table": folder, "cublas": plain}, inputs)
    by_graph = opcheck.by_graph(times, "table", "cublas")
    checked = found.op_checked(opcheck.graph_gemm_keys(cap), by_graph)
    turned_back = {graph for graph, rounds in by_graph.items() if not templates_won(rounds)}
    checked = checked.kernels_of(
        table_from_capture(built.capture, found.device),
        {table_graph(graph, cap.backward is not None) for graph in turned_back},
    )
    for graph, rounds in by_graph.items():
        ms = op_check_record(rounds)
        verdict = "turned back to cuBLAS" if graph in turned_back else "kept"
        show.note(
            f"{graph} op, GPU time: {ms['table']:.4f} ms with the templates (rounds "
            f"{min(rounds['table']):.4f}-{max(rounds['table']):.4f}), {ms['cublas']:.4f} ms with "
            f"cuBLAS only ({min(rounds['cublas']):.4f}-{max(rounds['cublas']):.4f}): templates "
            f"{verdict}"
        )
    return checked
