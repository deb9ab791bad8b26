"""Pipelines (guide §4.2): every tool field, `&&` chains, the fixed order, `opt -S`, exact delimiters."""

from __future__ import annotations

import pytest

import re

from explorer_samples import ADD_KERNEL, GUIDE_MODEL, LLVM_DIALECT, LLVM_IR, TWO_MODELS

pytestmark = pytest.mark.tools  # LLVM/MLIR 22, torch-mlir-opt, triton-opt

DELIMITER = re.compile(r"^===== IR after [\s\S]*? =====$", re.M)  # the guide's §5 regex


def headers(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("===== ")]


def test_no_pipeline_means_no_delimiters(server):
    output = server.ok(code=GUIDE_MODEL, ir_type="torch_mlir", dump_after_each_opt=True)
    assert "=====" not in output


def test_mlir_opt_chain_with_dump(server):
    output = server.ok(
        code=GUIDE_MODEL,
        ir_type="linalg_on_tensors_mlir",
        mlir_opt="--linalg-generalize-named-ops && --canonicalize",
        dump_after_each_opt=True,
    )
    assert output.startswith("===== Initial IR =====\n")
    assert headers(output) == [
        "===== Initial IR =====",
        "===== IR after mlir-opt --linalg-generalize-named-ops =====",
        "===== IR after mlir-opt --canonicalize =====",
    ]
    assert "\n\n===== IR after mlir-opt --linalg-generalize-named-ops =====\n" in output
    stages = DELIMITER.split(output)
    assert len(stages) == 3
    assert "linalg.matmul" in stages[0] and "linalg.matmul" not in stages[1]


def test_without_dump_only_the_last_stage(server):
    output = server.ok(
        code=GUIDE_MODEL, ir_type="linalg_on_tensors_mlir", mlir_opt="--linalg-generalize-named-ops"
    )
    assert "=====" not in output
    assert "linalg.generic" in output and "linalg.matmul" not in output


def test_fixed_order_and_opt_gets_dash_s(server):
    # Given in the opposite order: the guide's order (opt before llc) must win.
    output = server.ok(
        code=LLVM_IR,
        ir_type="raw_ir",
        selected_language="raw_ir",
        llc="-mtriple=nvptx64-nvidia-cuda -mcpu=sm_80",
        llvm_opt="-passes=instcombine",
        dump_after_each_opt=True,
    )
    assert headers(output) == [
        "===== Initial IR =====",
        "===== IR after opt -passes=instcombine =====",
        "===== IR after llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_80 =====",
    ]
    after_opt = output.split("===== IR after opt -passes=instcombine =====\n")[1].split("=====")[0]
    assert "define i32 @square_plus" in after_opt and "add i32" not in after_opt  # text, optimised
    assert ".target sm_80" in output


def test_mlir_translate_and_llc(server):
    output = server.ok(
        code=LLVM_DIALECT,
        ir_type="raw_ir",
        selected_language="raw_ir",
        mlir_translate="--mlir-to-llvmir",
        llc="-mtriple=amdgcn-amd-amdhsa -mcpu=gfx942",
    )
    assert "add:" in output and "v_add" in output


def test_torch_mlir_opt(server):
    output = server.ok(
        code=GUIDE_MODEL,
        ir_type="torch_mlir",
        torch_mlir_opt="--torch-backend-to-linalg-on-tensors-backend-pipeline",
    )
    assert "linalg.matmul" in output and "torch.aten" not in output


def test_pipeline_runs_per_model(server):
    output = server.ok(
        code=TWO_MODELS,
        ir_type="llvm_ir",
        llc="-mtriple=nvptx64-nvidia-cuda",
        dump_after_each_opt=1,
    )
    assert output.count("===== Initial IR =====") == 2
    assert output.count("===== IR after llc -mtriple=nvptx64-nvidia-cuda =====") == 2


def test_triton_opt(server):
    output = server.ok(
        code=ADD_KERNEL,
        ir_type="triton_gpu_ir",
        triton_opt="--tritongpu-coalesce && --tritongpu-remove-layout-conversions",
        dump_after_each_opt=True,
    )
    assert headers(output) == [
        "===== Initial IR =====",
        "===== IR after triton-opt --tritongpu-coalesce =====",
        "===== IR after triton-opt --tritongpu-remove-layout-conversions =====",
    ]
    assert output.count("tt.func public @add_kernel") == 3


def test_triton_opt_pass_options(server):
    output = server.ok(
        code=ADD_KERNEL,
        ir_type="triton_ir",
        triton_opt="'--convert-triton-to-tritongpu=target=cuda:80 num-warps=8'",
    )
    assert '"ttg.num-warps" = 8' in output and 'ttg.target = "cuda:80"' in output


def test_triton_opt_then_triton_llvm_opt(server):
    lower = (
        "--allocate-shared-memory-nv --tritongpu-global-scratch-memory-allocation "
        "--convert-triton-gpu-to-llvm --canonicalize --cse --convert-nv-gpu-to-llvm "
        "--convert-warp-specialize-to-llvm --canonicalize --cse --symbol-dce --convert-nvvm-to-llvm"
    )
    output = server.ok(
        code=ADD_KERNEL,
        ir_type="triton_gpu_ir",
        triton_opt=lower,
        triton_llvm_opt="-O3 --emit=asm",
    )
    assert ".visible .entry add_kernel(" in output


def test_triton_llvm_opt_on_triton_llvm_ir(server):
    output = server.ok(code=ADD_KERNEL, ir_type="triton_llvm_ir", triton_llvm_opt="-mcpu=sm_80")
    assert ".target sm_80" in output and ".visible .entry add_kernel(" in output


def test_user_tool_allowed(server):
    output = server.ok(
        code="line one\nline two\n",
        ir_type="raw_ir",
        selected_language="raw_ir",
        user_tool="cat -n",
        dump_after_each_opt=True,
    )
    assert headers(output) == ["===== Initial IR =====", "===== IR after cat -n ====="]
    assert "     2\tline two" in output


def test_user_tool_refused_unless_allowed(server):
    result = server.generate(
        code="x", ir_type="raw_ir", selected_language="raw_ir", user_tool="ls /"
    )
    assert result["status"] == "error"
    assert result["message"] == "user_tool: executable 'ls' is not allowed"


def test_unknown_tool_flag_reports_stderr(server):
    result = server.generate(
        code=LLVM_DIALECT, ir_type="raw_ir", selected_language="raw_ir", mlir_opt="--no-such-pass"
    )
    assert result["status"] == "error"
    assert result["message"].startswith("mlir-opt --no-such-pass failed")
    assert "no-such-pass" in result["detail"] and "command:" in result["detail"]


def test_triton_opt_unknown_pass_is_named(server):
    result = server.generate(code=ADD_KERNEL, ir_type="triton_ir", triton_opt="--tritongpu-coalesc")
    assert result["status"] == "error" and "triton-opt" in result["message"]
    assert "unknown pass --tritongpu-coalesc" in result["detail"]
    assert "--tritongpu-coalesce" in result["detail"]
