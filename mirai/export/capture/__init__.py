"""Capture: a @mirai.op function and sample inputs -> forward/backward KernelGraphs and Triton kernels.

Two ways, one result:
- on a machine with a CUDA GPU, real torch.compile (max-autotune) in this process;
- without one, GPU-less in a worker process that makes a CPU-only torch believe the named target exists
  (mirai.export.capture.gpuless); kernel configurations then come from heuristics instead of measurements.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import pickle
import subprocess
import sys
import tempfile

from mirai.errors import CaptureError, MiraiError
from mirai.gpu.precision import DEFAULT as DEFAULT_PRECISION
from mirai.gpu.precision import get as get_precision
from mirai.export.capture.inductor import DEFAULT_GEMM, gemm_policy
from mirai.export.graph import Capture
from mirai.gpu.targets import Target, get_target


def use_gpu(gpu: bool | None) -> bool:
    """Whether to capture on a real GPU: `gpu` if given, else whether torch sees one."""
    if gpu is not None:
        return gpu
    if os.environ.get("MIRAI_GPULESS") == "1":
        return False
    import torch

    return torch.cuda.is_available()


def capture(
    op,
    sample_inputs,
    *,
    target: str | Target = "sm_90",
    dynamic=False,
    precision: str = DEFAULT_PRECISION,
    gpu: bool | None = None,
    timeout: float = 1800,
    gemm: str = DEFAULT_GEMM,
    tuning=None,
    fuse=(),
) -> Capture:
    """Capture `op` for `target`; `gemm` names the GEMM policy (GEMM_POLICIES). `tuning`, a
    mirai.export.tuning.TuningTable, gives a GPU-less capture the choices measured on a GPU.
    `fuse` names graph-level fusions applied to the traced graph first (mirai.export.fusions).

    >>> cap = capture(pffn, samples, target="sm_90")  # doctest: +SKIP
    >>> [launch.kernel for launch in cap.forward.launches]  # doctest: +SKIP
    """
    job = _Job.prepare(
        op, sample_inputs, target, dynamic, precision, gpu, timeout, gemm, tuning, fuse
    )
    return job.run(job.traced)


def capture_buckets(op, sample_inputs, buckets, *, dynamic=True, **options) -> list:
    """Capture dynamic `op` once per bucket (mirai.export.buckets): the one trace, with the batch
    symbol's size hint set to each bucket's sample. `options` are `capture`'s. Returns (Bucket,
    Capture) pairs in bucket order. GPU-less captures run in parallel worker processes."""
    from concurrent.futures import ThreadPoolExecutor

    from mirai.export.buckets import dispatch_symbol, make_buckets

    if not dynamic:
        raise MiraiError("buckets are for dynamic builds: pass dynamic=True (or --dynamic)")
    bound = inspect.signature(capture).bind(op, sample_inputs, dynamic=dynamic, **options)
    bound.apply_defaults()  # capture's signature holds the options and their defaults
    job = _Job.prepare(**bound.arguments)
    symbol = dispatch_symbol(job.traced.symbols)
    chosen = make_buckets(buckets)
    traces = [
        dataclasses.replace(job.traced, hints={**job.traced.hints, symbol: b.sample})
        for b in chosen
    ]
    if job.on_gpu:
        captures = [job.run(t) for t in traces]
    else:
        workers = max(1, min(len(traces), (os.cpu_count() or 2) // 2, 4))
        with ThreadPoolExecutor(workers, thread_name_prefix="mirai-capture") as pool:
            captures = list(pool.map(job.run, traces))
    for bucket, cap in zip(chosen, captures):
        lowest = cap.symbol_ranges.get(symbol, (0, None))[0]
        if bucket.sample < lowest:
            raise MiraiError(
                f"bucket {bucket.sample} is below {lowest}, the smallest {symbol} the dynamic op "
                "serves"
            )
    return list(zip(chosen, captures))


@dataclasses.dataclass(frozen=True)
class _Job:
    """A traced function and how to capture it: the part of a capture shared by its buckets."""

    traced: object
    on_gpu: bool
    target: Target
    precision: str
    name: str
    timeout: float
    gemm: str
    tuning: object
    versions: dict
    fused: dict

    @classmethod
    def prepare(
        cls, op, sample_inputs, target, dynamic, precision, gpu, timeout, gemm, tuning, fuse
    ):
        """Check `capture`'s options, trace `op` once and apply the fusions named in `fuse`."""
        from mirai.export import fusions
        from mirai.gpu import versions
        from mirai.export.capture.trace import trace

        found = versions.check()
        tgt = target if isinstance(target, Target) else get_target(target)
        if tgt.backend != "cuda":
            raise MiraiError(
                f"capture generates CUDA kernels; {tgt.name} is a {tgt.backend} target "
                "(e.g. sm_90, sm_80)"
            )
        precision = get_precision(precision).name
        gemm = gemm_policy(gemm).name
        on_gpu = use_gpu(gpu)
        if tuning is not None:
            if on_gpu:
                raise MiraiError(
                    "a tuning table is for GPU-less builds; on a GPU the build measures for itself "
                    "(pass gpu=False, or --gpuless, to build from the table)"
                )
            tuning.check(tgt.name, precision)
        fuse = fusions.check(fuse)
        traced = trace(op, get_precision(precision).cast(sample_inputs), dynamic)
        traced, fused = fusions.fuse(traced, fuse)
        return cls(
            traced, on_gpu, tgt, precision, op.name, timeout, gemm, tuning, dict(found), fused
        )

    def run(self, traced) -> Capture:
        """Capture `traced` (this job's trace, or one with other size hints)."""
        if self.on_gpu:
            from mirai.export.capture.core import capture_graphs

            result = capture_graphs(
                traced, self.target, self.precision, gpu=True, name=self.name, gemm=self.gemm
            )
        else:
            result = _capture_in_worker(
                traced, self.target, self.precision, self.name, self.timeout, self.gemm, self.tuning
            )
        return dataclasses.replace(result, versions=dict(self.versions), fused=dict(self.fused))


