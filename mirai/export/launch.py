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
import os
import threading
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
                "-fvisibility=hidden",  # only the C interface (capi.cc.j2's MIRAI_CAPI) is exported
                str(source),
                "-o",
                str(library),
                "-ldl",
            ],
            stage=f"build the C interface of {op}",
            timeout=600,
        )
    return library


def build_interfaces(folders) -> None:
    """Compile the C interface of every op of the builds in `folders` up front, in parallel (one g++
    per op; no GPU involved), so that timing or checking them later does not wait for compilers."""
    from concurrent.futures import ThreadPoolExecutor

    jobs = [
        (Path(folder), op)
        for folder in folders
        for op in json.loads((Path(folder) / "manifest.json").read_text())["ops"]
    ]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 4) as pool:
        list(pool.map(lambda job: build_capi(*job), jobs))


def _function(lib, name: str, restype, argtypes):
    fn = getattr(lib, name)
    fn.restype = restype
    fn.argtypes = argtypes
    return fn


class _CallState(threading.local):
    """What one thread's call in flight needs in the allocator callback, and its error buffer."""

    def __init__(self):
        self.device = None
        self.held: list = []
        self.err = ctypes.create_string_buffer(2048)


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
        import torch

        self._dtypes = [getattr(torch, i["dtype"]) for i in self.spec["inputs"]]
        self._out_dtypes = [getattr(torch, o["dtype"]) for o in self.spec["outputs"]]
        self._shapes: dict[tuple, tuple] = {}  # input shapes -> (symbols, output shapes)
        self._calls = _CallState()
        self._callback = ALLOCATE(self._allocate)  # made once: ctypes keeps it alive with the op
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
        """The size symbols for these inputs' shapes (InvalidArgument as OpError if they do not fit)."""
        return self._bound(tuple(tuple(t.shape) for t in inputs))[0]

    def _bound(self, shapes: tuple) -> tuple:
        """(symbols, output shapes) for input shapes `shapes`, bound once per distinct shapes."""
        cached = self._shapes.get(shapes)
        if cached is not None:
            return cached
        n = len(self.spec["inputs"])
        if len(shapes) != n:
            raise MiraiError(f"{self.op} takes {n} inputs, got {len(shapes)}")
        dims = (ctypes.c_int64 * (n * self.max_rank))()
        ranks = (ctypes.c_int * n)()
        for i, shape in enumerate(shapes):
            ranks[i] = len(shape)
            for d, size in enumerate(shape[: self.max_rank]):
                dims[i * self.max_rank + d] = size
        symbols = (ctypes.c_int64 * max(self.num_symbols, 1))()
        err = ctypes.create_string_buffer(2048)
        code = self._bind(dims, ranks, symbols, err, len(err))
        if code:
            raise OpError(code, err.value.decode())
        out_shapes = []
        for j, out in enumerate(self.spec["outputs"]):
            sizes = (ctypes.c_int64 * self.max_rank)()
            self._shape(j, symbols, sizes)
            out_shapes.append(tuple(sizes[d] for d in range(len(out["sizes"]))))
        if len(self._shapes) < 64:  # a dynamic op sees a few shapes again and again
            self._shapes[shapes] = (symbols, out_shapes)
        return symbols, out_shapes

    def __call__(self, inputs, stream=None):
        first = inputs[0].device if inputs else None
        for spec, dtype, t in zip(self.spec["inputs"], self._dtypes, inputs):
            if t.dtype != dtype or t.is_cuda == self.host:
                where = "CPU" if self.host else "CUDA"
                raise MiraiError(
                    f"{self.op}: input {spec['name']} must be a {where} {spec['dtype']} tensor"
                )
            if t.device != first:
                raise MiraiError(
                    f"{self.op}: input {spec['name']} is on {t.device}, not with the others"
                )
            if not t.is_contiguous():
                raise MiraiError(f"{self.op}: input {spec['name']} must be contiguous")
        symbols, out_shapes = self._bound(tuple(tuple(t.shape) for t in inputs))
        if self.check_inputs:
            before = [t.clone() for t in inputs]
            outputs = self._call(inputs, symbols, out_shapes, stream)
            self._check_kept(before, inputs)
            return outputs
        return self._call(inputs, symbols, out_shapes, stream)

    def _check_kept(self, before, inputs) -> None:
        """Raise if a call changed any input (compared as raw bytes, so NaNs compare too)."""
        import torch

        if not self.host:
            torch.cuda.synchronize(inputs[0].device)  # the op may run on a stream of its own

        def raw(t):
            return t.reshape(-1).view(torch.uint8)

        for spec, old, new in zip(self.spec["inputs"], before, inputs):
            if not torch.equal(raw(old), raw(new)):
                changed = int((raw(old) != raw(new)).sum())
                raise MiraiError(
                    f"{self.op} wrote into its input {spec['name']!r} ({changed} bytes changed): "
                    "a generated op must leave its inputs unchanged"
                )

    def _call(self, inputs, symbols, out_shapes, stream):
        import torch

        device = inputs[0].device
        if self.host:
            self._driver.configure(self._cc)
            return self._launch(inputs, symbols, out_shapes, 0, device)
        if stream is None:
            stream = torch.cuda.current_stream(device).cuda_stream
        if stream == 0:
            # torch's default stream is the legacy NULL stream: the current device's, so make the
            # inputs' device current (as a framework with its own streams never needs to)
            with torch.cuda.device(device):
                return self._launch(inputs, symbols, out_shapes, stream, device)
        # The launch code runs on the device of its stream, whatever this thread has current.
        return self._launch(inputs, symbols, out_shapes, stream, device)

    def _empty(self, shape, dtype, device):
        import torch

        t = torch.empty(shape, dtype=dtype, device=device)
        if self.host:
            t.view(torch.uint8).fill_(
                0xFF
            )  # poison (NaN in every float type): unwritten memory shows
        return t

    def _allocate(self, ctx, nbytes):
        """The launch code's allocator: a temporary from torch's caching allocator, kept alive until
        the call returns (torch keeps its reuse ordered on the call's stream)."""
        import torch

        call = self._calls
        t = self._empty((int(nbytes),), torch.uint8, call.device)
        call.held.append(t)
        return t.data_ptr()

    def _launch(self, inputs, symbols, out_shapes, stream, device):
        call = self._calls  # this thread's call: the allocator callback finds it here
        call.device, call.held = device, []
        outputs = [
            self._empty(shape, dtype, device) for shape, dtype in zip(out_shapes, self._out_dtypes)
        ]
        in_ptrs = (ctypes.c_void_p * max(len(inputs), 1))(*[t.data_ptr() for t in inputs])
        out_ptrs = (ctypes.c_void_p * max(len(outputs), 1))(*[t.data_ptr() for t in outputs])
        err = call.err
        try:
            code = self._run(
                ctypes.c_void_p(stream),
                symbols,
                in_ptrs,
                out_ptrs,
                self._callback,
                None,
                err,
                len(err),
            )
        finally:
            call.held = []
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

    def forward_for_backward(self, inputs, grad_outputs):
        """Run the forward op: its user outputs, and the backward op's arguments (None without a
        backward op)."""
        results = self.forward(inputs)
        n = self.wiring.num_outputs
        outputs, residuals = results[:n], results[n:]
        if self.backward is None:
            return outputs, None
        tangents = [g.contiguous() for g in grad_outputs]
        return outputs, self.wiring.backward_args(inputs, outputs, residuals, tangents)

    def forward_backward(self, inputs, grad_outputs):
        """Outputs, and the gradient of every input (None where an input has none)."""
        outputs, backward_args = self.forward_for_backward(inputs, grad_outputs)
        if backward_args is None:
            return outputs, [None] * len(inputs)
        return outputs, self.wiring.gradients_of(self.backward(backward_args))
