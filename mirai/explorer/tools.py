"""Registry of pipeline tools, keyed by the guide's alias (§4.2). A new tool is one entry in TOOLS.

Where a binary comes from, first hit wins:
  1. the directory in the tool's env var (TORCH_MLIR_OPT_PATH, LLVM_BIN_PATH, TRITON_OPT_PATH);
  2. $PATH, trying Debian's versioned names (`mlir-opt-22`) before the plain name, then
     /usr/lib/llvm-22/bin (the plain `opt`/`llc` on $PATH may be an older LLVM that cannot read
     torch-mlir's or Triton's output);
  3. the directory of the running Python (the venv's bin: `torch-mlir-opt` of the torch-mlir wheel and
     mirai's own `triton-opt` / `triton-llvm-opt` console scripts);
  4. for triton-opt / triton-llvm-opt, `python -m mirai.explorer.tritontools.<tool>`.

>>> TOOLS["opt"].command("-O2")[1][-2:]
['-S', '-O2']
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from mirai.explorer import flagpolicy
from mirai.explorer.errors import ExplorerError
from mirai.explorer.flagpolicy import FlagPolicy

LLVM_VERSION = "22"
LLVM_DIR = Path(f"/usr/lib/llvm-{LLVM_VERSION}/bin")


@dataclass(frozen=True)
class Tool:
    """One pipeline tool: `alias` as the guide names it, `field` the request field that drives it,
    `flag_policy` what its flags may not do (mirai.explorer.flagpolicy)."""

    alias: str
    field: str
    binary: str
    env_var: str | None = None
    extra_flags: tuple[str, ...] = ()
    versioned: bool = False
    python_module: str | None = None
    note: str = ""
    flag_policy: FlagPolicy = flagpolicy.ANY_TOOL

    def resolve(self) -> list[str] | None:
        """The command prefix that runs this tool, or None when it is nowhere to be found."""
        if self.env_var and os.environ.get(self.env_var):
            return [os.path.join(os.environ[self.env_var], self.binary)]
        names = [f"{self.binary}-{LLVM_VERSION}"] if self.versioned else []
        for name in names:
            if found := shutil.which(name):
                return [found]
        if self.versioned and (LLVM_DIR / self.binary).exists():
            return [str(LLVM_DIR / self.binary)]
        if found := shutil.which(self.binary):
            return [found]
        beside_python = Path(sys.executable).parent / self.binary
        if beside_python.exists():
            return [str(beside_python)]
        if self.python_module:
            return [sys.executable, "-m", self.python_module]
        return None

    def check_flags(self, flags: str, allowed: list[str] | None = None) -> None:
        """Raise ExplorerError when the policy refuses any of `flags`; runs nothing.

        >>> TOOLS["llc"].check_flags("-o /tmp/x")
        Traceback (most recent call last):
        mirai.explorer.errors.ExplorerError: Invalid flags for llc
        """
        self.flag_policy.check(self.alias, _split(flags), flags)

    def command(self, flags: str, allowed: list[str] | None = None) -> tuple[str, list[str]]:
        """(name shown in the delimiter, argv) for one stage with `flags` (a shell-quoted string)."""
        return self.alias, self.argv(_split(flags))

    def argv(self, args: list[str] | tuple[str, ...]) -> list[str]:
        """The full command line for already-split arguments."""
        prefix = self.resolve()
        if prefix is None:
            where = f"${self.env_var} or $PATH" if self.env_var else "$PATH"
            raise ExplorerError(f"{self.alias}: executable not found", f"looked in {where}")
        return [*prefix, *self.extra_flags, *args]


@dataclass(frozen=True)
class UserTool(Tool):
    """`user_tool`: the first token of the flags is the executable; the operator must allow it."""

    def resolve(self) -> list[str] | None:
        return None

    def check_flags(self, flags: str, allowed: list[str] | None = None) -> None:
        """The executable must be allowed; the flags after it are checked as any tool's."""
        _, rest = self._allowed(flags, allowed)
        self.flag_policy.check(self.alias, rest, flags)

    def command(self, flags: str, allowed: list[str] | None = None) -> tuple[str, list[str]]:
        name, rest = self._allowed(flags, allowed)
        found = shutil.which(name)  # a path (with "/") is taken as it is when executable
        if found is None:
            raise ExplorerError(f"user_tool: executable '{name}' not found on $PATH")
        return name, [found, *rest]

    @staticmethod
    def _allowed(flags: str, allowed: list[str] | None) -> tuple[str, list[str]]:
        """(executable, its flags). "*" in `allowed` (`mirai serve --allow-user-tools`) lets any
        executable run, by name or by path; else it must be named in the list."""
        tokens = _split(flags)
        if not tokens:
            raise ExplorerError("user_tool: no executable given", "the first token names it")
        name, rest = tokens[0], tokens[1:]
        allowed = allowed or []
        if name not in allowed and "*" not in allowed:
            raise ExplorerError(
                f"user_tool: executable '{name}' is not allowed",
                "the operator allows executables by name: "
                "`mirai serve --allow-user-tool NAME` (or MIRAI_EXPLORER_ALLOWED_USER_TOOLS), or "
                "any executable with `--allow-user-tools` (for one user on their own machine)",
            )
        return name, rest


