"""Run a generated JAX API on the CPU: its XLA FFI handlers on XLA's CPU platform, the launch code
unchanged, and mirai's CPU stand-in for the CUDA driver under it (mirai.export.hostdriver).

XLA's CPU platform hands an FFI handler no stream and no scratch allocator (its device-memory
allocator is GPU-only), so the generated library has a second binding of the same adapter for it,
`mirai_<Op>_cpu`: a null stream and host memory for temporaries. The stand-in runs every launched
kernel in Triton's interpreter. That needs a process of its own, started with TRITON_INTERPRET=1
and holding the stand-in as libcuda.so.1 before anything else loads a driver: `JaxHostRunner`
keeps one, as `HostRunner` does for the C interface, and answers as `HostRunner` does, so
`mirai.export.verify` takes it as its runner.

    >>> with JaxHostRunner() as cpu:  # doctest: +SKIP
    ...     rows = verify(pffn, samples, "generated", batches=[3, 17], device="cpu", runner=cpu)
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from mirai.export.hostdriver.runner import HostRunner


class JaxHostRunner(HostRunner):
    """A worker that runs generated JAX APIs (jax.jit of the forward and of jax.vjp) on the CPU."""

    WORKER = "mirai.export.frameworks.jax_cpu"
    ENV = {**HostRunner.ENV, "JAX_PLATFORMS": "cpu", "JAX_ENABLE_X64": "1"}


class _Function:
    """One generated folder's JAX function in the worker: forward, and forward with its vjp."""

    def __init__(self, directory: str, host):
        import jax

        from mirai.export.frameworks import jax_ffi
        from mirai.export.hostdriver import driver
        from mirai.export.plan import Wiring, py_op_name

        manifest = json.loads((Path(directory) / "manifest.json").read_text())
        host.index.add_directory(directory)
        self.cc = driver.compute_capability(manifest["targets"])
        self.wiring = Wiring.from_json(manifest["wiring"])
        self.has_backward = f"{manifest['name']}Bwd" in manifest["ops"]
        api = jax_ffi.load(jax_ffi.build(directory))
        api.register("cpu")
        function = getattr(api, py_op_name(manifest["name"]))
        self.forward = jax.jit(function)

        def forward_backward(args, tangents):
            outputs, vjp = jax.vjp(function, *args)
            n = self.wiring.num_outputs
            return outputs, vjp(tangents[0] if n == 1 else tuple(tangents))

        self.forward_backward = jax.jit(forward_backward)

    def __call__(self, host, inputs, grad_outputs):
        """Outputs and gradients as torch tensors (None where an input gets no gradient)."""
        import numpy as np

        host.configure(self.cc)
        args = [_to_jax(t) for t in inputs]
        kept = [np.array(a) for a in args]
        if self.has_backward:
            outputs, grads = self.forward_backward(args, [_to_jax(t) for t in grad_outputs])
        else:
            outputs, grads = self.forward(*args), [None] * len(args)
        outputs = [outputs] if self.wiring.num_outputs == 1 else list(outputs)
        result = [_to_torch(o) for o in outputs]
        grads = [
            None if self.wiring.gradients[k] is None else _to_torch(g) for k, g in enumerate(grads)
        ]
        for k, (before, arg) in enumerate(zip(kept, args)):
            if not np.array_equal(before.view(np.uint8), np.asarray(arg).view(np.uint8)):
                raise RuntimeError(f"the op wrote into its input #{k}: a generated op never may")
        return result, grads


def _to_jax(t):
    import jax.numpy as jnp
    import torch

    if t.dtype == torch.bfloat16:  # numpy has no bfloat16; float32 holds every value exactly
        return jnp.asarray(t.float().numpy()).astype(jnp.bfloat16)
    return jnp.asarray(t.detach().contiguous().numpy())


def _to_torch(a):
    import numpy as np
    import torch

    a = np.asarray(a)
    if a.dtype.name == "bfloat16":
        return torch.from_numpy(a.astype(np.float32)).to(torch.bfloat16)
    return torch.from_numpy(a.copy())


def _serve(inp, out) -> None:
    from mirai.export.hostdriver import driver, protocol

    host = driver.get()  # first: the stand-in must be the process's libcuda.so.1
    functions: dict[str, _Function] = {}
    while True:
        request = protocol.receive(inp)
        if request is None:
            return
        directory = request["directory"]
        start = len(host.launches)
        try:
            if request["cmd"] != "forward_backward":
                raise ValueError(f"unknown request {request['cmd']!r}")
            if directory not in functions:
                functions[directory] = _Function(directory, host)
            outputs, grads = functions[directory](host, request["inputs"], request["grad_outputs"])
            answer = {"outputs": outputs, "grads": grads}
        except Exception as err:  # noqa: BLE001 - the parent raises it with its message
            answer = {"error": f"{type(err).__name__}: {err}", "code": None}
        answer["launches"] = host.launches[start:]
        protocol.send(out, answer)


def main() -> None:
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    _serve(sys.stdin.buffer, out)


if __name__ == "__main__":
    main()
