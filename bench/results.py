"""What the benches share: timing calls side by side in rounds (`timed_side_by_side`, from
mirai.gpu.timing, which `mirai tune` uses too; `without_grad`), and recording Markdown results, the new text on
top and the earlier results kept below it (`record`); and the two tables of the kernel benches
(bench_gate_up, bench_silu_grad, bench_few_rows): candidates against a peer (`candidates_table`,
and the whole text around it, `candidates_report`) and a configuration sweep ranked against the
export's own (`ranked_table` and the text around it, `sweep_report`, from the timings
`ranked_configs` takes), and their command line
(`kernel_bench`); `rotated` and `copies_for` time a small kernel over operands that do not stay in
the L2 cache.

    record(ROOT / "bench" / "RESULTS-pffn.md", text, "# pffn benchmark")

`text` starts with `title`. What the file held before (its reading notes included) moves under
"## Earlier results", newest first; a copy of the whole file also goes to $OUT when that is set (the
GPU machine hands back what is written there).
"""

from __future__ import annotations

import os
from pathlib import Path

from mirai.gpu.timing import (
    capturable,
    timed_side_by_side,
)  # noqa: F401  (the benches time with them)

HISTORY = "## Earlier results"


def without_grad(call):
    """`call` (no arguments) run under torch.no_grad(): a forward as inference times it."""
    import torch

    def run():
        with torch.no_grad():
            call()

    return run


def record(path: Path, text: str, title: str) -> str:
    """Write `text` as the newest results of `path`; return the file's whole new text."""
    old = path.read_text() if path.exists() else ""
    if old:
        top, _, history = old.partition(HISTORY)
        top = top.replace(title, "", 1).strip()
        text = f"{text.rstrip()}\n\n{HISTORY}\n\n{top}\n\n{history.strip()}\n".rstrip() + "\n"
    path.write_text(text)
    if os.environ.get("OUT"):
        (Path(os.environ["OUT"]) / path.name).write_text(text)
    return text


