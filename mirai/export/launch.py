"""Run generated launch code from Python on torch tensors, without TensorFlow.

The generated `<Op>_capi.cc` is a C interface over `<Op>_launch.h`, the same launch code the TensorFlow
op wraps. `GeneratedOp` builds it with g++, loads it with ctypes and calls it on the current torch
stream, allocating outputs and temporaries with torch's allocator. GPU tests and benchmarks use this,
so they test exactly what TensorFlow runs.

With `host=True` the same launch code runs on CPU tensors against mirai's CPU stand-in for the CUDA
driver (mirai.export.hostdriver), which interprets every launched kernel: that needs a process started with
TRITON_INTERPRET=1, which `mirai.export.hostdriver.HostRunner` provides.

With `check_inputs=True` every call also checks that the op left its inputs as they were, bit for
bit: a TensorFlow op must never write into its inputs, which other ops may share. `mirai verify` and
the CPU worker check every call; benchmarks leave it off (it copies each input).

    >>> fwd = GeneratedOp("generated", "PffnFwd")  # doctest: +SKIP
    >>> outputs = fwd(inputs)             # list of torch tensors  # doctest: +SKIP
"""

from __future__ import annotations

import ctypes
import json
import math
import os
from pathlib import Path

from mirai import process
from mirai.errors import MiraiError
from mirai.export.plan import Wiring

ALLOCATE = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)


