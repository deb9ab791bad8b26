"""Loading the Triton kernels Inductor generates: one kernel module's source -> its objects.

Capture reads each kernel's autotuner (its configurations and compile metadata), compile hands the
kernel to Triton's compiler, and the CPU driver runs it in Triton's interpreter; all load the module
here. Triton reads a @jit function's source with `inspect`, so the module must live in a real file:
it is written once, by the hash of its source, to a per-user temporary folder (never into a
generated folder).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import tempfile
import types


def load_kernel_module(name: str, source: str) -> types.ModuleType:
    """Import a kernel module's source (a fresh module object on every call)."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    folder = os.path.join(tempfile.gettempdir(), f"mirai-kernels-{os.getuid()}")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{name}_{digest}.py")
    if not os.path.exists(path):
        tmp = f"{path}.{os.getpid()}"
        with open(tmp, "w") as f:
            f.write(source)
        os.replace(tmp, path)
    spec = importlib.util.spec_from_file_location(f"mirai_kernel_{name}_{digest}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_kernel(name: str, source: str):
    """The kernel `name` of a kernel module's source: Inductor's autotuner object for it."""
    return getattr(load_kernel_module(name, source), name)
