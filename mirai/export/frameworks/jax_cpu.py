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

import os
import sys

from mirai.export.hostdriver.runner import HostRunner


class JaxHostRunner(HostRunner):
    """A worker that runs generated JAX APIs (jax.jit of the forward and of jax.vjp) on the CPU."""

    WORKER = "mirai.export.frameworks.jax_cpu"
    ENV = {**HostRunner.ENV, "JAX_PLATFORMS": "cpu", "JAX_ENABLE_X64": "1"}


class _Function:
    """One generated folder's JAX function in the worker, on XLA's CPU platform."""

    def __init__(self, directory: str, host):
        from mirai.export.frameworks.jax_run import JaxFunction
        from mirai.export.hostdriver import driver

        self.function = JaxFunction(directory, "cpu")
        host.index.add_directory(directory)
        self.cc = driver.compute_capability(self.function.manifest["targets"])

    def __call__(self, host, inputs, grad_outputs):
        """Outputs and gradients as torch tensors (None where an input gets no gradient)."""
        import numpy as np

        from mirai.export.frameworks.jax_run import check_kept, to_jax, to_torch

        host.configure(self.cc)
        args = [to_jax(t) for t in inputs]
        kept = [np.array(a) for a in args]
        outputs, grads = self.function.forward_backward(args, [to_jax(t) for t in grad_outputs])
        check_kept(kept, args)
        return [to_torch(o) for o in outputs], [None if g is None else to_torch(g) for g in grads]


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
