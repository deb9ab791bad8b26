"""`mirai inspect DIR`: what a generated folder holds, and which binaries a given GPU would run.

Prints the function, its precision, targets, symbols and ops with their inputs and outputs. With
--arch, it asks the generated launch code itself (through its C interface, built with g++; no GPU
needed) which binary each kernel loads on that architecture: its cubin, the cubin of a lower minor
version, PTX for the driver to compile, or nothing. Exit status 1 if some kernel has nothing.

    mirai inspect generated --arch sm_86,sm_90,sm_100
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from mirai.errors import MiraiError


def register(sub) -> None:
    p = sub.add_parser(
        "inspect",
        help="describe a generated folder and the binaries each GPU would run",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("generated", nargs="?", default="generated", help="the generated folder")
    p.add_argument("--arch", default="", help="architectures to check, e.g. sm_86,sm_90 or 86,90")
    p.set_defaults(func=run)


def parse_arch(text: str) -> int:
    """ "sm_86", "sm_90a", "86", "8.6" or "cuda:86" -> 86 (mirai.gpu.targets.parse_spelling)."""
    from mirai.gpu.targets import parse_spelling

    backend, arch, _ = parse_spelling(text)
    if backend != "cuda":
        raise MiraiError(f"not a CUDA architecture: {text!r} (e.g. sm_86 or 8.6)")
    return arch


def summary(manifest: dict) -> list[str]:
    lines = [
        f"{manifest['name']}: {manifest['precision']}, targets {', '.join(manifest['targets'])}, "
        f"captured {manifest['origin']}",
        "versions: " + ", ".join(f"{k} {v}" for k, v in sorted(manifest["versions"].items())),
    ]
    for symbol, where in manifest["symbols"].items():
        low, high = where["range"]
        lines.append(
            f"symbol {symbol}: input {where['input']} dimension {where['dim']}, "
            f"sizes {low}..{high if high is not None else ''}"
        )
    for op, spec in manifest["ops"].items():
        ins = ", ".join(f"{i['name']}: {i['dtype']}{list(i['sizes'])}" for i in spec["inputs"])
        outs = ", ".join(f"{o['name']}: {o['dtype']}{list(o['sizes'])}" for o in spec["outputs"])
        runs = [
            f"{len(v['launches'])} launches and {len(v['gemms'])} GEMMs"
            + ("" if v["sample"] is None else f" captured at {spec['dispatch']} = {v['sample']}")
            for v in spec["variants"]
        ]
        lines.append(f"{op}({ins}) -> ({outs}); " + "; ".join(runs))
    return lines


def run(args) -> int:
    from mirai.export.launch import GeneratedOp

    directory = Path(args.generated)
    path = directory / "manifest.json"
    if not path.is_file():
        raise MiraiError(f"{directory} holds no manifest.json: not a folder mirai build wrote")
    archs = [parse_arch(a) for a in args.arch.split(",") if a.strip()]
    manifest = json.loads(path.read_text())
    print("\n".join(summary(manifest)))
    if not archs:
        return 0
    missing = 0
    print("\n| op | kernel | " + " | ".join(f"sm_{a}" for a in archs) + " |")
    print("|---|---|" + "---|" * len(archs))
    for op in manifest["ops"]:
        generated = GeneratedOp(directory, op)
        choices = {a: generated.binaries(a) for a in archs}
        for kernel in choices[archs[0]]:
            cells = [choices[a][kernel] or "none" for a in archs]
            missing += cells.count("none")
            print(f"| {op} | {kernel} | " + " | ".join(cells) + " |")
    return 1 if missing else 0