def _split(flags: str) -> list[str]:
    try:
        return shlex.split(flags)
    except ValueError as err:
        raise ExplorerError("cannot parse tool flags", f"{flags!r}: {err}") from None


_TOOL_LIST = [
    Tool(
        "torch-mlir-opt",
        "torch_mlir_opt",
        "torch-mlir-opt",
        "TORCH_MLIR_OPT_PATH",
        note="the torch-mlir wheel's torch-mlir-opt",
        flag_policy=flagpolicy.LLVM,
    ),
    Tool(
        "mlir-opt",
        "mlir_opt",
        "mlir-opt",
        "LLVM_BIN_PATH",
        versioned=True,
        note="Debian mlir-22-tools",
        flag_policy=flagpolicy.LLVM,
    ),
    Tool(
        "mlir-translate",
        "mlir_translate",
        "mlir-translate",
        "LLVM_BIN_PATH",
        versioned=True,
        note="Debian mlir-22-tools",
        flag_policy=flagpolicy.LLVM,
    ),
    Tool(
        "opt",
        "llvm_opt",
        "opt",
        "LLVM_BIN_PATH",
        extra_flags=("-S",),
        versioned=True,
        note="Debian llvm-22; -S is added so the output stays text",
        flag_policy=flagpolicy.LLVM,
    ),
    Tool(
        "llc",
        "llc",
        "llc",
        "LLVM_BIN_PATH",
        versioned=True,
        note="Debian llvm-22",
        flag_policy=flagpolicy.LLVM,
    ),
    Tool(
        "triton-opt",
        "triton_opt",
        "triton-opt",
        "TRITON_OPT_PATH",
        python_module="mirai.explorer.tritontools.opt",
        note="mirai's triton-opt on Triton's Python bindings: MLIR pass names as flags",
        flag_policy=flagpolicy.TRITON_OPT,
    ),
    Tool(
        "triton-llvm-opt",
        "triton_llvm_opt",
        "triton-llvm-opt",
        "TRITON_OPT_PATH",
        python_module="mirai.explorer.tritontools.llvm_opt",
        note="mirai's triton-llvm-opt on Triton's bundled LLVM",
        flag_policy=flagpolicy.TRITON_LLVM_OPT,
    ),
    UserTool("user-tool", "user_tool", "", note="first token: an executable the operator allowed"),
]

TOOLS: dict[str, Tool] = {}
for _tool in _TOOL_LIST:
    if _tool.alias in TOOLS:
        raise RuntimeError(f"duplicate tool alias {_tool.alias!r}")
    TOOLS[_tool.alias] = _tool
