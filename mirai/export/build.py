"""`mirai.build`: the export pipeline, capture -> compile -> render, orchestrated in one call."""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from mirai.errors import MiraiError
from mirai.export.capture.configs import ONLY_CONFIG
from mirai.export.capture.inductor import DEFAULT_GEMM
from mirai.gpu.precision import DEFAULT as DEFAULT_PRECISION


@dataclass
class BuildResult:
    """What `mirai.build` produced: the output folder, its files, and the capture behind them."""

    output_dir: Path
    files: list[Path]
    capture: object = field(repr=False)
    compiled: dict = field(repr=False)
    timings: dict = field(default_factory=dict)

    @property
    def ops(self) -> list[str]:
        return sorted(
            p.name[: -len("_launch.h")] for p in self.files if p.name.endswith("_launch.h")
        )


def _source(fn) -> dict | None:
    """Where the function was defined, so `mirai verify DIR` can find its reference."""
    import inspect

    try:
        path = inspect.getsourcefile(fn.fn)
    except TypeError:
        return None
    return {"file": str(Path(path).resolve()), "function": fn.fn.__name__} if path else None


def _check_output_dir(output_dir: Path) -> None:
    try:
        output_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=output_dir, prefix=".mirai-write-test-"):
            pass
    except OSError as err:
        raise MiraiError(f"output directory {str(output_dir)!r} is not writable: {err}") from None


def _one_variant_note(cap, sample_inputs) -> str:
    """What a dynamic build without buckets should tell its user: one variant serves every batch.
    The capture has checked `sample_inputs` (tensors, one per input), so each symbol's sample size
    is there to read."""
    batches = sorted({int(sample_inputs[index].shape[dim]) for index, dim in cap.symbols.values()})
    at = f" ({', '.join(map(str, batches))})" if batches else ""
    return (
        f"dynamic, one variant: every batch runs the kernels and configurations chosen at the "
        f"sample batch{at}; batches far from it may run slower than they could, and buckets "
        f"(--buckets 64,512,...) give each range of batches its own"
    )


