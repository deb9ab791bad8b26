"""What the sandbox costs: warm request latency of a sandboxed server beside one without the sandbox
and, optionally, beside the explorer as it was before the sandbox (another checkout), all running at
once on this machine, requests interleaved so load hits each alike. Prints a Markdown table.

    git worktree add /tmp/mirai-before <commit>     # the explorer before the sandbox, optional
    .venv/bin/python bench/bench_sandbox.py --baseline /tmp/mirai-before --iterations 15

Each server has `--workers` workers (2, the default of `mirai serve`); every request sends code never
seen before (so no cache answers it), one at a time.
Target: sandboxed p50 <= 1.25x the explorer before the sandbox.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_explorer import CASES, ms, percentile, post, start_server, unique  # noqa: E402

WANTED = (
    "torch_mlir",
    "llvm_ir",
    "triton_ir",
    "raw_ir",
    "raw_ir + mlir_opt (2 stages, dump)",
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--iterations", type=int, default=10, help="requests per IR type and server"
    )
    parser.add_argument(
        "--baseline", type=Path, help="a checkout of the explorer before the sandbox"
    )
    parser.add_argument("--workers", type=int, default=2, help="workers per server (default 2)")
    args = parser.parse_args()
    flavours = [("sandbox", (), None), ("no sandbox", ("--no-sandbox",), None)]
    if args.baseline:
        flavours.append(("before", (), args.baseline.resolve()))
    servers = {}
    with tempfile.TemporaryDirectory(prefix="mirai-bench-sandbox-") as tmp:
        try:
            for name, flags, root in flavours:
                cache = str(Path(tmp) / name.replace(" ", "-"))
                kwargs = {"root": root} if root else {}
                proc, url, _ = start_server(args.workers, cache, flags, **kwargs)
                servers[name] = (proc, url)
            results = measure({name: url for name, (_, url) in servers.items()}, args.iterations)
        finally:
            for proc, _ in servers.values():
                proc.terminate()
                proc.wait(30)
    report(results, [name for name, _, _ in flavours], args.iterations, args.workers)
    return 0


def measure(urls: dict[str, str], iterations: int) -> dict[str, dict[str, list[float]]]:
    results: dict[str, dict[str, list[float]]] = {}
    for label, fields, _ in CASES:
        if label not in WANTED:
            continue
        results[label] = {name: [] for name in urls}
        for name, url in urls.items():  # first use of the code path in each worker
            post(url, unique(fields, f"warm-up {name}"))
        for i in range(iterations):
            order = list(urls.items())
            order = order[i % len(order) :] + order[: i % len(order)]
            for name, url in order:
                result, elapsed = post(url, unique(fields, f"{name} {i}"))
                if result["status"] != "ok":
                    raise SystemExit(f"{name} {label}: {result['message']}")
                results[label][name].append(elapsed)
    return results


def report(
    results: dict[str, dict[str, list[float]]], names: list[str], iterations: int, workers: int
) -> None:
    base = "before" if "before" in names else "no sandbox"
    print(
        f"# sandbox cost: warm p50 ms, {iterations} requests each, servers of {workers} workers "
        "side by side\n"
    )
    print("| IR type | " + " | ".join(names) + f" | sandbox / {base} |")
    print("|---|" + "---:|" * (len(names) + 1))
    for label, by_name in results.items():
        p50 = {name: percentile(values, 0.5) for name, values in by_name.items()}
        cells = " | ".join(ms(p50[name]) for name in names)
        print(f"| {label} | {cells} | {p50['sandbox'] / p50[base]:.2f}x |")


if __name__ == "__main__":
    sys.exit(main())
