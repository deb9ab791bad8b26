"""Benchmark of the explorer service on this machine: cold start, warm latency per IR type (p50/p95),
cached repeats, and throughput with 8 concurrent clients. Prints a Markdown table.

    .venv/bin/python bench/bench_explorer.py                # starts its own server (2 workers)
    .venv/bin/python bench/bench_explorer.py --iterations 5 --skip-slow

Warm requests each send a different code string (a trailing comment) so that neither the result cache
nor the Triton cache answers them; "cached repeat" sends one request over and over.
Targets (2-core machine): warm torch_mlir p50 <= 300 ms, cached repeat <= 10 ms, /version <= 5 s.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

sys.path.insert(0, str(ROOT))
from tests.explorer.explorer_samples import GUIDE_MODEL  # noqa: E402  (the guide's example model)

ADD_KERNEL = """
import torch
import triton
import triton.language as tl

@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)

x = torch.randn(4096, device="cuda")
out = torch.empty_like(x)
add_kernel[(4,)](x, x, out, 4096, BLOCK=1024)
"""

RAW_MLIR = "func.func @f(%a: i32) -> i32 {\n  return %a : i32\n}\n"

# (label, request fields, slow?)
CASES = [
    ("torch_script_graph_ir", {"code": GUIDE_MODEL, "ir_type": "torch_script_graph_ir"}, False),
    ("torch_mlir", {"code": GUIDE_MODEL, "ir_type": "torch_mlir"}, False),
    ("tosa_mlir", {"code": GUIDE_MODEL, "ir_type": "tosa_mlir"}, False),
    ("linalg_on_tensors_mlir", {"code": GUIDE_MODEL, "ir_type": "linalg_on_tensors_mlir"}, False),
    ("stablehlo_mlir", {"code": GUIDE_MODEL, "ir_type": "stablehlo_mlir"}, False),
    ("llvm_mlir", {"code": GUIDE_MODEL, "ir_type": "llvm_mlir"}, False),
    ("llvm_ir", {"code": GUIDE_MODEL, "ir_type": "llvm_ir"}, False),
    ("nvptx", {"code": GUIDE_MODEL, "ir_type": "nvptx"}, False),
    ("amdgpu", {"code": GUIDE_MODEL, "ir_type": "amdgpu"}, False),
    ("spirv", {"code": GUIDE_MODEL, "ir_type": "spirv"}, False),
    ("triton_ir", {"code": ADD_KERNEL, "ir_type": "triton_ir"}, False),
    ("triton_gpu_ir", {"code": ADD_KERNEL, "ir_type": "triton_gpu_ir"}, False),
    ("triton_llvm_ir", {"code": ADD_KERNEL, "ir_type": "triton_llvm_ir"}, False),
    ("triton_nvptx", {"code": ADD_KERNEL, "ir_type": "triton_nvptx"}, False),
    ("triton_amdgpu", {"code": ADD_KERNEL, "ir_type": "triton_amdgpu"}, False),
    ("raw_ir", {"code": RAW_MLIR, "ir_type": "raw_ir", "selected_language": "raw_ir"}, False),
    (
        "raw_ir + mlir_opt (2 stages, dump)",
        {
            "code": RAW_MLIR,
            "ir_type": "raw_ir",
            "selected_language": "raw_ir",
            "mlir_opt": "--canonicalize && --cse",
            "dump_after_each_opt": True,
        },
        False,
    ),
    (
        "triton_gpu_ir + triton_opt",
        {"code": ADD_KERNEL, "ir_type": "triton_gpu_ir", "triton_opt": "--tritongpu-coalesce"},
        False,
    ),
    ("inductor_output_code", {"code": GUIDE_MODEL, "ir_type": "inductor_output_code"}, True),
    ("mirai_tf_op", {"code": GUIDE_MODEL, "ir_type": "mirai_tf_op"}, True),
]


def post(url: str, body: dict, timeout: float = 600) -> tuple[dict, float]:
    data = json.dumps(body).encode()
    request = urllib.request.Request(
        url + "/generate_ir", data=data, headers={"Content-Type": "application/json"}
    )
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=timeout) as response:
        result = json.loads(response.read())
    return result, time.perf_counter() - started


def unique(fields: dict, tag: str) -> dict:
    """The request with a code string seen never before (a comment in the code's own syntax)."""
    comment = "//" if fields.get("selected_language") == "raw_ir" else "#"
    return {**fields, "code": fields["code"] + f"\n{comment} bench {tag} {time.time_ns()}\n"}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f}" if seconds >= 0.01 else f"{seconds * 1000:.1f}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(
    workers: int, cache_dir: str, extra: tuple[str, ...] = (), root: Path = ROOT
) -> tuple[subprocess.Popen, str, dict]:
    """A server of `root`'s mirai (another checkout of the project, for side-by-side runs) with
    `extra` flags; its process, URL and start-up timings."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [
        sys.executable,
        "-m",
        "mirai.explorer",
        "--port",
        str(port),
        "--workers",
        str(workers),
    ]
    command += ["--cache-dir", cache_dir, "--log-level", "warning", "--timeout", "600", *extra]
    started = time.perf_counter()
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.Popen(
        command, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    timings = {}
    while "version" not in timings or "ready" not in timings:
        if proc.poll() is not None:
            raise SystemExit(f"server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=1) as response:
                health = json.loads(response.read())
            timings.setdefault("version", time.perf_counter() - started)
            if health["workers_ready"] >= 1:
                timings.setdefault("first worker", time.perf_counter() - started)
            if health["workers_ready"] >= workers:
                timings["ready"] = time.perf_counter() - started
        except OSError:
            pass
        time.sleep(0.05)
    return proc, url, timings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=10, help="warm requests per IR type")
    parser.add_argument("--slow-iterations", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--skip-slow", action="store_true", help="skip inductor/mirai_tf_op")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="mirai-bench-") as cache_dir:
        proc, url, start = start_server(args.workers, cache_dir)
        try:
            rows = run_bench(url, args)
        finally:
            proc.terminate()
            proc.wait(30)
    print(
        f"# explorer bench ({args.workers} workers, {args.iterations} warm requests per IR type)\n"
    )
    print("| measurement | p50 ms | p95 ms | n | note |")
    print("|---|---:|---:|---:|---|")
    print(f"| cold start: /version answers | {ms(start['version'])} | | 1 | target <= 5000 |")
    print(f"| cold start: first worker warm | {ms(start['first worker'])} | | 1 | |")
    print(f"| cold start: all {args.workers} workers warm | {ms(start['ready'])} | | 1 | |")
    for label, values, note in rows:
        p50, p95 = percentile(values, 0.5), percentile(values, 0.95)
        print(f"| {label} | {ms(p50)} | {ms(p95)} | {len(values)} | {note} |")
    return 0


def run_bench(url: str, args) -> list[tuple[str, list[float], str]]:
    rows = []
    for label, fields, slow in CASES:
        if slow and args.skip_slow:
            continue
        count = args.slow_iterations if slow else args.iterations
        for worker in range(args.workers):  # first use of a code path in each worker
            post(url, unique(fields, f"warm-up {worker}"))
        values, note = [], ""
        for i in range(count):
            result, elapsed = post(url, unique(fields, str(i)))
            if result["status"] != "ok":
                note = f"error: {result['message'][:60]}"
                break
            values.append(elapsed)
        if label == "torch_mlir":
            note = note or "target p50 <= 300"
        rows.append((f"warm {label}", values or [float("nan")], note))

    repeat = {"code": GUIDE_MODEL, "ir_type": "torch_mlir"}
    post(url, repeat)
    cached = [post(url, repeat)[1] for _ in range(50)]
    rows.append(("cached repeat (torch_mlir)", cached, "target p50 <= 10"))

    clients, per_client = 8, 4

    def client(index: int) -> list[float]:
        return [post(url, unique(repeat, f"c{index}-{j}"))[1] for j in range(per_client)]

    started = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        latencies = [t for batch in pool.map(client, range(clients)) for t in batch]
    wall = time.perf_counter() - started
    throughput = len(latencies) / wall
    rows.append(
        (
            "8 concurrent clients, torch_mlir (latency)",
            latencies,
            f"throughput {throughput:.1f} req/s over {wall:.1f} s",
        )
    )
    return rows


if __name__ == "__main__":
    sys.exit(main())
