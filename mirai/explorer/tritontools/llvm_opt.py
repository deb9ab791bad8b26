"""`triton-llvm-opt`: Triton's LLVM stage on Triton's bundled LLVM (the one that compiles its kernels).

    triton-llvm-opt < kernel.llir                                   # LLVM IR -> PTX (sm_90)
    triton-llvm-opt -mtriple=amdgcn-amd-amdhsa -mcpu=gfx942 < kernel.llir   # -> AMDGCN assembly
    triton-opt --allocate-shared-memory-nv --convert-triton-gpu-to-llvm < k.ttgir \\
        | triton-llvm-opt -O3 --emit=llvm                           # LLVM dialect -> optimised LLVM IR

Input (a file argument or stdin): LLVM IR text, or LLVM-dialect MLIR (what
`--convert-triton-gpu-to-llvm` produces). Flags:
  -O0 -O1 -O2 -O3        optimise (LLVM-dialect input only: Triton's bindings cannot parse LLVM IR
                         text into a module; use `opt` for that)
  --emit=llvm|asm        LLVM IR, or target assembly (default: llvm for MLIR input, asm for LLVM IR)
  -mtriple=T -mcpu=C -mattr=F   target (default nvptx64-nvidia-cuda, sm_90, +ptx87)
  -o FILE                output file (default stdout)
"""

from __future__ import annotations

import sys
import tempfile

DEFAULT_CPU = {"nvptx64-nvidia-cuda": "sm_90", "amdgcn-amd-amdhsa": "gfx942"}
DEFAULT_FEATURES = {"nvptx64-nvidia-cuda": "+ptx87"}
# Triton optimises NVPTX modules without a target machine (passing one crashes, triton 3.7) and
# AMDGCN modules with one; so does this tool.
TARGET_AWARE_OPT = ("amdgcn-amd-amdhsa",)


class UsageError(Exception):
    pass


def parse_args(argv: list[str]) -> dict:
    """Flags into a dict.

    >>> parse_args(["-O3", "-mcpu=sm_80"])["opt_level"], parse_args(["-mcpu=sm_80"])["cpu"]
    (3, 'sm_80')
    """
    args = {"opt_level": None, "emit": None, "triple": "nvptx64-nvidia-cuda", "cpu": None}
    args |= {"features": None, "input": "-", "output": "-"}
    values = iter(argv)
    for arg in values:
        flag, _, value = arg.lstrip("-").partition("=")
        if arg in ("-h", "--help"):
            print(__doc__)
            raise SystemExit(0)
        if arg == "-o":
            args["output"] = next(values, "-")
        elif arg.startswith("-O") and arg[2:] in ("0", "1", "2", "3"):
            args["opt_level"] = int(arg[2:])
        elif flag == "emit" and value in ("llvm", "asm"):
            args["emit"] = value
        elif flag in ("mtriple", "mcpu", "mattr") and value:
            args[{"mtriple": "triple", "mcpu": "cpu", "mattr": "features"}[flag]] = value
        elif arg.startswith("-") and arg != "-":
            raise UsageError(f"unknown flag {arg!r} (see --help)")
        else:
            args["input"] = arg
    args["cpu"] = args["cpu"] or DEFAULT_CPU.get(args["triple"], "")
    args["features"] = args["features"] or DEFAULT_FEATURES.get(args["triple"], "")
    return args


def _is_mlir(text: str) -> bool:
    return "llvm.func" in text or text.lstrip().startswith(("module", "#loc", "#"))


def _mlir_to_llvm_ir(text: str, args: dict) -> str:
    from triton._C.libtriton import amd, ir, llvm, nvidia

    ctx = ir.context()
    ir.load_dialects(ctx)
    nvidia.load_dialects(ctx)
    amd.load_dialects(ctx)
    with tempfile.NamedTemporaryFile("w", suffix=".mlir") as source:
        source.write(text)
        source.flush()
        module = ir.parse_mlir_module(source.name, ctx)
    llvm_context = llvm.context()
    llvm_module = llvm.to_module(module, llvm_context)
    if llvm_module is None:
        raise UsageError("the module could not be translated to LLVM IR (is it LLVM dialect?)")
    llvm.attach_datalayout(llvm_module, args["triple"], args["cpu"], args["features"])
    if args["opt_level"] is not None:
        level = [llvm.OPTIMIZE_O0, llvm.OPTIMIZE_O1, llvm.OPTIMIZE_O2, llvm.OPTIMIZE_O3]
        if args["triple"] in TARGET_AWARE_OPT:
            llvm.optimize_module(llvm_module, level[args["opt_level"]], args["cpu"])
        else:
            llvm.optimize_module(llvm_module, level[args["opt_level"]])
    return str(llvm_module)


def run(text: str, args: dict) -> str:
    from triton._C.libtriton import llvm

    llvm.init_targets()
    mlir_input = _is_mlir(text)
    emit = args["emit"] or ("llvm" if mlir_input else "asm")
    if mlir_input:
        text = _mlir_to_llvm_ir(text, args)
    elif args["opt_level"] is not None:
        raise UsageError("-O needs LLVM-dialect MLIR input; for LLVM IR text use `opt` (llvm_opt)")
    elif emit == "llvm":
        raise UsageError("the input is already LLVM IR; --emit=asm turns it into assembly")
    if emit == "llvm":
        return text
    return llvm.translate_to_asm(
        text, args["triple"], args["cpu"], args["features"], [], True, False
    )


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
        text = sys.stdin.read() if args["input"] == "-" else open(args["input"]).read()
        result = run(text, args)
    except UsageError as err:
        print(f"triton-llvm-opt: {err}", file=sys.stderr)
        return 2
    except Exception as err:  # parse/translate failures: diagnostics are already on stderr
        print(f"triton-llvm-opt: {type(err).__name__}: {err}", file=sys.stderr)
        return 1
    if args["output"] == "-":
        sys.stdout.write(result)
    else:
        with open(args["output"], "w") as out:
            out.write(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
