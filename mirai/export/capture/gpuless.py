"""GPU-less capture: make a CPU-only torch build compile Inductor graphs for a named CUDA target.

Inductor only generates CUDA Triton kernels when it believes a CUDA device exists. On a machine without
one, this module makes it believe so, for one worker process, and nothing more:

1. a small C++ shim (native/fake_cuda.cc) registers a no-op CUDA device guard and CUDA hooks that report
   one device; it must be loaded before torch is imported, so this runs in a dedicated process;
2. Python-level patches answer torch.cuda's device queries with the target's properties (SM count,
   shared memory, capability) and stub the calls that would need a driver;
3. the offline Triton driver (mirai.gpu.offline) reports the target, so Triton compiles for it
   without libcuda;
4. Inductor's pattern-matcher initialisation traces its patterns on the CPU (it would otherwise allocate
   real CUDA tensors), compilation stays in this process (one compile thread), and joint-graph constant
   folding is off (it would run CUDA kernels).

Everything here depends on torch/Triton internals: it is written for the versions in mirai.gpu.versions and
the CPU CI exercises it on every change.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import sys
import types
from pathlib import Path

from mirai.errors import CaptureError
from mirai.gpu import offline
from mirai.export.native import build_library
from mirai.gpu.targets import Target

SHIM_SOURCE = Path(__file__).with_name("native") / "fake_cuda.cc"


def _torch_dir() -> Path:
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise CaptureError("torch is not installed")
    return Path(list(spec.submodule_search_locations)[0])


def build_shim() -> Path:
    """Compile the fake-CUDA shim against the installed torch (cached by torch build and source)."""
    torch_dir = _torch_dir()
    return build_library(
        SHIM_SOURCE,
        "fake_cuda",
        [
            "-O1",
            "-w",
            "-D_GLIBCXX_USE_CXX11_ABI=1",
            f"-I{torch_dir / 'include'}",
            f"-L{torch_dir / 'lib'}",
            f"-Wl,-rpath,{torch_dir / 'lib'}",
            "-lc10",
            "-ltorch_cpu",
        ],
        stage="build the GPU-less capture shim",
        key_extra=(torch_dir / "version.py").read_bytes(),
    )


def _device_properties(target: Target):
    return types.SimpleNamespace(
        name=f"{target.device_name} (GPU-less target {target.name})",
        major=target.major,
        minor=target.minor,
        multi_processor_count=target.multi_processor_count,
        total_memory=target.total_memory,
        warp_size=target.warp_size,
        max_threads_per_multi_processor=target.max_threads_per_multi_processor,
        max_threads_per_block=target.max_threads_per_block,
        regs_per_multiprocessor=target.regs_per_multiprocessor,
        shared_memory_per_block_optin=target.shared_memory_per_block_optin,
        shared_memory_per_multiprocessor=target.shared_memory_per_block_optin + 1024,
        shared_memory_per_block=49152,
        L2_cache_size=target.l2_cache_size,
        gcnArchName="",
        uuid="00000000-0000-0000-0000-000000000000",
        is_integrated=False,
        is_multi_gpu_board=False,
    )


def activate(target: Target) -> None:
    """Turn this process into a GPU-less capture process for `target`. Call before importing torch."""
    if "torch" in sys.modules:
        raise CaptureError(
            "GPU-less capture must start in a fresh process (torch was already imported)"
        )
    ctypes.CDLL(str(build_shim()), mode=ctypes.RTLD_GLOBAL)

    import torch
    import torch._dynamo.device_interface as device_interface
    import torch.utils._triton as torch_triton
    from torch._inductor.fx_passes import joint_graph, post_grad

    props = _device_properties(target)
    cuda = torch.cuda
    replacements = {
        "is_available": lambda: True,
        "device_count": lambda: 1,
        "current_device": lambda: 0,
        "set_device": lambda device: None,
        "synchronize": lambda device=None: None,
        "get_device_properties": lambda device=None: props,
        "get_device_capability": lambda device=None: (target.major, target.minor),
        "get_device_name": lambda device=None: props.name,
        "is_bf16_supported": lambda *args, **kwargs: target.major >= 8,
        "_exchange_device": lambda device: 0,
        "_maybe_exchange_device": lambda device: 0,
        "get_rng_state": lambda device="cuda": torch.empty(0, dtype=torch.uint8),
        "set_rng_state": lambda state, device="cuda": None,
    }
    for name, fn in replacements.items():
        setattr(cuda, name, fn)
    torch._C._cuda_getCurrentRawStream = lambda device: 0

    iface = device_interface.CudaInterface
    for name in ("current_device", "device_count", "set_device", "synchronize"):
        setattr(iface, name, staticmethod(replacements[name]))
    iface.get_device_properties = staticmethod(replacements["get_device_properties"])
    iface.exchange_device = staticmethod(replacements["_exchange_device"])
    iface.maybe_exchange_device = staticmethod(replacements["_maybe_exchange_device"])
    iface.get_raw_stream = staticmethod(lambda device: 0)
    device_interface.caching_worker_device_properties.clear()
    torch_triton.has_triton.cache_clear()

    # Inductor traces its replacement patterns on "cuda" when CUDA looks available; trace them on
    # the CPU instead (the patterns are device-independent).
    cpu = torch.device("cpu")
    joint_init, post_init = joint_graph.lazy_init, post_grad.lazy_init
    joint_graph.lazy_init = lambda input_device=None: joint_init(cpu)
    post_grad.lazy_init = lambda input_device=None: post_init(cpu)

    # The wrapper module is loaded after code generation; its kernels would be compiled for a real
    # device there. Capture reads kernel sources itself, so loading records nothing but the name.
    from torch._inductor import async_compile

    async_compile.AsyncCompile.triton = lambda self, kernel_name, source_code, *a, **k: (
        types.SimpleNamespace(kernel_name=kernel_name, gpuless=True)
    )
    offline.activate(target.triton(), benchmark="refuse")
