"""The kernels of generated folders as the CPU driver sees them: images to identify, sources to interpret.

When the launch code loads a module, the driver hands over a pointer to the embedded cubin (an ELF
image) or PTX (a NUL-terminated string). `KernelIndex` measures the image, hashes it and finds which
kernel of which generated folder it is. `Interpreter` runs a launch of that kernel: it reads each
parameter the launch code passed (pointers and scalars, typed by the kernel's compiled signature),
and calls the kernel's Triton source under Triton's interpreter with the launch's grid, the
configuration's constexprs and tensors over the "device" (host) memory the pointers address.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import struct
from dataclasses import dataclass, field
from pathlib import Path

from mirai.errors import MiraiError

POINTER_DTYPES = {
    "fp32": "float32",
    "fp16": "float16",
    "bf16": "bfloat16",
    "fp64": "float64",
    "i64": "int64",
    "i32": "int32",
    "i16": "int16",
    "i8": "int8",
    "u8": "uint8",
    "i1": "bool",
}
# How the launch code stores each scalar: the C type the plan gives it (mirai.export.plan), read back.
_CTYPES = {
    "int8_t": ctypes.c_int8,
    "int16_t": ctypes.c_int16,
    "int32_t": ctypes.c_int32,
    "int64_t": ctypes.c_int64,
    "uint8_t": ctypes.c_uint8,
    "uint16_t": ctypes.c_uint16,
    "uint32_t": ctypes.c_uint32,
    "uint64_t": ctypes.c_uint64,
    "float": ctypes.c_float,
    "double": ctypes.c_double,
}


def read_scalar(address: int, ty: str):
    """The value of Triton type `ty` that the launch code stored at `address`."""
    from mirai.export.plan import SCALAR_CTYPE

    raw = _CTYPES[SCALAR_CTYPE[ty]].from_address(address).value
    if ty == "fp16":
        return struct.unpack("<e", struct.pack("<H", raw))[0]
    if ty == "bf16":
        return struct.unpack("<f", struct.pack("<I", raw << 16))[0]
    return raw if ty.startswith(("i", "u")) else float(raw)


@dataclass(frozen=True)
class KernelRef:
    """One binary of one kernel of a generated folder."""

    directory: Path
    precision: str
    op: str
    kernel: str
    target: str
    function: str
    params: tuple[tuple[str, str], ...]
    config: dict = field(hash=False, compare=False)

    @property
    def source_path(self) -> Path:
        return self.directory / self.precision / self.op / f"{self.kernel}.py"


def elf_size(address: int) -> int:
    """The size of the ELF image at `address`, from its headers (section contents and tables)."""
    header = ctypes.string_at(address, 64)
    if header[:4] != b"\x7fELF" or header[4] != 2:
        raise MiraiError("not a 64-bit ELF image")
    phoff, shoff = struct.unpack_from("<QQ", header, 0x20)
    phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", header, 0x36)
    end = max(64, phoff + phentsize * phnum, shoff + shentsize * shnum)
    for i in range(shnum):
        sh = ctypes.string_at(address + shoff + i * shentsize, shentsize)
        sh_type = struct.unpack_from("<I", sh, 4)[0]
        offset, size = struct.unpack_from("<QQ", sh, 0x18)
        if sh_type != 8:  # SHT_NOBITS occupies no file space
            end = max(end, offset + size)
    return end


def image_bytes(address: int) -> bytes:
    """The bytes of the module image the launch code passed to cuModuleLoadData."""
    if ctypes.string_at(address, 4) == b"\x7fELF":
        return ctypes.string_at(address, elf_size(address))
    return ctypes.string_at(address)  # PTX: NUL-terminated text


class KernelIndex:
    """Every cubin and PTX of the generated folders added, by the hash of its bytes."""

    def __init__(self) -> None:
        self._by_digest: dict[str, KernelRef] = {}
        self._directories: set[Path] = set()

    def add_directory(self, directory) -> None:
        directory = Path(directory).resolve()
        if directory in self._directories:
            return
        manifest = json.loads((directory / "manifest.json").read_text())
        precision = manifest["precision"]
        for op, spec in manifest["ops"].items():
            for kernel, entry in spec["kernels"].items():
                for target in entry["binaries"]:
                    stem = directory / precision / op / target / kernel
                    meta = json.loads(stem.with_suffix(".json").read_text())
                    ref = KernelRef(
                        directory=directory,
                        precision=precision,
                        op=op,
                        kernel=kernel,
                        target=target,
                        function=meta["function"],
                        params=tuple(tuple(p) for p in meta["params"]),
                        config=meta["config"],
                    )
                    for suffix in (".cubin", ".ptx"):
                        digest = hashlib.sha256(stem.with_suffix(suffix).read_bytes()).hexdigest()
                        self._by_digest[digest] = ref
        self._directories.add(directory)

    def identify(self, address: int) -> KernelRef:
        data = image_bytes(address)
        ref = self._by_digest.get(hashlib.sha256(data).hexdigest())
        if ref is None:
            raise MiraiError(
                f"the CPU driver was given a module image ({len(data)} bytes) that is none of the "
                f"kernels of {sorted(str(d) for d in self._directories)}: the launch code and its "
                "assets folder do not match (rebuild the folder)"
            )
        return ref


class Interpreter:
    """Runs launches of indexed kernels with Triton's interpreter (TRITON_INTERPRET=1)."""

    def __init__(self) -> None:
        self._functions: dict[Path, tuple[object, dict]] = {}

    def _load(self, ref: KernelRef):
        from mirai.gpu.kernels import load_kernel_module
        from mirai.gpu.offline import offline_triton
        from mirai.export.hostdriver import libdevice
        from mirai.gpu.targets import compile_target

        path = ref.source_path
        if path not in self._functions:
            # Inductor's kernel modules select the GPU driver at import; the offline one serves
            with offline_triton(compile_target(ref.target)):
                module = load_kernel_module(ref.kernel, path.read_text())
            libdevice.install(module)
            tuner = getattr(module, ref.function)
            fn = getattr(tuner, "fn", tuner)
            if type(fn).__name__ != "InterpretedFunction":
                raise MiraiError(
                    f"kernel {ref.kernel} did not load as an interpreted function: the CPU driver "
                    "must run in a process started with TRITON_INTERPRET=1"
                )
            self._functions[path] = (fn, dict(tuner.triton_meta.get("constants", {})))
        return self._functions[path]

    def launch(self, ref: KernelRef, grid, params_address: int) -> None:
        import torch

        fn, constants = self._load(ref)
        params = ctypes.cast(params_address, ctypes.POINTER(ctypes.c_void_p))
        kwargs = dict(constants)
        kwargs.update(ref.config.get("kwargs", {}))
        for k in ("num_warps", "num_stages"):
            if k in fn.arg_names and k not in kwargs:
                kwargs[k] = ref.config[k]
        for i, (name, ty) in enumerate(ref.params):
            slot = params[i]
            if ty.startswith("*"):
                address = ctypes.c_uint64.from_address(slot).value
                dtype = getattr(torch, POINTER_DTYPES[ty[1:]])
                kwargs[name] = _tensor_at(address, dtype)
            else:
                kwargs[name] = read_scalar(slot, ty)
        missing = [a for a in fn.arg_names if a not in kwargs]
        if missing:
            raise MiraiError(f"kernel {ref.kernel}: no value for {missing}")
        fn[tuple(int(g) for g in grid)](**kwargs)


def _tensor_at(address: int, dtype):
    """A one-element CPU tensor at `address`: Triton's interpreter only takes its data pointer."""
    import torch

    if address == 0:
        return torch.empty(0, dtype=dtype)
    size = torch.empty(0, dtype=dtype).element_size()
    return torch.frombuffer((ctypes.c_byte * size).from_address(address), dtype=dtype)
