"""Build progress: rich bars on a terminal, plain lines elsewhere, nothing when disabled."""

from __future__ import annotations

import io

from mirai.export.progress import BuildProgress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def run(progress: BuildProgress) -> None:
    with progress:
        with progress.stage("capture Mlp"):
            pass
        with progress.stage("compile", total=2) as step:
            step.advance("forward k0 for sm_90")
            step.advance("forward k1 for sm_90")
        progress.note("wrote 9 files")


def test_plain_lines_when_not_a_terminal():
    log = io.StringIO()
    run(BuildProgress(stream=log))
    lines = [line.split("] ", 1)[1] for line in log.getvalue().splitlines()]
    assert lines == [
        "capture Mlp",
        "compile 1/2: forward k0 for sm_90",
        "compile 2/2: forward k1 for sm_90",
        "wrote 9 files",
    ]


def test_a_live_display_on_a_terminal():
    screen = Terminal()
    run(BuildProgress(stream=screen))
    text = screen.getvalue()
    assert "\x1b[" in text  # drawn with terminal control sequences, not plain lines
    assert "compile 2/2: forward k1 for sm_90" in text and "2/2" in text
    assert "wrote 9 files" in text and "[mirai" not in text


def test_quiet():
    log = Terminal()
    run(BuildProgress(enabled=False, stream=log))
    assert log.getvalue() == ""
