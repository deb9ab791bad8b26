"""What the benches share: timing calls side by side in rounds (`timed_side_by_side`, from
mirai.gpu.timing, which `mirai tune` uses too; `without_grad`), and recording Markdown results, the new text on
top and the earlier results kept below it (`record`).

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