def candidates_table(rows: dict, peer: str, flops, leading: tuple[str, ...] = ("B",)) -> list[str]:
    """Markdown rows of {key: {"ms", "gpu_ms", "errors": {candidate: value}}}: per call and GPU time,
    the ratio to `peer`'s GPU time, TFLOP/s (`flops(key)` in GPU time) and relative error. A key
    is a batch, or a tuple of cells named by `leading` (as ranked_table's)."""
    header = [*leading, "candidate", "ms per call", "GPU ms", "vs peer", "TFLOP/s", "rel. error"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for key, row in rows.items():
        lead = " | ".join(str(c) for c in (key if isinstance(key, tuple) else (key,)))
        for name, gpu in row["gpu_ms"].items():
            lines.append(
                f"| {lead} | {name} | {row['ms'][name]:.3f} | {gpu:.3f} | "
                f"{row['gpu_ms'][peer] / gpu:.2f}x | {flops(key) / gpu / 1e9:.0f} | "
                f"{row['errors'][name]:.1e} |"
            )
    return lines


def candidates_report(
    title: str, summary: str, rows: dict, peer: str, flops, label_for, leading=("B",)
) -> str:
    """A kernel bench's comparison as Markdown: `title`, its dated `summary` paragraph, the
    candidates table (`candidates_table`) and the configuration the export's kernel ran for each
    key (`label_for(key)`)."""
    chosen = ", ".join(
        f"{' '.join(map(str, key)) if isinstance(key, tuple) else key}: {label_for(key)}"
        for key in rows
    )
    lines = [
        title,
        "",
        summary,
        "",
        *candidates_table(rows, peer, flops, leading),
        "",
        f"The fused kernel runs the export's configuration for each batch ({chosen}).",
    ]
    return "\n".join(lines) + "\n"


def sweep_report(title: str, summary: str, found: dict, flops, leading=("B",)) -> str:
    """A kernel bench's `--sweep` as Markdown: `title`, its dated `summary` paragraph and the
    ranked table (`ranked_table`)."""
    lines = [title, "", summary, "", *ranked_table(found, flops, leading)]
    return "\n".join(lines) + "\n"


def ranked_table(found: dict, flops, leading: tuple[str, ...] = ("B",)) -> list[str]:
    """Markdown rows of a sweep, {key: [(configuration, GPU ms), ...]}, the key's cells first (named
    by `leading`; a tuple, or the batch alone): TFLOP/s (`flops(key)`) and the ratio to the
    configuration marked "(export)"."""
    header = [*leading, "configuration", "GPU ms", "TFLOP/s", "vs export"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for key, ranked in found.items():
        cells = key if isinstance(key, tuple) else (key,)
        export = next(ms for name, ms in ranked if name.endswith("(export)"))
        for name, ms in ranked:
            lead = " | ".join(str(c) for c in cells)
            lines.append(
                f"| {lead} | {name} | {ms:.4f} | {flops(key) / ms / 1e9:.0f} | "
                f"{export / ms:.2f}x |"
            )
    return lines


def rotated(calls: list):
    """One callable that runs the next of `calls` each time, and keeps what each returned until its
    turn comes round again. Timed as a CUDA graph of repeated calls, a ring of operand sets (and so
    of results) larger than the L2 cache makes a kernel read and write memory as it does inside an
    op, where one set alone stays in L2 between calls: bench_few_rows timed the gradient of a
    weight (8 MB written) at 7.3 us so, against about 20 us in pffn's op."""
    held = [None] * len(calls)
    turn = [0]

    def run():
        i = turn[0]
        turn[0] = (i + 1) % len(calls)
        held[i] = calls[i]()
        return held[i]

    run.held = held  # what each call last returned
    return run


def copies_for(nbytes: int, l2_bytes: int, most: int = 64) -> int:
    """How many operand sets of `nbytes` (operands and results) fill twice an L2 cache of
    `l2_bytes` (torch.cuda.get_device_properties(...).L2_cache_size): at least 1, at most `most`."""
    return max(1, min(most, -(-2 * l2_bytes // max(1, nbytes))))


def operand_sets(make, run) -> list[tuple]:
    """As many independent operand sets from `make()` as, with the results `run(set)` gives (a
    tensor or a tuple of them), fill twice the GPU's L2 cache (copies_for): timed calls that go
    round them (rotated) find neither their operands nor their results' lines in L2, as none does
    inside an op."""
    import torch

    first = make()
    result = run(first)
    outputs = result if isinstance(result, tuple) else (result,)
    nbytes = sum(t.untyped_storage().nbytes() for t in (*first, *outputs) if t is not None)
    l2 = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
    return [first] + [make() for _ in range(copies_for(nbytes, l2) - 1)]


def ranked_configs(grid, label, call, export: str, rounds: int, top: int = 5) -> list:
    """[(label, GPU ms), ...] best first, for one kernel at one size: every configuration of `grid`
    timed once as a CUDA graph (`call(config)` gives what to time; configurations the chip cannot
    run are passed over), then the best `top` and the export's own (`call(None)`, labelled `export`
    + " (export)") side by side in `rounds` rounds; prints the ranking as it goes."""
    from triton.runtime.errors import OutOfResources
    from triton.testing import do_bench_cudagraph

    first = {}
    for config in grid:
        try:
            first[label(config)] = do_bench_cudagraph(call(config), rep=20)
        except OutOfResources:
            continue
    best = sorted(first, key=first.get)[:top]
    chosen = {label(c): call(c) for c in grid if label(c) in best}
    chosen[f"{export} (export)"] = call(None)
    ranked = sorted(timed_side_by_side(chosen, rounds, graphs=True).items(), key=lambda i: i[1])
    print(f"{len(first)} of {len(grid)} configurations ran; the best, in rounds:", flush=True)
    for name, ms in ranked:
        print(f"    {name}: {ms:.4f} ms", flush=True)
    return ranked


def kernel_bench(argv, module, default_batches: str) -> int:
    """The command line of a kernel bench: `module` (bench_gate_up, bench_silu_grad, ...) gives its
    docstring, `measure(batch, rounds)` and `render(rows, versions)` for the comparison with its
    peers, `sweep(batches, rounds)` and `render_sweep(found, versions)` for `--sweep`, and `RESULTS`
    and `TITLE` for the record."""
    import argparse

    import torch
    import triton

    parser = argparse.ArgumentParser(description=module.__doc__.splitlines()[0])
    parser.add_argument("--batches", default=default_batches)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--sweep", action="store_true", help="rank the kernel's configurations (see above)"
    )
    forms = getattr(module, "FORMS", None)  # a bench of several forms of its kernel
    if forms:
        parser.add_argument(
            "--forms",
            default=",".join(forms),
            help=f"the forms to time, a comma list of {', '.join(forms)} (default: all)",
        )
    args = parser.parse_args(argv)
    which = {}
    if forms:
        which["forms"] = tuple(f for f in args.forms.split(",") if f)
        unknown = [f for f in which["forms"] if f not in forms]
        if unknown or not which["forms"]:
            parser.error(f"--forms {args.forms!r}: choose from {', '.join(forms)}")
    torch.backends.cuda.matmul.allow_tf32 = True
    batches = [int(b) for b in args.batches.split(",")]
    versions = (
        f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}"
    )
    if args.sweep:
        text = module.render_sweep(module.sweep(batches, args.rounds, **which), versions)
    else:
        rows = {b: module.measure(b, args.rounds, **which) for b in batches}
        text = module.render(rows, versions)
    print(text)
    record(module.RESULTS, text, module.TITLE)
    return 0
