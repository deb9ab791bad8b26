"""Check that the cuBLASLt declarations of the generated runtime match the real cublasLt.h.

The generated code declares the part of cuBLASLt's C API it uses itself (so it builds without the
CUDA toolkit). On a machine that has the headers (a CUDA toolkit, or the nvidia-cublas wheels that
PyTorch's CUDA builds install), this compiles a file that includes both and asserts that every
constant, the heuristic result's layout and every function's type agree.

    python tests/gpu/check_cublaslt_abi.py GENERATED_DIR [--include DIR ...]

Exit status 0 when they agree, 1 when they do not, 2 when no cublasLt.h is found.
"""

from __future__ import annotations

import argparse
import glob
import os
import subprocess
import sys
import tempfile
from pathlib import Path

CONSTANTS = {
    "kCublasCompute32F": "CUBLAS_COMPUTE_32F",
    "kCublasCompute32FFastTF32": "CUBLAS_COMPUTE_32F_FAST_TF32",
    "kCublasOpN": "CUBLAS_OP_N",
    "kCublasOpT": "CUBLAS_OP_T",
    "kMatmulDescTransA": "CUBLASLT_MATMUL_DESC_TRANSA",
    "kMatmulDescTransB": "CUBLASLT_MATMUL_DESC_TRANSB",
    "kMatmulDescEpilogue": "CUBLASLT_MATMUL_DESC_EPILOGUE",
    "kMatmulDescBiasPointer": "CUBLASLT_MATMUL_DESC_BIAS_POINTER",
    "kMatmulDescBiasBatchStride": "CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE",
    "kEpilogueDefault": "CUBLASLT_EPILOGUE_DEFAULT",
    "kEpilogueBias": "CUBLASLT_EPILOGUE_BIAS",
    "kLayoutBatchCount": "CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT",
    "kLayoutStridedBatchOffset": "CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET",
    "kPrefMaxWorkspaceBytes": "CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES",
    "kPrefMinAlignmentABytes": "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES",
    "kPrefMinAlignmentABytes + 1": "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES",
    "kPrefMinAlignmentABytes + 2": "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES",
    "kPrefMinAlignmentABytes + 3": "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES",
    "CUDA_R_32F": "::CUDA_R_32F",
    "CUDA_R_16F": "::CUDA_R_16F",
    "CUDA_R_16BF": "::CUDA_R_16BF",
}
FUNCTIONS = [
    "cublasLtCreate",
    "cublasLtMatmulDescCreate",
    "cublasLtMatmulDescDestroy",
    "cublasLtMatmulDescSetAttribute",
    "cublasLtMatrixLayoutCreate",
    "cublasLtMatrixLayoutDestroy",
    "cublasLtMatrixLayoutSetAttribute",
    "cublasLtMatmulPreferenceCreate",
    "cublasLtMatmulPreferenceDestroy",
    "cublasLtMatmulPreferenceSetAttribute",
    "cublasLtMatmulAlgoGetHeuristic",
    "cublasLtMatmul",
    "cublasLtGetStatusString",
]


def find_includes() -> list[str]:
    """Folders holding cublasLt.h and the CUDA headers it includes."""
    roots = []
    try:
        import nvidia

        roots += [str(Path(p)) for p in nvidia.__path__]
    except ImportError:
        pass
    patterns = ["/usr/local/cuda*/include", "/usr/local/cuda*/targets/*/include"]
    patterns += [f"{r}/*/include" for r in roots] + [f"{r}/include" for r in roots]
    found = []
    for pattern in patterns:
        for folder in sorted(glob.glob(pattern)):
            if folder not in found and any(
                os.path.exists(os.path.join(folder, h))
                for h in ("cublasLt.h", "cuda_runtime_api.h")
            ):
                found.append(folder)
    return found


def source(runtime: Path) -> str:
    lines = [
        "#include <cstddef>",
        "#include <cublasLt.h>",
        f'#include "{runtime}"',
        "namespace m = mirai_rt;",
        "template <typename F> struct Arity;",
        "template <typename R, typename... A> struct Arity<R (*)(A...)> {",
        "  static constexpr int value = sizeof...(A);",
        "};",
    ]
    for ours, theirs in CONSTANTS.items():
        lines.append(
            f"static_assert(static_cast<long long>(m::{ours}) == "
            f'static_cast<long long>({theirs}), "{ours} != {theirs}");'
        )
    for field in ("algo", "workspaceSize", "state", "wavesCount"):
        lines.append(
            f"static_assert(offsetof(m::cublasLtMatmulHeuristicResult_t, {field}) == "
            f'offsetof(::cublasLtMatmulHeuristicResult_t, {field}), "{field}");'
        )
    lines.append(
        "static_assert(sizeof(m::cublasLtMatmulHeuristicResult_t) == "
        'sizeof(::cublasLtMatmulHeuristicResult_t), "heuristic result size");'
    )
    lines.append(
        "static_assert(sizeof(m::cublasLtMatmulAlgo_t) == sizeof(::cublasLtMatmulAlgo_t), "
        '"algo size");'
    )
    # Every entry of the runtime's table takes as many arguments as the real function.
    for name in FUNCTIONS:
        lines.append(
            f"static_assert(Arity<decltype(m::CublasLt::{name})>::value == "
            f'Arity<decltype(&::{name})>::value, "{name}: number of arguments");'
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("generated", type=Path, help="a generated folder (its mirai_runtime.h)")
    parser.add_argument("--include", action="append", default=[], help="extra include folders")
    args = parser.parse_args(argv)
    includes = args.include + find_includes()
    if not any(os.path.exists(os.path.join(i, "cublasLt.h")) for i in includes):
        print("check_cublaslt_abi: no cublasLt.h found", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "abi.cc"
        path.write_text(source((args.generated / "mirai_runtime.h").resolve()))
        cmd = ["g++", "-std=c++17", "-fsyntax-only", str(path)]
        cmd += [f"-I{i}" for i in includes]
        result = subprocess.run(cmd, capture_output=True, text=True)
    header = next(i for i in includes if os.path.exists(os.path.join(i, "cublasLt.h")))
    if result.returncode != 0:
        print(f"cuBLASLt declarations DIFFER from {header}/cublasLt.h:\n{result.stderr[-6000:]}")
        return 1
    print(
        f"cuBLASLt declarations match {header}/cublasLt.h: {len(CONSTANTS)} constants, the "
        f"heuristic result layout, {len(FUNCTIONS)} functions"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
