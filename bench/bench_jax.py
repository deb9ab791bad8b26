"""Benchmark of the exported pffn through JAX against the same function in jax.numpy under jax.jit.

On a machine without a GPU, make the GPU-less builds (static at each batch, one dynamic):

    python bench/bench_jax.py --prepare jax-builds/

On the CUDA machine (jax with its CUDA plugin, torch, g++; from the repository root):

    python bench/bench_jax.py --builds jax-builds/ [--batches 64,512,2000,8000]

For each batch size (E=8, D=256, H=1024, float32) it times, on the same inputs and the same GPU,
the forward and the forward+backward (jax.vjp) of:

- "generated": the static build for that batch (DIR/pffn/static-B<batch>), through its XLA FFI
  handlers (compiled there by build_jax.sh) and jax.custom_vjp, under jax.jit;
- "dynamic": the one dynamic build (DIR/pffn/dynamic), serving every batch;
- "jnp": the same function written in jax.numpy, compiled by jax.jit (XLA's own kernels and its
  GEMM library; JAX's default float32 matmul precision, which lets XLA use TF32 on the GPU).

Times are milliseconds per call: calls queued back to back, jax.block_until_ready after the last,
the median of several such runs (JAX runs on its own streams, so CUDA events on torch's stream would
not see its work). Before timing, the generated outputs are compared with jnp's. Prints Markdown and
records it in bench/RESULTS-jax.md (and $OUT), earlier results kept below.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from datetime import date
from pathlib import Path

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))

from results import record  # noqa: E402  (bench/results.py)

RESULTS = ROOT / "bench" / "RESULTS-jax.md"
TITLE = "# pffn through JAX"


def use_cublaslt() -> None:
    """Name a cuBLASLt for the launch code where none is on the library path (the nvidia-cublas
    wheels, the CUDA toolkit: bench/bench_host_time.py's search), unless MIRAI_CUBLASLT is set."""
    if "MIRAI_CUBLASLT" not in os.environ:
        from bench_host_time import find_cublaslt

        found = find_cublaslt()
        if found:
            os.environ["MIRAI_CUBLASLT"] = found


def pffn_jnp(inputs, w_gate, b_gate, w_up, b_up, w_down, b_down):
    """examples/pffn.py's pffn in jax.numpy."""
    import jax
    import jax.numpy as jnp

    x = jnp.swapaxes(inputs, 0, 1)  # (E, B, D)
    gates = jax.nn.silu(jnp.einsum("ebd,edh->ebh", x, w_gate) + b_gate[:, None, :])
    vals = jnp.einsum("ebd,edh->ebh", x, w_up) + b_up[:, None, :]
    out = jnp.einsum("ebh,ehd->ebd", gates * vals, w_down) + b_down[:, None, :]
    return jnp.swapaxes(out, 0, 1)


def jitted(f):
    """(forward, forward+backward) of `f` under jax.jit."""
    import jax

    def forward_backward(args, grad):
        out, vjp = jax.vjp(f, *args)
        return out, vjp(grad)

    return jax.jit(f), jax.jit(forward_backward)


def milliseconds(call, calls: int = 50, runs: int = 7) -> float:
    """Median milliseconds per call of `call()` (a jax computation), queued back to back."""
    import jax

    for _ in range(5):
        jax.block_until_ready(call())
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        for _ in range(calls - 1):
            call()
        jax.block_until_ready(call())
        samples.append((time.perf_counter() - start) / calls * 1e3)
    return statistics.median(samples)


def rel_err(got, ref) -> float:
    import numpy as np

    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    return float(np.linalg.norm(got - ref) / np.linalg.norm(ref))


def prepare(out: Path, batches) -> None:
    import mirai
    import pffn as example

    for batch, dynamic in [(b, False) for b in batches] + [(batches[-1], True)]:
        folder = out / "pffn" / ("dynamic" if dynamic else f"static-B{batch}")
        mirai.build(
            example.pffn,
            example.sample_inputs(batch),
            output_dir=folder,
            dynamic=dynamic,
            gpu=False,
            progress=False,
            frameworks=("tf", "jax"),
        )
        print(f"built {folder}", flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", default="64,512,2000,8000")
    parser.add_argument("--builds", type=Path, help="DIR/pffn/static-B<batch>, DIR/pffn/dynamic")
    parser.add_argument("--prepare", type=Path, help="only make GPU-less builds into this folder")
    args = parser.parse_args(argv)
    batches = [int(b) for b in args.batches.split(",")]
    if args.prepare:
        prepare(args.prepare, batches)
        return 0
    if args.builds is None:
        parser.error("--builds DIR is needed (make it with --prepare DIR on any machine)")

    import jax
    import jax.numpy as jnp
    import numpy as np

    import pffn as example
    from mirai.export.frameworks import jax_ffi

    if jax.default_backend() != "gpu":
        print(f"bench_jax: jax runs on {jax.default_backend()}, not a GPU", file=sys.stderr)
        return 2
    folders = {
        "generated": {b: args.builds / "pffn" / f"static-B{b}" for b in batches},
        "dynamic": {b: args.builds / "pffn" / "dynamic" for b in batches},
    }
    folders = {
        name: {b: f for b, f in by_batch.items() if (f / "manifest.json").exists()}
        for name, by_batch in folders.items()
    }
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=max(1, (os.cpu_count() or 2) // 2)) as pool:
        list(pool.map(jax_ffi.build, {f for by in folders.values() for f in by.values()}))
    use_cublaslt()
    functions = {
        name: {b: jitted(jax_ffi.load(f).pffn) for b, f in by_batch.items()}
        for name, by_batch in folders.items()
    }
    names = [n for n in ("generated", "dynamic") if functions[n]]
    reference = jitted(pffn_jnp)
    fwd_rows, fb_rows, errors = [], [], []
    for batch in batches:
        inputs = [jnp.asarray(t.numpy()) for t in example.sample_inputs(batch)]
        grad = jnp.asarray(
            np.random.default_rng(batch).standard_normal((batch, example.E, example.D), np.float32)
        )
        ref_fwd = milliseconds(lambda: reference[0](*inputs))
        ref_fb = milliseconds(lambda: reference[1](inputs, grad))
        want = reference[0](*inputs)
        gen_fwd, gen_fb = {}, {}
        for name in names:
            fns = functions[name].get(batch)
            if fns is None:
                continue
            errors.append(f"{name} B={batch}: {rel_err(fns[0](*inputs), want):.1e}")
            gen_fwd[name] = milliseconds(lambda: fns[0](*inputs))
            gen_fb[name] = milliseconds(lambda: fns[1](inputs, grad))

        def cell(times, name, peer):
            return f"{times[name]:.3f} ({peer / times[name]:.2f}x)" if name in times else "-"

        fwd_rows.append(
            f"| {batch} | "
            + " | ".join(cell(gen_fwd, n, ref_fwd) for n in names)
            + f" | {ref_fwd:.3f} |"
        )
        fb_rows.append(
            f"| {batch} | "
            + " | ".join(cell(gen_fb, n, ref_fb) for n in names)
            + f" | {ref_fb:.3f} |"
        )
        print(fwd_rows[-1], fb_rows[-1], sep="\n", flush=True)

    head = " | ".join(f"mirai {n}" for n in names)
    device = jax.devices()[0]
    text = (
        f"{TITLE}\n\n{date.today().isoformat()}: {device.device_kind}, jax {jax.__version__}; "
        "examples/pffn.py, E=8 D=256 H=1024, float32 (the builds: tf32, GPU-less). Milliseconds per "
        "call under jax.jit (calls queued back to back, median of 7 runs of 50); in brackets jnp / "
        "mirai (above 1: mirai's op is faster). mirai generated = the static build for the batch, "
        "dynamic = one build for every batch, both through their XLA FFI handlers; jnp = the same "
        "function in jax.numpy compiled by XLA (default matmul precision).\n\n"
        f"Forward:\n\n| B | {head} | jnp (jax.jit) |\n|---|{'---|' * len(names)}---|\n"
        + "\n".join(fwd_rows)
        + f"\n\nForward + backward (jax.vjp):\n\n| B | {head} | jnp (jax.jit) |\n"
        f"|---|{'---|' * len(names)}---|\n"
        + "\n".join(fb_rows)
        + "\n\nForward outputs against jnp's (relative error by norm): "
        + "; ".join(errors)
        + ".\n"
    )
    print(text)
    record(RESULTS, text, TITLE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
