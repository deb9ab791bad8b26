"""The one way the explorer runs an external process: time limit, temp dir, captured output, and an
error that names the stage and the command.

>>> run_tool(["cat"], stage="echo", input_text="hi").stdout
'hi'
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from mirai.explorer.errors import ExplorerError


@dataclass(frozen=True)
class ToolResult:
    stdout: str
    stderr: str


def run_tool(
    command: list[str],
    *,
    stage: str,
    input_text: str = "",
    timeout_s: float = 60.0,
    cwd: str | Path | None = None,
) -> ToolResult:
    """Run `command` with `input_text` on stdin; return its output or raise ExplorerError.

    The process gets its own session so a time-out kills it and everything it started. Without `cwd`
    it runs in a fresh temporary directory that is removed afterwards.
    """
    printable = shlex.join(command)
    with tempfile.TemporaryDirectory(prefix="mirai-tool-") as scratch:
        try:
            proc = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=str(cwd or scratch),
                start_new_session=True,
            )
        except FileNotFoundError:
            raise ExplorerError(f"{stage}: executable not found", f"command: {printable}") from None
        except PermissionError as err:
            raise ExplorerError(
                f"{stage}: cannot execute", f"command: {printable}\n{err}"
            ) from None
        try:
            out, err = proc.communicate(input_text.encode(), timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            proc.communicate()
            raise ExplorerError(
                f"{stage} timed out after {timeout_s:g} s", f"command: {printable}"
            ) from None
    stdout = out.decode(errors="replace")
    stderr = err.decode(errors="replace")
    if proc.returncode != 0:
        raise ExplorerError(
            f"{stage} failed (exit code {proc.returncode})",
            f"command: {printable}\n\n{stderr}".rstrip() + "\n",
        )
    return ToolResult(stdout, stderr)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
