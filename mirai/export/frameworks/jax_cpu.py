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


def jax_handlers() -> dict:
    """The one request of `JaxHostRunner`: a folder's function forward and backward through JAX
    (served by mirai.export.hostdriver.worker's loop; jax loads at the first request, after the
    stand-in driver)."""
    functions: dict[str, _Function] = {}

    def forward_backward(host, request) -> dict:
        directory = request["directory"]
        if directory not in functions:
            functions[directory] = _Function(directory, host)
        outputs, grads = functions[directory](host, request["inputs"], request["grad_outputs"])
        return {"outputs": outputs, "grads": grads}

    return {"forward_backward": forward_backward}


if __name__ == "__main__":
    from mirai.export.hostdriver import worker

    worker.run(jax_handlers())
