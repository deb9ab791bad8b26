"""Benchmark of the explorer service on this machine: cold start, warm latency per IR type (p50/p95),
cached repeats, and throughput with 8 concurrent clients. Prints a Markdown table.

    .venv/bin/python bench/bench_explorer.py                # starts its own server (2 workers)
    .venv/bin/python bench/bench_explorer.py --iterations 5 --skip-slow
    .venv/bin/python bench/bench_explorer.py --scale --record   # embedded vs broker, 1/2/4 workers

`--scale` runs one request mix (torch_mlir, triton_ir, raw_ir through mlir-opt; 8 concurrent clients,
code never seen before) against the embedded server with 1, 2 and 4 workers and against broker mode
(a redis-server, one `mirai serve --broker` replica, 1, 2 and 4 `mirai worker --workers 1`
processes), side by side: throughput and p50/p95. `--record` writes the table, with versions and
date, into bench/RESULTS-explorer.md (section "Past one machine").

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
import textwrap
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


def serve_command(port: int, workers: int) -> list[str]:
    """`mirai serve` (embedded) on `port` with `workers` workers."""
    return [sys.executable, "-m", "mirai.explorer", "--port", str(port), "--workers", str(workers)]


def start_server(
    workers: int, cache_dir: str, extra: tuple[str, ...] = (), root: Path = ROOT
) -> tuple[subprocess.Popen, str, dict]:
    """A server of `root`'s mirai (another checkout of the project, for side-by-side runs) with
    `extra` flags; its process, URL and start-up timings."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = serve_command(port, workers) + ["--cache-dir", cache_dir, "--log-level", "warning"]
    command += ["--timeout", "600", *extra]
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
    parser.add_argument("--scale", action="store_true", help="embedded vs broker, 1/2/4 workers")
    parser.add_argument("--scale-requests", type=int, default=48, help="requests per deployment")
    parser.add_argument("--record", action="store_true", help="write --scale's table to RESULTS")
    parser.add_argument("--iterations", type=int, default=10, help="warm requests per IR type")
    parser.add_argument("--slow-iterations", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--skip-slow", action="store_true", help="skip inductor/mirai_tf_op")
    args = parser.parse_args()
    if args.scale:
        return scale_bench(args.scale_requests, args.record)

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


# --scale: the same request mix, embedded and in broker mode, with 1, 2 and 4 workers.

SCALE_MIX = [
    {"code": GUIDE_MODEL, "ir_type": "torch_mlir"},
    {"code": ADD_KERNEL, "ir_type": "triton_ir"},
    {
        "code": RAW_MLIR,
        "ir_type": "raw_ir",
        "selected_language": "raw_ir",
        "mlir_opt": "--canonicalize && --cse",
        "dump_after_each_opt": True,
    },
]
SCALE_WORKERS = (1, 2, 4)
SCALE_CLIENTS = 8
RESULTS = ROOT / "bench" / "RESULTS-explorer.md"
SCALE_HEADING = "## Past one machine: embedded vs broker"


class Deployment:
    """Processes started for one measurement, stopped in reverse order."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []
        self.folder = tempfile.TemporaryDirectory(prefix="mirai-scale-")

    def spawn(self, command: list[str]) -> subprocess.Popen:
        proc = subprocess.Popen(
            command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        self.procs.append(proc)
        return proc

    def stop(self) -> None:
        for proc in reversed(self.procs):
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
        self.folder.cleanup()


def wait_workers(url: str, workers: int, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as response:
                if json.loads(response.read())["workers_ready"] >= workers:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"{workers} workers not ready at {url}")


def embedded_deployment(workers: int) -> tuple[Deployment, str]:
    deployment = Deployment()
    port = free_port()
    deployment.spawn(
        serve_command(port, workers) + ["--cache-dir", deployment.folder.name + "/cache"]
    )
    return deployment, f"http://127.0.0.1:{port}"


def broker_deployment(workers: int) -> tuple[Deployment, str]:
    deployment = Deployment()
    redis_port, port = free_port(), free_port()
    folder = deployment.folder.name
    deployment.spawn(
        ["redis-server", "--bind", "127.0.0.1", "--port", str(redis_port), "--dir", folder]
        + ["--appendonly", "yes", "--save", ""]
    )
    broker = f"redis://127.0.0.1:{redis_port}/0"
    time.sleep(0.5)
    for n in range(workers):
        deployment.spawn(
            [sys.executable, "-m", "mirai.cli", "worker", "--broker", broker, "--workers", "1"]
            + ["--cache-dir", f"{folder}/worker-{n}", "--name", f"worker-{n}"]
        )
    deployment.spawn(
        [sys.executable, "-m", "mirai.explorer", "--port", str(port), "--broker", broker]
        + ["--cache-dir", f"{folder}/replica"]
    )
    return deployment, f"http://127.0.0.1:{port}"


DEPLOYMENTS = {"embedded": embedded_deployment, "broker": broker_deployment}


def measure_mix(url: str, workers: int, requests: int) -> tuple[list[float], float, int]:
    """Latencies, wall time and errors of `requests` mixed requests from SCALE_CLIENTS clients."""
    warm = [unique(fields, f"warm-{n}") for n in range(workers) for fields in SCALE_MIX]
    with ThreadPoolExecutor(SCALE_CLIENTS) as pool:
        list(pool.map(lambda body: post(url, body), warm))
    bodies = [unique(SCALE_MIX[i % len(SCALE_MIX)], f"r{i}") for i in range(requests)]
    started = time.perf_counter()
    with ThreadPoolExecutor(SCALE_CLIENTS) as pool:
        answers = list(pool.map(lambda body: post(url, body), bodies))
    wall = time.perf_counter() - started
    errors = sum(1 for result, _ in answers if result["status"] != "ok")
    return [elapsed for _, elapsed in answers], wall, errors


def versions_line() -> str:
    from importlib import metadata

    names = ("torch", "triton", "torch-mlir", "arq", "redis")
    found = ", ".join(f"{name} {metadata.version(name)}" for name in names)
    server = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout
    server_version = next((w[2:] for w in server.split() if w.startswith("v=")), "?")
    return f"Python {sys.version.split()[0]}, {found}, redis-server {server_version}"


def scale_bench(requests: int, record: bool) -> int:
    rows = []
    load_before = os.getloadavg()[0]
    for workers in SCALE_WORKERS:
        figures = {}
        for mode, deploy in DEPLOYMENTS.items():
            deployment, url = deploy(workers)
            try:
                wait_workers(url, workers)
                figures[mode] = measure_mix(url, workers, requests)
            finally:
                deployment.stop()
            print(f"{mode} {workers} workers: done", file=sys.stderr)
        rows.append((workers, figures))
    load_after = os.getloadavg()[0]
    lines = [
        "| workers | embedded req/s | embedded p50 ms | embedded p95 ms "
        "| broker req/s | broker p50 ms | broker p95 ms | errors (emb./broker) |",
        "|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for workers, figures in rows:
        cells = []
        for mode in DEPLOYMENTS:
            latencies, wall, _ = figures[mode]
            p50, p95 = percentile(latencies, 0.5), percentile(latencies, 0.95)
            cells += [f"{len(latencies) / wall:.1f}", ms(p50), ms(p95)]
        errors = "/".join(str(figures[mode][2]) for mode in DEPLOYMENTS)
        lines.append(f"| {workers} | " + " | ".join(cells) + f" | {errors} |")
    table = "\n".join(lines)
    cores = os.cpu_count()
    about = (
        f"`.venv/bin/python bench/bench_explorer.py --scale --record` on this {cores}-core CPU"
        f" machine ({versions_line()}). One request mix (torch_mlir, triton_ir, raw_ir through"
        f" mlir-opt in turn; code never seen before, so no cache answers), {requests} requests from"
        f" {SCALE_CLIENTS} concurrent clients, after each worker has seen each request kind once."
        " Embedded: `mirai serve --workers N`. Broker: a redis-server (appendonly), one"
        " `mirai serve --broker` replica and N `mirai worker --workers 1` processes, all on this"
        f" machine. This machine has {cores} cores: past {cores} workers they only share them, so"
        " the figures for 4 workers show the cost of more processes, not the gain of more hosts;"
        " in broker mode the replica, Redis and each worker's queue loop share them too. Load"
        f" average {load_before:.1f} before, {load_after:.1f} after: other jobs shared the"
        " machine, and figures vary by up to a third from run to run here; read the table for"
        " its shape."
    )
    text = (
        f"{SCALE_HEADING} ({time.strftime('%Y-%m-%d', time.gmtime())})\n\n"
        f"{textwrap.fill(about, 100)}\n\n{table}\n"
    )
    print(text)
    if record:
        record_section(RESULTS, SCALE_HEADING, text)
    return 0


def record_section(path: Path, heading: str, text: str) -> None:
    """Put `text` (a section starting with `heading`) into `path` in place of the section with
    that heading, or before the first other section after the top one."""
    old = path.read_text()
    start = old.find(heading)
    if start >= 0:
        end = old.find("\n## ", start + len(heading))
        new = old[:start] + text.rstrip() + "\n" + (old[end:] if end >= 0 else "")
    else:
        first = old.find("\n## ")
        cut = first + 1 if first >= 0 else len(old)
        new = old[:cut] + text.rstrip() + "\n\n" + old[cut:]
    path.write_text(new)


if __name__ == "__main__":
    sys.exit(main())
