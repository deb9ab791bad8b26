"""The one runner for external processes: a time limit, captured output, and an error that names the stage.

>>> run(["true"], stage="check").returncode
0
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence

from mirai.errors import MiraiError


class ProcessError(MiraiError):
    """An external command failed or timed out; `stderr` holds what it printed."""

    def __init__(self, message: str, stdout: str = "", stderr: str = ""):
        super().__init__(message)
        self.stdout = stdout
        self.stderr = stderr


def run(
    cmd: Sequence[str],
    *,
    stage: str,
    timeout: float = 600,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
    input: str | None = None,
    check: bool = True,
) -> subprocess.CompletedProcess:
    """Run `cmd`; raise ProcessError naming `stage` and the command if it fails or times out."""
    shown = " ".join(str(c) for c in cmd)
    try:
        result = subprocess.run(
            [str(c) for c in cmd],
            cwd=cwd,
            env=dict(env) if env is not None else None,
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except FileNotFoundError:
        raise ProcessError(f"{stage}: command not found: {cmd[0]}") from None
    except subprocess.TimeoutExpired as err:
        raise ProcessError(
            f"{stage}: timed out after {timeout:g}s: {shown}",
            stdout=_text(err.stdout),
            stderr=_text(err.stderr),
        ) from None
    if check and result.returncode != 0:
        tail = (result.stderr or result.stdout).strip()[-4000:]
        raise ProcessError(
            f"{stage}: `{shown}` exited with {result.returncode}:\n{tail}",
            stdout=result.stdout,
            stderr=result.stderr,
        )
    return result


def _text(data) -> str:
    if data is None:
        return ""
    return data.decode(errors="replace") if isinstance(data, bytes) else data
