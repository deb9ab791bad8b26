"""What the benches share: timing calls side by side in rounds (`timed_side_by_side`), and
recording Markdown results, the new text on top and the earlier results kept below it (`record`).

    record(ROOT / "bench" / "RESULTS-pffn.md", text, "# pffn benchmark")

`text` starts with `title`. What the file held before (its reading notes included) moves under
"## Earlier results", newest first; a copy of the whole file also goes to $OUT when that is set (the
GPU machine hands back what is written there).
"""

from __future__ import annotations

import os
from pathlib import Path

HISTORY = "## Earlier results"


def timed_side_by_side(fns: dict, rounds: int = 5) -> dict:
    """Milliseconds per call of each of `fns` (name -> callable): `rounds` rounds in which each is
    timed once in turn (each round starting one further along), the median of its rounds. Drift of
    the machine over the run (clocks, other processes) then falls on every candidate alike instead
    of on whichever was timed during it."""
    import statistics

    from triton.testing import do_bench

    names = list(fns)
    for name in names:  # compile, allocate and warm every candidate first
        do_bench(fns[name], warmup=10, rep=20)
    samples = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            samples[name].append(do_bench(fns[name], warmup=5, rep=40, return_mode="median"))
    return {name: statistics.median(times) for name, times in samples.items()}


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