def build(
    fn,
    sample_inputs,
    output_dir: str | os.PathLike = "./generated",
    dynamic=False,
    *,
    target: str | list[str] = "sm_90",
    precision: str = DEFAULT_PRECISION,
    gpu: bool | None = None,
    ptxas: str | None = None,
    ptx_version: int | None = None,
    gemm: str = DEFAULT_GEMM,
    tuning=None,
    fuse=None,
    buckets=None,
    inference: bool = False,
    progress: bool = True,
    frameworks=("tf",),
) -> BuildResult:
    """Export a @mirai.op function as TensorFlow custom ops backed by Triton kernels.

    `sample_inputs` give shapes and dtypes (CPU tensors are fine on a machine without a GPU).
    `dynamic=True` makes the leading (batch) dimension dynamic: one op serves every batch size.
    `target` names the GPU architecture (e.g. "sm_90"), or several ("sm_80,sm_90" or a list): the op then
    embeds a cubin for each, and picks the one for the GPU it runs on (PTX as fallback). `precision`: "tf32" (default) or "ieee" for
    float32 matmuls; "fp16" or "bf16" build ops whose floating inputs and outputs are of that dtype.
    The assets folder is named after it. `ptxas` is the ptxas binary to use (default: Triton's);
    `ptx_version` the PTX ISA version to emit (e.g. 80 for drivers older than CUDA 12.8's). `gpu=None` captures on a GPU when torch sees one, else GPU-less.
    `gemm` says how matmuls run: "auto" (on a GPU, each GEMM timed as cuBLAS and as Triton templates,
    the faster kept; GPU-less, cuBLAS), "cublas" or "triton" (mirai.export.capture.inductor.GEMM_POLICIES);
    cuBLAS GEMMs run through cuBLASLt, opened at run time. `tuning` is a tuning table (a path, or a
    mirai.export.tuning.TuningTable) written by `mirai tune` on a GPU: a GPU-less build then takes
    the GEMM kinds and kernel configurations measured there wherever the table has them.
    `frameworks` names the front ends over the same launch code: "tf" (default: TensorFlow ops,
    build.sh, <name>_api.py) and "jax" (XLA FFI handlers, build_jax.sh, <name>_jax.py), e.g.
    ("tf", "jax") or "tf,jax" (mirai.export.frameworks).
    `fuse` names graph-level fusions (mirai.export.fusions.FUSIONS), e.g. ("gate_up",): patterns
    around GEMMs in the traced graph become one Triton kernel of our own before Inductor runs.
    None (default): the fusions measured faster for the kind of build
    (mirai.export.fusions.defaults: "gate_up_down" for training; "gate_up", "bmm_rows" and
    "gate_up_linear" for inference); () for none.
    `buckets` (dynamic builds only), batch sizes such as (64, 512, 2000, 8000): the graph is captured
    at each of them and the op runs, for batch b, the kernels captured at the bucket nearest to b
    (mirai.export.buckets); with a tuning table each bucket takes the table's choices at its batch.
    `inference=True` exports the forward alone, for serving: one op, `<name>InferenceFwd`, that
    writes only the function's outputs, where the forward op of a training build also writes the
    residuals its backward op reads (mirai.export.decorator.Op.for_inference).

    >>> result = mirai.build(pffn, sample_inputs=[x, w_gate, b_gate, w_up, b_up, w_down, b_down])  # doctest: +SKIP
    >>> result.ops  # doctest: +SKIP
    ['PffnBwd', 'PffnFwd']
    """
    from mirai.export.buckets import distinct_names, make_buckets, share_identical
    from mirai.export.capture import capture, capture_buckets, use_gpu
    from mirai.export.compile import CompileOptions, compile_all
    from mirai.export.decorator import Op
    from mirai.export.frameworks import FRAMEWORKS, parse
    from mirai.export.progress import BuildProgress
    from mirai.export.render import render
    from mirai.export.tuning import TuningTable
    from mirai.gpu.targets import capture_target, parse_targets

    if not isinstance(fn, Op):
        raise MiraiError(
            f"mirai.build needs a function decorated with @mirai.op(name=...); got {fn!r}"
        )
    if inference:
        fn = fn.for_inference()
    from mirai.export import fusions

    fuse = fusions.default(fn) if fuse is None else fusions.check(fuse)
    targets = parse_targets(target)
    frameworks = parse(frameworks)
    if buckets is not None and not dynamic:
        raise MiraiError(
            "buckets are for dynamic builds: pass dynamic=True (or --dynamic) with them"
        )
    tgt = capture_target(targets)
    if tuning is not None:
        tuning = tuning if isinstance(tuning, TuningTable) else TuningTable.load(tuning)
        gpu = False if gpu is None else gpu  # a table stands in for the GPU's measurements
    out = Path(output_dir)
    _check_output_dir(out)
    timings = {}

    mode = "on the GPU (torch.compile, max-autotune)" if use_gpu(gpu) else "GPU-less"
    names = ", ".join(t.name for t in targets)
    with BuildProgress(progress) as show:
        t = time.perf_counter()
        options = dict(
            target=tgt,
            dynamic=dynamic,
            precision=precision,
            gpu=gpu,
            gemm=gemm,
            tuning=tuning,
            fuse=fuse,
        )
        if buckets is None:
            with show.stage(f"capture {fn.name} for {names} {mode}"):
                variants = None
                cap = capture(fn, sample_inputs, **options)
            captures, labels = [cap], [""]
        else:
            sizes = ", ".join(str(b.sample) for b in make_buckets(buckets))
            with show.stage(f"capture {fn.name} for {names} {mode}, at batches {sizes}"):
                variants = distinct_names(capture_buckets(fn, sample_inputs, buckets, **options))
            captures = [c for _, c in variants]
            labels = [f"at batch {b.sample}: " for b, _ in variants]
            cap = captures[0]
        timings["capture"] = time.perf_counter() - t
        if dynamic and buckets is None:
            show.note(_one_variant_note(cap, sample_inputs))
        if any(cap.fused.values()):  # the manifest records the zeros too
            show.note("fused: " + ", ".join(f"{name} x{n}" for name, n in cap.fused.items() if n))
        for one, label in zip(captures, labels):
            if tuning is not None:
                show.note(label + tuning_coverage(one, tuning))
            counts = [
                f"{len(g.launches)} {g.name} kernel launches and {len(g.gemms)} GEMMs"
                for g in (one.forward, one.backward)
                if g is not None
            ]
            show.note(label + "captured " + "; ".join(counts))

        t = time.perf_counter()
        options = CompileOptions(ptxas=ptxas, ptx_version=ptx_version)
        kernels = {}
        for one in captures:
            for graph, found in one.kernels.items():
                kernels.setdefault(graph, {}).update(found)
        total = sum(len(k) for k in kernels.values()) * len(targets)
        with show.stage("compile", total=total) as step:
            compiled = compile_all(kernels, targets, progress=step.advance, options=options)
        if variants is not None:
            variants, compiled = share_identical(variants, compiled)
        else:  # two specializations of one user kernel may compile alike: one runs for both
            [(_, cap)], compiled = share_identical([(None, cap)], compiled)
        timings["compile"] = time.perf_counter() - t

        t = time.perf_counter()
        with show.stage("render"):
            files = render(
                cap,
                compiled,
                out,
                targets=[t.name for t in targets],
                defined_in=_source(fn),
                frameworks=frameworks,
                variants=variants,
            )
        timings["render"] = time.perf_counter() - t
        builds = " && ".join(FRAMEWORKS[f].build for f in frameworks)
        show.note(f"wrote {len(files)} files to {out}/ (build the ops with: cd {out} && {builds})")
    return BuildResult(output_dir=out, files=files, capture=cap, compiled=compiled, timings=timings)


def tuning_coverage(cap, tuning) -> str:
    """How much of a GPU-less build the tuning table decided: kernels and GEMMs, and the kernels
    with configurations to choose from that it had no entry for, by name (what to tune)."""
    kernels = [k for found in cap.kernels.values() for k in found.values()]
    tuned = sum(k.config_origin == tuning.origin for k in kernels)
    choices = [c for found in cap.gemm_timings.values() for c in found]
    from_table = sum(c.get("source") == tuning.origin for c in choices)
    note = (
        f"the {tuning.origin} set {tuned} of {len(kernels)} kernel configurations and "
        f"{from_table} of {len(choices)} GEMM choices; heuristics the rest"
    )
    measured_with = tuning.versions.get("torch")
    if measured_with and measured_with != cap.versions.get("torch"):
        # Inductor decides what it fuses around a template after the GEMM choice: another torch
        # can fuse an epilogue the table's template never ran with (bench/RESULTS-pffn.md)
        note += (
            f" (measured under torch {measured_with}, built under {cap.versions.get('torch')}: "
            "kernels fused otherwise than where the table was timed may not keep its times)"
        )
    missed = [
        f"{graph} {k.entry}"
        for graph, found in sorted(cap.kernels.items())
        for k in found.values()
        if k.config_origin not in (tuning.origin, ONLY_CONFIG)
    ]
    if missed:
        more = f" and {len(missed) - 3} more" if len(missed) > 3 else ""
        note += f"; not in the table: {', '.join(missed[:3])}{more}"
    return note
