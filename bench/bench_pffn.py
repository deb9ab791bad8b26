"""Benchmark of the exported pffn against PyTorch on the same GPU, in the same process.

    python bench/bench_pffn.py [--batches 64,2000,8000] [--builds /tmp/mirai-gpu-check]

For each batch size (E=8, D=256, H=1024, tf32): time per call of the generated forward and
forward+backward (the launch code the TensorFlow ops wrap, called through ctypes) against eager PyTorch
and torch.compile (max-autotune, no CUDA graphs: kernels against kernels), measured with triton.testing.do_bench on identical inputs. Then the
host time per call at tiny shapes (B=8), where launch overhead dominates. Prints a Markdown table and
writes it to bench/RESULTS-pffn.md (and $OUT when set).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))


def build(batch: int, folder: Path) -> Path:
    import pffn as example

    import mirai

    if not (folder / "manifest.json").exists():
        mirai.build(
            example.pffn,
            example.sample_inputs(batch, device="cuda"),
            output_dir=folder,
            gpu=True,
            progress=False,
        )
    return folder


def timed(fn) -> float:
    from triton.testing import do_bench

    return do_bench(fn, warmup=25, rep=100)


def host_time(fn, calls: int = 300) -> float:
    """Microseconds of host time per call: enqueue `calls` calls and measure before synchronizing."""
    import torch

    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    elapsed = time.perf_counter() - start
    torch.cuda.synchronize()
    return elapsed / calls * 1e6


def main(argv=None) -> int:
    import torch

    import pffn as example
    from mirai.export.launch import GeneratedFunction

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", default="64,2000,8000")
    parser.add_argument("--builds", type=Path, default=Path("/tmp/mirai-gpu-check"))
    args = parser.parse_args(argv)
    torch.set_float32_matmul_precision("high")
    compiled = torch.compile(example.pffn.fn, mode="max-autotune-no-cudagraphs")
    rows = []
    for batch in [int(b) for b in args.batches.split(",")]:
        gen = GeneratedFunction(build(batch, args.builds / f"gpu-B{batch}"))
        inputs = [t.requires_grad_(True) for t in example.sample_inputs(batch, device="cuda")]
        plain = [t.detach() for t in inputs]
        grad = torch.randn(batch, example.E, example.D, device="cuda")

        def eager_fb():
            y = example.pffn.fn(*inputs)
            torch.autograd.grad(y, inputs, grad)

        def compiled_fb():
            y = compiled(*inputs)
            torch.autograd.grad(y, inputs, grad)

        with torch.no_grad():
            t_eager = timed(lambda: example.pffn.fn(*plain))
            t_comp = timed(lambda: compiled(*plain))
        t_gen = timed(lambda: gen(plain))
        t_eager_fb = timed(eager_fb)
        t_comp_fb = timed(compiled_fb)
        t_gen_fb = timed(lambda: gen.forward_backward(plain, [grad]))
        flops = 2 * 3 * batch * example.E * example.D * example.H
        rows.append(
            f"| {batch} | {t_gen:.3f} | {t_comp:.3f} | {t_eager:.3f} | {t_comp / t_gen:.2f} | "
            f"{flops / t_gen / 1e9:.0f} | {t_gen_fb:.3f} | {t_comp_fb:.3f} | {t_eager_fb:.3f} | "
            f"{t_comp_fb / t_gen_fb:.2f} |"
        )
        print(rows[-1], flush=True)

    tiny = 8
    gen = GeneratedFunction(build(tiny, args.builds / f"gpu-B{tiny}"))
    plain = example.sample_inputs(tiny, device="cuda")
    with torch.no_grad():
        h_eager = host_time(lambda: example.pffn.fn(*plain))
        compiled(*plain)
        h_comp = host_time(lambda: compiled(*plain))
    h_gen = host_time(lambda: gen(plain))
    text = (
        f"# pffn benchmark\n\n{torch.cuda.get_device_name()}, torch {torch.__version__}, "
        "E=8 D=256 H=1024, tf32; milliseconds per call (triton do_bench); ratio = torch.compile / "
        "generated (above 1: generated is faster).\n\n"
        "| B | generated fwd | torch.compile fwd | eager fwd | ratio | generated TFLOP/s | "
        "generated fwd+bwd | torch.compile fwd+bwd | eager fwd+bwd | ratio |\n"
        "|---|---|---|---|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n\n"
        f"Host time per forward call at B={tiny} (microseconds): generated launch code through "
        f"ctypes {h_gen:.0f}, torch.compile {h_comp:.0f}, eager {h_eager:.0f}.\n"
    )
    print(text)
    (ROOT / "bench" / "RESULTS-pffn.md").write_text(text)
    if os.environ.get("OUT"):
        (Path(os.environ["OUT"]) / "RESULTS-pffn.md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
