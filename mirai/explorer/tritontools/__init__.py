"""mirai's `triton-opt` and `triton-llvm-opt`: Triton's wheel ships neither, so these are built on
Triton's Python bindings (`triton._C.libtriton`). Installed as console scripts by pyproject; also
runnable as `python -m mirai.explorer.tritontools.opt` / `...llvm_opt`. Flags: docs/explorer.md.
"""
