"""Host time per call of generated ops, measured in C++ through their C interface (bench/host_time.cc).

On the GPU machine, from the repository root (a GPU build of the dynamic pffn, then B=8 and 8000):

    mirai build examples/pffn_dynamic.py -o /tmp/pffn-dynamic -q && \\
        python bench/bench_host_time.py /tmp/pffn-dynamic --batches 8,8000

For every op of the folder (or `--ops`) and every batch it builds the op's C interface and the
harness with g++ (no CUDA toolkit needed: both open the driver at run time), takes the input shapes
from the manifest (the batch is the size of every symbol bound from a leading dimension; `--symbols`
gives the others; a static build runs at its own shapes) and runs the harness. The table gives per
call: host time with no synchronization in the timed loop, time with a synchronization after each
call, launches (Triton kernels + cuBLASLt matmuls + output copies), the launch floor (an empty
kernel's cuLaunchKernel) and host / (launches x floor), which the goal keeps within 1.5. Prints
Markdown and JSON, and writes them to $OUT (host_time.md, host_time.json) when set, and to --json.

The generated runtime opens cuBLASLt itself; outside a process that already loaded it (as torch
does), it may not be on the library path, so this script finds it (the nvidia-cublas wheels, the
CUDA toolkit) and names it in MIRAI_CUBLASLT for the harness, unless that is already set.

`--cpu` runs the same harness against mirai's CPU stand-ins for the driver and cuBLASLt
(mirai.export.hostdriver), in a process of their own: every kernel runs in Triton's interpreter, so
the times mean nothing; CI uses it to check the harness end to end (keep --calls tiny there).
`--cpu --dry` has the stand-ins check and count every launch and GEMM but run none: what is left of
a call's host time is the launch code's own work (argument checks, plans, allocation, launch
bookkeeping), measured on any CPU, apart from what the driver and cuBLASLt take on a GPU machine.
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SOURCE = Path(__file__).with_name("host_time.cc")
TARGET_RATIO = 1.5  # the goal: host time within 1.5x of launches x floor
COLUMNS = (
    "| op | B | launches per call | host us/call | us/call, synchronized | floor us/launch | "
    "launches x floor (us) | host / (launches x floor) | allocations per call |"
)


def build_harness(directory: Path, library: bool) -> Path:
    """bench/host_time.cc built into `directory`: an executable, or (library) a shared library that
    exports mirai_host_time_main."""
    from mirai import process

    out = directory / ("host_time.so" if library else "host_time")
    if out.exists() and out.stat().st_mtime >= SOURCE.stat().st_mtime:
        return out
    cmd = [os.environ.get("CXX", "g++"), "-std=c++17", "-O2", "-Wall", str(SOURCE), "-o", str(out)]
    if library:
        cmd[4:4] = ["-shared", "-fPIC", "-DMIRAI_HOST_TIME_LIBRARY"]
    process.run(cmd + ["-ldl"], stage="build the host-time harness", timeout=300)
    return out


def symbol_values(manifest: dict, batch: int | None, given: dict[str, int]) -> dict[str, int]:
    """The value of every size symbol of the build: `given`, else `batch` for one bound from a
    leading dimension."""
    from mirai.errors import MiraiError

    values = {}
    for name, bound in manifest["symbols"].items():
        if name in given:
            values[name] = given[name]
        elif bound["dim"] == 0 and batch is not None:
            values[name] = batch
        else:
            raise MiraiError(
                f"symbol {name} (input {bound['input']}, dimension {bound['dim']}) needs a value: "
                f"--symbols {name}=N"
            )
    return values


def built_batch(manifest: dict) -> int | None:
    sizes = manifest["inputs"][0]["sizes"] if manifest["inputs"] else []
    return int(sizes[0]) if sizes and str(sizes[0]).isdigit() else None


def harness_args(manifest: dict, op: str, values: dict[str, int]) -> list[str]:
    """--inputs and --outputs of one op at the symbol values `values`."""
    from mirai.export.symbolic import evaluate

    spec = manifest["ops"][op]
    inputs = ";".join(
        f"{i['dtype']}:" + ",".join(str(evaluate(str(s), values)) for s in i["sizes"])
        for i in spec["inputs"]
    )
    outputs = ";".join(f"{o['dtype']}:{len(o['sizes'])}" for o in spec["outputs"])
    return ["--op", op, "--inputs", inputs, "--outputs", outputs]


def find_cublaslt() -> str | None:
    """A cuBLASLt the harness can open: None if the library path has one already."""
    names = ("libcublasLt.so.13", "libcublasLt.so.12")
    for name in names:
        try:
            ctypes.CDLL(name)
            return None
        except OSError:
            pass
    roots = []
    try:
        import nvidia  # the nvidia-cublas wheels that torch's CUDA builds depend on

        roots += list(nvidia.__path__)
    except ImportError:
        pass
    roots += [os.environ.get("CUDA_HOME", ""), "/usr/local/cuda"]
    for root in filter(None, roots):
        for name in names:
            found = sorted(glob.glob(f"{root}/**/{name}", recursive=True))
            if found:
                return found[0]
    return None


def runs(args, manifest: dict) -> list[tuple[str, int | None, list[str]]]:
    """(op, batch, harness arguments) for every op and batch to time."""
    from mirai.errors import MiraiError

    ops = (
        args.ops.split(",")
        if args.ops
        else sorted(manifest["ops"], key=lambda op: manifest["ops"][op]["graph"] != "forward")
    )
    unknown = [op for op in ops if op not in manifest["ops"]]
    if unknown:
        raise MiraiError(f"{args.directory} has no op {unknown[0]}; it has {list(manifest['ops'])}")
    given = dict((k, int(v)) for k, v in (s.split("=") for s in args.symbols.split(",") if s))
    batches = [int(b) for b in args.batches.split(",")] if args.batches else [None]
    if not manifest["symbols"]:
        built = built_batch(manifest)
        wrong = [b for b in batches if b is not None and b != built]
        if wrong:
            raise MiraiError(
                f"{args.directory} is a static build for B={built}; it cannot run at B={wrong[0]} "
                "(build with --dynamic)"
            )
        batches = [built]
    out = []
    for batch in batches:
        values = symbol_values(manifest, batch, given)
        for op in ops:
            out.append((op, batch, harness_args(manifest, op, values)))
    return out


def options(args) -> list[str]:
    return [
        "--calls",
        str(args.calls),
        "--warmup",
        str(args.warmup),
        "--sync-calls",
        str(args.sync_calls),
        "--floor",
        str(0 if args.cpu else args.floor),
        "--alloc",
        args.alloc,
    ] + (["--chunk", str(args.chunk)] if args.chunk else [])


def run_on_gpu(args, directory: Path, plan) -> list[dict]:
    from mirai.errors import MiraiError
    from mirai.export.launch import build_capi

    harness = build_harness(directory, library=False)
    env = dict(os.environ)
    if "MIRAI_CUBLASLT" not in env:
        found = find_cublaslt()
        if found:  # and its folder on the library path, for what it loads next to it
            env["MIRAI_CUBLASLT"] = found
            path = [str(Path(found).parent), env.get("LD_LIBRARY_PATH", "")]
            env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in path if p)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for op, batch, op_args in plan:
            out = Path(tmp) / f"{op}-{batch}.json"
            cmd = [str(harness), "--lib", str(build_capi(directory, op)), *op_args]
            cmd += options(args) + ["--json", str(out), "--label", op]
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
            if done.returncode != 0:
                raise MiraiError(f"host_time failed for {op} at B={batch}:\n{done.stderr[-4000:]}")
            result = dict(json.loads(out.read_text()), batch=batch)
            result["cublaslt"] = env.get("MIRAI_CUBLASLT", "from the library path")
            results.append(result)
    return results


def run_on_cpu(args, directory: Path, plan) -> list[dict]:
    """The harness in a process of its own that holds the CPU stand-ins (TRITON_INTERPRET=1)."""
    from mirai.errors import MiraiError
    from mirai.export.launch import build_capi

    build_harness(directory, library=True)
    for op, _, _ in plan:
        build_capi(directory, op)
    request = {
        "directory": str(directory),
        "runs": plan,
        "options": options(args),
        "dry": args.dry,
    }
    env = dict(os.environ, TRITON_INTERPRET="1", CUDA_VISIBLE_DEVICES="")
    done = subprocess.run(
        [sys.executable, __file__, "--in-cpu-driver", json.dumps(request)],
        env=env,
        capture_output=True,
        text=True,
        timeout=args.timeout,
    )
    if done.returncode != 0:
        raise MiraiError(f"host_time on the CPU driver failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def serve_cpu(request: dict) -> None:
    """In the CPU driver's process: run the harness (a library, called in this process) once per run
    and add what the stand-ins saw: kernel launches and GEMMs."""
    from mirai.export.hostdriver import driver
    from mirai.export.launch import build_capi

    directory = Path(request["directory"])
    manifest = json.loads((directory / "manifest.json").read_text())
    host = driver.get()
    host.index.add_directory(directory)
    host.configure(driver.compute_capability(manifest["targets"]))
    host.set_dry(request["dry"])
    main = ctypes.CDLL(str(build_harness(directory, library=True))).mirai_host_time_main
    main.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for op, batch, op_args in request["runs"]:
            out = Path(tmp) / f"{op}-{batch}.json"
            argv = ["host_time", "--lib", str(build_capi(directory, op)), *op_args]
            argv += request["options"] + ["--json", str(out), "--label", op]
            launches, gemms = host.kernel_launches(), host.gemms()
            code = main(len(argv), (ctypes.c_char_p * len(argv))(*[a.encode() for a in argv]))
            if code != 0:
                sys.exit(f"host_time failed for {op} at B={batch}")
            result = dict(json.loads(out.read_text()), batch=batch)
            result["cpu_driver"] = {
                "kernel_launches": host.kernel_launches() - launches,
                "gemms": host.gemms() - gemms,
            }
            results.append(result)
    sys.stdout.flush()
    print(json.dumps(results))


def number(value, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def row(r: dict) -> str:
    launches = f"{r['launches']} ({r['kernels']} kernels, {r['gemms']} GEMMs, {r['copies']} copies)"
    return (
        f"| {r['label']} | {r['batch'] if r['batch'] is not None else '-'} | {launches} | "
        f"{number(r['host_us'])} | {number(r['sync_us'])} | {number(r['floor_us'], 2)} | "
        f"{number(r['budget_us'])} | {number(r['ratio'], 2)} | {r['allocations_per_call']} |"
    )


def report(results: list[dict], directory: Path, args) -> str:
    device = results[0]["device"] if results else "?"
    head = (
        f"Host time per call of {directory} on {device} (bench/host_time.cc through the C "
        f"interface; {args.calls} calls in chunks, {args.warmup} warm-up, {args.sync_calls} "
        f"synchronized, temporaries from an {args.alloc} allocator). Target: host / (launches x "
        f"floor) <= {TARGET_RATIO}.\n\n"
    )
    if args.dry:
        head += (
            "Dry run on the CPU stand-ins: every launch and GEMM was checked and counted, none ran, "
            "so host us/call is the launch code's own work per call (argument checks, plans, "
            "allocation, launch bookkeeping) on this CPU, without the driver's or cuBLASLt's.\n\n"
        )
    separator = "|" + "---|" * COLUMNS.count(" |")
    return head + "\n".join([COLUMNS, separator] + [row(r) for r in results]) + "\n"


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--in-cpu-driver"]:
        serve_cpu(json.loads(argv[1]))
        return 0
    from mirai.errors import MiraiError

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path, help="a generated folder (its manifest.json)")
    parser.add_argument("--batches", default="", help="e.g. 8,8000 (dynamic builds)")
    parser.add_argument("--ops", default="", help="ops to time (default: every op of the folder)")
    parser.add_argument("--symbols", default="", help="other symbols' values, e.g. s1=4")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--sync-calls", type=int, default=300)
    parser.add_argument("--chunk", type=int, default=0, help="calls per timed chunk (0: auto)")
    parser.add_argument("--floor", type=int, default=20000, help="empty-kernel launches to time")
    parser.add_argument("--alloc", choices=("arena", "async"), default="arena")
    parser.add_argument("--cpu", action="store_true", help="on mirai's CPU stand-ins (CI)")
    parser.add_argument(
        "--dry",
        action="store_true",
        help="with --cpu: the stand-ins check and count every launch and GEMM but run none, so "
        "host us/call is the launch code's own host work on this CPU (outputs left unwritten)",
    )
    parser.add_argument("--timeout", type=float, default=1800.0, help="--cpu: seconds in all")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    if args.dry and not args.cpu:
        parser.error("--dry runs on the CPU stand-ins: add --cpu")
    directory = args.directory.resolve()
    try:
        manifest = json.loads((directory / "manifest.json").read_text())
        plan = runs(args, manifest)
        results = (run_on_cpu if args.cpu else run_on_gpu)(args, directory, plan)
    except (MiraiError, OSError) as err:
        print(f"bench_host_time: {err}", file=sys.stderr)
        return 1
    text = report(results, directory, args)
    print(text)
    print(json.dumps(results, indent=1))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    if os.environ.get("OUT"):
        out = Path(os.environ["OUT"])
        (out / "host_time.md").write_text(text)
        (out / "host_time.json").write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
