"""Optional pass pipelines (guide §4.2): the request's tool fields, in the guide's fixed order, each
split on `&&` into stages; every stage is a subprocess that reads the IR on stdin. Before any stage
runs, the flags of every stage are checked against the tool's flag policy (check_stages).

With `dump_after_each_opt` the output keeps every stage, with the byte-exact delimiters

    ===== Initial IR =====
    <text>

    ===== IR after <tool> <flags> =====
    <text>
"""

from __future__ import annotations

from dataclasses import dataclass

from mirai.explorer.runner import run_tool
from mirai.explorer.schemas import PIPELINE_FIELDS
from mirai.explorer.tools import TOOLS

INITIAL_DELIMITER = "===== Initial IR ====="


@dataclass(frozen=True)
class Stage:
    alias: str
    flags: str


def stages_of(request: dict) -> list[Stage]:
    """The pipeline a request asks for.

    >>> stages_of({"mlir_opt": "--canonicalize && --cse", "llvm_opt": "-O2"})
    [Stage(alias='mlir-opt', flags='--canonicalize'), Stage(alias='mlir-opt', flags='--cse'), \
Stage(alias='opt', flags='-O2')]
    """
    stages = []
    for field, alias in PIPELINE_FIELDS.items():
        for part in (request.get(field) or "").split("&&"):
            if part.strip():
                stages.append(Stage(alias, part.strip()))
    return stages


def check_stages(stages: list[Stage], allowed_user_tools: list[str] | None = None) -> None:
    """Raise ExplorerError for the first stage whose flags the policy refuses (or whose user_tool
    executable is not allowed); runs nothing.

    >>> check_stages([Stage("mlir-opt", "--cse"), Stage("llc", "--load=/tmp/evil.so")])
    Traceback (most recent call last):
    mirai.explorer.errors.ExplorerError: Invalid flags for llc
    """
    for stage in stages:
        TOOLS[stage.alias].check_flags(stage.flags, allowed_user_tools)


def stage_delimiter(tool: str, flags: str) -> str:
    return f"===== IR after {tool} {flags} ====="


def apply_pipeline(
    ir: str,
    stages: list[Stage],
    *,
    dump_each: bool,
    timeout_s: float,
    allowed_user_tools: list[str],
) -> str:
    """Run `ir` through `stages`; the last stage's output, or every stage's with delimiters."""
    if not stages:
        return ir
    check_stages(stages, allowed_user_tools)
    dumps = [f"{INITIAL_DELIMITER}\n{ir}"]
    current = ir
    for stage in stages:
        name, command = TOOLS[stage.alias].command(stage.flags, allowed_user_tools)
        shown_flags = stage.flags
        if stage.alias == "user-tool":
            shown_flags = stage.flags.split(None, 1)[1] if " " in stage.flags.strip() else ""
        current = run_tool(
            command, stage=f"{name} {stage.flags}".strip(), input_text=current, timeout_s=timeout_s
        ).stdout
        dumps.append(f"{stage_delimiter(name, shown_flags)}\n{current}")
    if not dump_each:
        return current
    return "\n\n".join(dump.rstrip("\n") for dump in dumps) + "\n"