class OpError(MiraiError):
    """The launch code returned an error: `code` 1 is InvalidArgument, 2 Internal."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


def build_capi(directory: Path, op: str) -> Path:
    source = directory / f"{op}_capi.cc"
    library = directory / f"{op}_capi.so"
    inputs = [source, directory / "mirai_runtime.h"]
    inputs += [directory / f"{op}_{part}.h" for part in ("launch", "kernels")]
    newest = max(p.stat().st_mtime for p in inputs if p.exists())
    if not library.exists() or library.stat().st_mtime < newest:
        process.run(
            [
                os.environ.get("CXX", "g++"),
                "-std=c++17",
                "-O2",
                "-shared",
                "-fPIC",
                str(source),
                "-o",
                str(library),
                "-ldl",
            ],
            stage=f"build the C interface of {op}",
            timeout=600,
        )
    return library


def _function(lib, name: str, restype, argtypes):
    fn = getattr(lib, name)
    fn.restype = restype
    fn.argtypes = argtypes
    return fn


class GeneratedOp:
    """One generated op (e.g. PffnFwd), callable on torch tensors."""

    def __init__(self, directory, op: str, host: bool = False, check_inputs: bool = False):
        self.directory = Path(directory)
        self.op = op
        self.host = host
        self.check_inputs = check_inputs
        manifest = json.loads((self.directory / "manifest.json").read_text())
        self.spec = manifest["ops"][op]
        if host:
            from mirai.export.hostdriver import driver

            self._driver = driver.get()
            self._driver.index.add_directory(self.directory)
            self._cc = driver.compute_capability(manifest["targets"])
        lib = ctypes.CDLL(str(build_capi(self.directory, op)))
        i64p, vpp = ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_void_p)
        self._bind = _function(
            lib,
            f"mirai_{op}_bind",
            ctypes.c_int,
            [i64p, ctypes.POINTER(ctypes.c_int), i64p, ctypes.c_char_p, ctypes.c_size_t],
        )
        self._shape = _function(lib, f"mirai_{op}_output_shape", None, [ctypes.c_int, i64p, i64p])
        self._run = _function(
            lib,
            f"mirai_{op}_run",
            ctypes.c_int,
            [
                ctypes.c_void_p,
                i64p,
                vpp,
                vpp,
                ALLOCATE,
                ctypes.c_void_p,
                ctypes.c_char_p,
                ctypes.c_size_t,
            ],
        )
        self._binaries = _function(
            lib,
            f"mirai_{op}_binaries",
            ctypes.c_int,
            [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t],
        )
        self.num_symbols = getattr(lib, f"mirai_{op}_num_symbols")()
        ranks = [len(i["sizes"]) for i in self.spec["inputs"]]
        ranks += [len(o["sizes"]) for o in self.spec["outputs"]]
        self.max_rank = max(ranks + [1])

    def binaries(self, cc: int) -> dict[str, str | None]:
        """What each kernel (by entry name) loads on a GPU of compute capability `cc` (e.g. 86):
        "cubin sm_80", "PTX sm_80" (compiled by the driver), or None. Needs no GPU."""
        text = ctypes.create_string_buffer(1 << 16)
        self._binaries(int(cc), text, len(text))
        choices = {}
        for line in text.value.decode().splitlines():
            name, _, choice = line.partition(": ")
            choices[name] = None if choice.startswith("none") else choice
        return choices

    def bind(self, inputs):
        n = len(self.spec["inputs"])
        if len(inputs) != n:
            raise MiraiError(f"{self.op} takes {n} inputs, got {len(inputs)}")
        dims = (ctypes.c_int64 * (n * self.max_rank))()
        ranks = (ctypes.c_int * n)()
        for i, t in enumerate(inputs):
            ranks[i] = t.dim()
            for d, size in enumerate(t.shape[: self.max_rank]):
                dims[i * self.max_rank + d] = size
        symbols = (ctypes.c_int64 * max(self.num_symbols, 1))()
        err = ctypes.create_string_buffer(2048)
        code = self._bind(dims, ranks, symbols, err, len(err))
        if code:
            raise OpError(code, err.value.decode())
        return symbols

    def __call__(self, inputs, stream=None):
        where = "CPU" if self.host else "CUDA"
        for spec, t in zip(self.spec["inputs"], inputs):
            if str(t.dtype).replace("torch.", "") != spec["dtype"] or t.is_cuda == self.host:
                raise MiraiError(
                    f"{self.op}: input {spec['name']} must be a {where} {spec['dtype']} tensor"
                )
            if t.device != inputs[0].device:
                raise MiraiError(
                    f"{self.op}: input {spec['name']} is on {t.device}, not with the others"
                )
            if not t.is_contiguous():
                raise MiraiError(f"{self.op}: input {spec['name']} must be contiguous")
        symbols = self.bind(inputs)
        if self.check_inputs:
            before = [t.clone() for t in inputs]
            outputs = self._call(inputs, symbols, stream)
            self._check_kept(before, inputs)
            return outputs
        return self._call(inputs, symbols, stream)

    def _check_kept(self, before, inputs) -> None:
        """Raise if a call changed any input (compared as raw bytes, so NaNs compare too)."""
        import torch

        if not self.host:
            torch.cuda.synchronize(inputs[0].device)  # the op may run on a stream of its own
        for spec, old, new in zip(self.spec["inputs"], before, inputs):
            raw = lambda t: t.reshape(-1).view(torch.uint8)  # noqa: E731
            if not torch.equal(raw(old), raw(new)):
                changed = int((raw(old) != raw(new)).sum())
                raise MiraiError(
                    f"{self.op} wrote into its input {spec['name']!r} ({changed} bytes changed): "
                    "a generated op must leave its inputs unchanged"
                )

    def _call(self, inputs, symbols, stream):
        import torch

        device = inputs[0].device
        if self.host:
            self._driver.configure(self._cc)
            return self._launch(inputs, symbols, 0, device)
        if stream is None:
            stream = torch.cuda.current_stream(device).cuda_stream
        if stream == 0:
            # torch's default stream is the legacy NULL stream: the current device's, so make the
            # inputs' device current (as a framework with its own streams never needs to)
            with torch.cuda.device(device):
                return self._launch(inputs, symbols, stream, device)
        # The launch code runs on the device of its stream, whatever this thread has current.
        return self._launch(inputs, symbols, stream, device)

    def _launch(self, inputs, symbols, stream, device):
        import torch

        held = []  # temporaries: torch's allocator keeps their reuse ordered on this stream

        def empty(nbytes):
            t = torch.empty(int(nbytes), dtype=torch.uint8, device=device)
            if self.host:
                t.fill_(0xFF)  # poison (NaN in every float type): memory no kernel wrote shows
            return t

        def allocate(ctx, nbytes):
            t = empty(nbytes)
            held.append(t)
            return t.data_ptr()

        outputs = []
        for j, out in enumerate(self.spec["outputs"]):
            dims = (ctypes.c_int64 * self.max_rank)()
            self._shape(j, symbols, dims)
            shape = [dims[d] for d in range(len(out["sizes"]))]
            dtype = getattr(torch, out["dtype"])
            numel = math.prod(shape)
            outputs.append(empty(numel * dtype.itemsize).view(dtype).view(shape))
        in_ptrs = (ctypes.c_void_p * max(len(inputs), 1))(*[t.data_ptr() for t in inputs])
        out_ptrs = (ctypes.c_void_p * max(len(outputs), 1))(*[t.data_ptr() for t in outputs])
        err = ctypes.create_string_buffer(2048)
        callback = ALLOCATE(allocate)
        code = self._run(
            ctypes.c_void_p(stream), symbols, in_ptrs, out_ptrs, callback, None, err, len(err)
        )
        if code:
            raise OpError(code, err.value.decode())
        return outputs


class GeneratedFunction:
    """The forward and backward ops of one export, wired as the generated TensorFlow API wires them."""

    def __init__(self, directory, host: bool = False, check_inputs: bool = False):
        self.directory = Path(directory)
        manifest = json.loads((self.directory / "manifest.json").read_text())
        self.name = manifest["name"]
        if "wiring" not in manifest:
            raise MiraiError(
                f"{self.directory}: the manifest has no wiring; rebuild with this mirai"
            )
        self.wiring = Wiring.from_json(manifest["wiring"])
        self.num_outputs = self.wiring.num_outputs
        self.forward = GeneratedOp(self.directory, f"{self.name}Fwd", host, check_inputs)
        bwd = f"{self.name}Bwd"
        self.backward = (
            GeneratedOp(self.directory, bwd, host, check_inputs) if bwd in manifest["ops"] else None
        )

    def __call__(self, inputs):
        """Forward only: the user-visible outputs (on the current stream of the inputs' device)."""
        return self.forward(inputs)[: self.num_outputs]

    def forward_backward(self, inputs, grad_outputs):
        """Outputs, and the gradient of every input (None where an input has none)."""
        results = self.forward(inputs)
        n = self.wiring.num_outputs
        outputs, residuals = results[:n], results[n:]
        if self.backward is None:
            return outputs, [None] * len(inputs)
        tangents = [g.contiguous() for g in grad_outputs]
        grads = self.backward(self.wiring.backward_args(inputs, outputs, residuals, tangents))
        return outputs, self.wiring.gradients_of(grads)
