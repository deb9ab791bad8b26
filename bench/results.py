"""What the benches share: timing a call (`timed`), and recording Markdown results, the new text on
top and the earlier results kept below it (`record`).

    record(ROOT / "bench" / "RESULTS-pffn.md", text, "# pffn benchmark")

`text` starts with `title`. What the file held before (its reading notes included) moves under
"## Earlier results", newest first; a copy of the whole file also goes to $OUT when that is set (the
GPU machine hands back what is written there).
"""

from __future__ import annotations

import os
from pathlib import Path

HISTORY = "## Earlier results"


def timed(fn) -> float:
    """Milliseconds per call of `fn` on the GPU (triton.testing.do_bench: CUDA events, median)."""
    from triton.testing import do_bench

    return do_bench(fn, warmup=25, rep=100)


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
