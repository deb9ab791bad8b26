"""Running user code (in a worker, never in the server) and finding the models it defines.

The code is written to `<workdir>/user_code.py` and executed as `__main__` (Triton needs a real source
file to read its kernels). Models come from `__explore__(model, *example_inputs)` calls, in order, or by
the guide's convention: an `nn.Module` (preferably named `model`) and `example_input`.
"""

from __future__ import annotations

import builtins
import contextlib
import io
import os
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mirai.explorer.errors import ExplorerError

USER_FILE = "user_code.py"
INPUT_NAMES = ("example_input", "example_inputs", "sample_input", "sample_inputs", "inputs")
NO_MODEL_HELP = (
    "Define an nn.Module instance (e.g. `model = MyModel()`) and `example_input = torch.randn(...)`, "
    "or call `__explore__(model, example_input)` once per model."
)


@dataclass
class Explored:
    """One model with its example inputs, as the user gave them."""

    label: str
    model: Any
    inputs: tuple


@dataclass
class UserRun:
    namespace: dict
    stdout: str
    explored: list[Explored] = field(default_factory=list)


def run_user_code(code: str, workdir: Path) -> UserRun:
    """Execute `code` as a script in `workdir`; what it prints (Python or C level) is captured."""
    path = workdir / USER_FILE
    path.write_text(code)
    explored: list[Explored] = []

    def __explore__(model, *example_inputs):
        label = f"{type(model).__name__} #{len(explored) + 1}"
        explored.append(Explored(label, model, tuple(example_inputs)))
        return model

    namespace = {
        "__name__": "__main__",
        "__file__": str(path),
        "__builtins__": builtins,
        "__explore__": __explore__,
    }
    try:
        compiled = compile(code, str(path), "exec")
    except SyntaxError as err:
        raise ExplorerError(
            f"SyntaxError in user code: {err.msg} (line {err.lineno})", _tb(err, path)
        )
    with capture_stdout(workdir) as captured:
        try:
            exec(compiled, namespace)
        except (
            BaseException
        ) as err:  # SystemExit and KeyboardInterrupt too: user code must not stop us
            raise ExplorerError(
                f"error in user code: {type(err).__name__}: {err}", _tb(err, path)
            ) from None
    return UserRun(namespace, captured.text, explored)


class _Captured:
    text = ""


@contextlib.contextmanager
def capture_stdout(workdir: Path):
    """Capture sys.stdout and file descriptor 1 (C-level prints, e.g. MLIR's dump())."""
    captured = _Captured()
    buffer = io.StringIO()
    sys.stdout.flush()
    saved_fd = os.dup(1)
    with open(workdir / ".stdout", "w+b") as sink:
        os.dup2(sink.fileno(), 1)
        try:
            with contextlib.redirect_stdout(buffer):
                yield captured
        finally:
            sys.stdout.flush()
            os.dup2(saved_fd, 1)
            os.close(saved_fd)
            sink.seek(0)
            captured.text = buffer.getvalue() + sink.read().decode(errors="replace")


def _tb(err: BaseException, path: Path) -> str:
    """The traceback from the first frame in the user's file on (the worker's frames say nothing)."""
    tb = err.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != str(path):
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(err), err, tb or err.__traceback__))


def find_models(run: UserRun) -> list[Explored]:
    """Models to explore: the `__explore__` calls in order, else the guide's model + example_input."""
    if run.explored:
        return run.explored
    import torch

    namespace = {k: v for k, v in run.namespace.items() if not k.startswith("__")}
    modules = [(k, v) for k, v in namespace.items() if isinstance(v, torch.nn.Module)]
    if not modules:
        raise ExplorerError("no model found in the code", NO_MODEL_HELP)
    _, model = next(((k, v) for k, v in modules if k == "model"), modules[-1])
    inputs = next((namespace[k] for k in INPUT_NAMES if k in namespace), None)
    if inputs is None:
        tensors = [v for v in namespace.values() if isinstance(v, torch.Tensor)]
        if not tensors:
            raise ExplorerError("no example input found in the code", NO_MODEL_HELP)
        inputs = tensors[-1]
    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    return [Explored(type(model).__name__, model, inputs)]