def _capture_in_worker(
    traced, target: Target, precision: str, name: str, timeout: float, gemm: str, tuning
) -> Capture:
    from mirai.export.capture import user_ops

    own_ops = user_ops.sources(pickle.loads(traced.graph_module))
    with tempfile.TemporaryDirectory(prefix="mirai-capture-") as tmp:
        request = os.path.join(tmp, "request.pkl")
        result_path = os.path.join(tmp, "result.pkl")
        with open(request, "wb") as f:
            pickle.dump(
                {
                    "trace": traced,
                    "target": target,
                    "precision": precision,
                    "name": name,
                    "gemm": gemm,
                    "tuning": tuning,
                    "user_ops": own_ops,
                },
                f,
            )
        env = dict(os.environ)
        env.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(tmp, "inductor"))
        env.setdefault("TRITON_CACHE_DIR", os.path.join(tmp, "triton"))
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "mirai.export.capture.worker", request, result_path],
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            raise CaptureError(f"GPU-less capture of {name} timed out after {timeout:g}s") from None
        if not os.path.exists(result_path):
            raise CaptureError(
                f"the GPU-less capture worker for {name} died (exit {proc.returncode}):\n"
                f"{proc.stderr[-4000:]}"
            )
        with open(result_path, "rb") as f:
            result = pickle.load(f)
    if "capture" in result:
        return result["capture"]
    if isinstance(result.get("error"), Exception) and not isinstance(
        result["error"], (AssertionError, KeyError)
    ):
        from mirai.errors import MiraiError

        if isinstance(result["error"], MiraiError):
            raise result["error"]
    raise CaptureError(
        f"GPU-less capture of {name} failed: {result['message']}\n{result['traceback'][-6000:]}"
    )


def inductor_output_code(
    op,
    sample_inputs,
    *,
    target: str = "sm_90",
    dynamic=False,
    precision: str = DEFAULT_PRECISION,
    gpu: bool | None = None,
    gemm: str = DEFAULT_GEMM,
) -> list[str]:
    """The Python that Inductor generates for `op` on `target`: forward, then backward (if any)."""
    cap = capture(
        op, sample_inputs, target=target, dynamic=dynamic, precision=precision, gpu=gpu, gemm=gemm
    )
    return [g.source for g in (cap.forward, cap.backward) if g is not None]
