"""Run generated ops on a CPU: the launch code unchanged, a CPU stand-in for the CUDA driver under it.

The generated `<Op>_launch.h` is what TensorFlow runs; to check its numbers without a GPU, mirai gives
it a CUDA driver of its own (native/libcuda_host.cc, soname libcuda.so.1). "Device" memory is host
memory, copies are memcpy, and each `cuLaunchKernel` runs the launched kernel's
Triton source in Triton's interpreter, with the grid and the argument values the launch code passed.
So a CPU run checks what capture and planning decided: kernel order, arguments, grids, scratch and
temporary buffers, views and copies, input order, dynamic-size expressions. What it does not check is
the compiled binary itself (PTX/cubin codegen) and GPU timing: those need a GPU.

- `kernels`: identify module images, interpret launches;
- `driver`: load the stand-in into a process and serve its callbacks;
- `runner` (`HostRunner`) and `worker`: a process of its own for that, driven from any process.
"""

from mirai.export.hostdriver.runner import HostRunner

__all__ = ["HostRunner"]
