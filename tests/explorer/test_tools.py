"""The tool registry and mirai's triton-opt / triton-llvm-opt, without a server."""

from __future__ import annotations

import subprocess
import sys

import pytest

from mirai.explorer.errors import ExplorerError
from mirai.explorer.pipeline import Stage, stages_of
from mirai.explorer.tools import TOOLS

pytestmark = pytest.mark.tools  # LLVM/MLIR 22, torch-mlir-opt, triton-opt

TTIR = """
module {
  tt.func public @k(%p: !tt.ptr<f32>) {
    %c = arith.constant 1.0 : f32
    tt.store %p, %c : !tt.ptr<f32>
    tt.return
  }
}
"""


def test_stages_follow_the_guide_order():
    request = {"llc": "-O2", "mlir_opt": "--cse && --canonicalize", "user_tool": "cat"}
    assert stages_of(request) == [
        Stage("mlir-opt", "--cse"),
        Stage("mlir-opt", "--canonicalize"),
        Stage("llc", "-O2"),
        Stage("user-tool", "cat"),
    ]
    assert stages_of({"mlir_opt": " && ", "llc": ""}) == []


def test_llvm_tools_are_version_22():
    for alias in ("mlir-opt", "mlir-translate", "opt", "llc"):
        binary = TOOLS[alias].resolve()[0]
        version = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout
        assert "version 22" in version, (alias, binary, version)


def test_env_vars_override(monkeypatch, tmp_path):
    monkeypatch.setenv("LLVM_BIN_PATH", str(tmp_path) + "/")
    monkeypatch.setenv("TRITON_OPT_PATH", "/opt/triton/bin")
    monkeypatch.setenv("TORCH_MLIR_OPT_PATH", "/opt/tm/")
    assert TOOLS["opt"].command("-O2")[1] == [str(tmp_path) + "/opt", "-S", "-O2"]
    assert TOOLS["triton-llvm-opt"].resolve() == ["/opt/triton/bin/triton-llvm-opt"]
    assert TOOLS["torch-mlir-opt"].resolve() == ["/opt/tm/torch-mlir-opt"]


def test_user_tool_needs_permission():
    with pytest.raises(ExplorerError, match="not allowed"):
        TOOLS["user-tool"].command("cat -n", [])
    name, argv = TOOLS["user-tool"].command("cat -n", ["cat"])
    assert name == "cat" and argv[1:] == ["-n"]


def run(module: str, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", f"mirai.explorer.tritontools.{module}", *args]
    return subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=120)


def test_triton_opt_lists_and_runs_passes():
    listed = run("opt", "--list-passes").stdout
    assert "--tritongpu-coalesce" in listed and "--convert-triton-to-tritongpu" in listed
    converted = run("opt", "--convert-triton-to-tritongpu=num-warps=2", stdin=TTIR)
    assert converted.returncode == 0, converted.stderr
    assert '"ttg.num-warps" = 2' in converted.stdout


def test_triton_opt_errors():
    assert run("opt", "--no-such-pass", stdin=TTIR).returncode == 2
    bad = run("opt", "--cse", stdin="not mlir")
    assert bad.returncode == 1 and "cannot parse" in bad.stderr


def test_triton_llvm_opt_flags():
    assert run("llvm_opt", "--bogus").returncode == 2
    assert (
        "LLVM-dialect" in run("llvm_opt", "-O2", stdin="define void @f() {\n ret void\n}\n").stderr
    )
    ptx = run("llvm_opt", "-mcpu=sm_80", stdin="define void @f() {\n  ret void\n}\n")
    assert ptx.returncode == 0, ptx.stderr
    assert ".target sm_80" in ptx.stdout
