"""Load the CPU stand-ins for the CUDA driver and cuBLASLt into this process and serve their callbacks.

The driver's stand-in (native/libcuda_host.cc) has the soname libcuda.so.1. Loaded first, with
RTLD_GLOBAL, it is what the generated runtime's `dlopen("libcuda.so.1")` returns, so the launch code runs
unchanged. Its module loads and kernel launches call back into `HostDriver`, which identifies the image
(`KernelIndex`) and interprets the kernel (`Interpreter`). cuBLASLt's stand-in
(native/libcublaslt_host.cc, soname libcublasLt.so.13) is loaded the same way and computes the extern
GEMMs itself, a reference GEMM in fp32 (`HostDriver.gemms` counts them). The process must have been
started with TRITON_INTERPRET=1 and must not hold a real CUDA driver or cuBLASLt.
"""

from __future__ import annotations

import ctypes
import os
import traceback
from pathlib import Path

from mirai.errors import MiraiError
from mirai.export.hostdriver.kernels import Interpreter, KernelIndex, KernelRef
from mirai.export.native import build_library

SOURCE = Path(__file__).with_name("native") / "libcuda_host.cc"
CUBLASLT_SOURCE = Path(__file__).with_name("native") / "libcublaslt_host.cc"
CUBLASLT_SONAME = "libcublasLt.so.13"  # the first soname the runtime tries
LOAD = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p)
LAUNCH = ctypes.CFUNCTYPE(
    ctypes.c_int,
    ctypes.c_int64,
    ctypes.c_char_p,
    ctypes.c_uint,
    ctypes.c_uint,
    ctypes.c_uint,
    ctypes.c_uint,
    ctypes.c_uint,
    ctypes.c_void_p,
)
HOST_SHARED_MEMORY = 232448  # bytes per block (opt-in), as on sm_90: no target has more
HOST_SM_COUNT = 132


def compute_capability(targets) -> int:
    """The capability the CPU driver reports for a build's targets: the highest, so the launch code
    loads that target's cubin (any architecture, registered in this process or not)."""
    from mirai.gpu.targets import parse_spelling

    return max(parse_spelling(t)[1] for t in targets)


CUDA_ERROR_LAUNCH_FAILED = 719


def build() -> Path:
    return build_library(
        SOURCE,
        "libcuda_host",
        ["-O2", "-Wall", "-Wl,-soname,libcuda.so.1"],
        stage="build the CPU stand-in for the CUDA driver",
    )


def build_cublaslt() -> Path:
    """The CPU stand-in for cuBLASLt, built (or reused from the cache): a library to load with ctypes.

    >>> ctypes.CDLL(str(build_cublaslt())).mirai_host_cublaslt_version()
    1
    """
    return build_library(
        CUBLASLT_SOURCE,
        "libcublaslt_host",
        # No FMA contraction: the reference rounds every product and sum in IEEE fp32.
        ["-O2", "-Wall", "-ffp-contract=off", f"-Wl,-soname,{CUBLASLT_SONAME}"],
        stage="build the CPU stand-in for cuBLASLt",
    )


class HostDriver:
    """The process's CPU driver: one per process (see `get`)."""

    def __init__(self) -> None:
        from mirai.gpu import versions

        versions.check_host_driver()
        if os.environ.get("TRITON_INTERPRET") != "1":
            raise MiraiError(
                "the CPU driver runs kernels in Triton's interpreter: start the process with "
                "TRITON_INTERPRET=1 (mirai.export.hostdriver.HostRunner does)"
            )
        self.lib = ctypes.CDLL(str(build()), mode=ctypes.RTLD_GLOBAL)
        seen = ctypes.CDLL("libcuda.so.1")
        if not hasattr(seen, "mirai_host_driver_version"):
            raise MiraiError(
                "this process already has a real CUDA driver loaded; the CPU driver needs a "
                "process of its own"
            )
        cublaslt = build_cublaslt()
        self.cublaslt = ctypes.CDLL(str(cublaslt), mode=ctypes.RTLD_GLOBAL)
        if not hasattr(ctypes.CDLL(CUBLASLT_SONAME), "mirai_host_cublaslt_version"):
            raise MiraiError(
                f"this process already has a real cuBLASLt ({CUBLASLT_SONAME}) loaded; the CPU "
                "driver needs a process of its own"
            )
        # The runtime tries MIRAI_CUBLASLT before any soname: in this process it names the stand-in.
        os.environ["MIRAI_CUBLASLT"] = str(cublaslt)
        self.cublaslt.mirai_host_cublaslt_matmuls.restype = ctypes.c_int64
        self.index = KernelIndex()
        self.interpreter = Interpreter()
        self.modules: dict[int, KernelRef] = {}
        self.launches: list[tuple[str, str, tuple[int, int, int]]] = []  # (op, kernel, grid)
        self._load_cb = LOAD(self._on_load)
        self._launch_cb = LAUNCH(self._on_launch)
        self.lib.mirai_host_set_error.argtypes = [ctypes.c_char_p]
        self.lib.mirai_host_set_callbacks(self._load_cb, self._launch_cb)

    def configure(self, cc: int) -> None:
        """What the one "GPU" reports: its compute capability picks the binaries the launch code
        loads. Its shared memory is the largest of any target, so every binary's opt-in passes."""
        self.lib.mirai_host_configure(cc // 10, cc % 10, HOST_SHARED_MEMORY, HOST_SM_COUNT)

    def gemms(self) -> int:
        """How many GEMMs (cublasLtMatmul calls that ran) this process has computed."""
        return self.cublaslt.mirai_host_cublaslt_matmuls()

    def kernel_launches(self) -> int:
        """How many kernel launches the stand-in took, run or (dry) not."""
        return self.lib.mirai_host_launch_count()

    def set_dry(self, dry: bool) -> None:
        """Dry: launches and GEMMs are checked and counted, never run; outputs stay as they were.
        What is left of a call is the launch code's own host work (bench/bench_host_time.py)."""
        self.lib.mirai_host_set_dry(int(dry))
        self.cublaslt.mirai_host_cublaslt_set_dry(int(dry))

    def _error(self, message: str) -> None:
        self.lib.mirai_host_set_error(message.encode(errors="replace")[:8000])

    def _on_load(self, image) -> int:
        try:
            ref = self.index.identify(image)
        except Exception as err:  # noqa: BLE001 - reported to the launch code as a CUDA error
            self._error(str(err))
            return 0
        module = len(self.modules) + 1
        self.modules[module] = ref
        return module

    def _on_launch(self, module, name, gx, gy, gz, block, shared, params) -> int:
        ref = self.modules.get(module)
        name = name.decode()
        try:
            if ref is None or ref.function != name:
                raise MiraiError(f"no kernel {name} in module {module}")
            self.launches.append((ref.op, ref.kernel, (gx, gy, gz)))
            self.interpreter.launch(ref, (gx, gy, gz), params)
        except Exception as err:  # noqa: BLE001 - reported to the launch code as a CUDA error
            detail = "".join(traceback.format_exception_only(type(err), err)).strip()
            self._error(f"interpreting {name} on grid ({gx}, {gy}, {gz}): {detail}")
            return CUDA_ERROR_LAUNCH_FAILED
        return 0


_DRIVER: HostDriver | None = None


def get() -> HostDriver:
    """This process's CPU driver, loaded on first use."""
    global _DRIVER
    if _DRIVER is None:
        _DRIVER = HostDriver()
    return _DRIVER
