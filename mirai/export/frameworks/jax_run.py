"""Run a generated JAX API as mirai's checks want it: forward outputs and input gradients at once.

`JaxFunction` builds a folder's handlers (build_jax.sh), imports its JAX module, registers it for a
platform and jits the forward and the forward with its vjp. `JaxGpuRunner` answers as
`mirai.export.hostdriver.HostRunner` does, on torch CUDA tensors, so `mirai.export.verify` checks
the JAX op on a GPU against the function in float64 exactly as it checks the C interface.

    >>> rows = verify(pffn, samples, "generated", device="cuda", runner=JaxGpuRunner())  # doctest: +SKIP
"""

from __future__ import annotations

import json
from pathlib import Path


class JaxFunction:
    """One generated folder's function under jax.jit: `forward(*args)` and
    `forward_backward(args, tangents) -> (outputs, gradients)` (gradients None where the wiring
    gives an input none). Arguments are arrays (jax or numpy)."""

    def __init__(self, directory, platform: str = "CUDA"):
        import jax

        from mirai.export.frameworks import jax_ffi
        from mirai.export.plan import Wiring, py_op_name

        manifest = json.loads((Path(directory) / "manifest.json").read_text())
        self.manifest = manifest
        self.wiring = Wiring.from_json(manifest["wiring"])
        self.has_backward = f"{manifest['name']}Bwd" in manifest["ops"]
        self.api = jax_ffi.load(jax_ffi.build(directory))
        self.api.register(platform)
        self.function = getattr(self.api, py_op_name(manifest["name"]))
        n = self.wiring.num_outputs

        def forward_backward(args, tangents):
            outputs, vjp = jax.vjp(self.function, *args)
            return outputs, vjp(tangents[0] if n == 1 else tuple(tangents))

        self.forward = jax.jit(self.function)
        self._forward_backward = jax.jit(forward_backward)

    def outputs(self, result) -> list:
        return [result] if self.wiring.num_outputs == 1 else list(result)

    def forward_backward(self, args, tangents):
        if not self.has_backward:
            return self.outputs(self.forward(*args)), [None] * len(args)
        outputs, grads = self._forward_backward(list(args), list(tangents))
        grads = [None if self.wiring.gradients[k] is None else g for k, g in enumerate(grads)]
        return self.outputs(outputs), grads


def to_jax(t, device=None):
    """A torch tensor as a jax array (through host memory: a check, not a benchmark)."""
    import jax
    import jax.numpy as jnp
    import torch

    t = t.detach().contiguous().cpu()
    if t.dtype == torch.bfloat16:  # numpy has no bfloat16; float32 holds every value exactly
        return jax.device_put(jnp.asarray(t.float().numpy()).astype(jnp.bfloat16), device)
    return jax.device_put(jnp.asarray(t.numpy()), device)


def to_torch(a, device="cpu"):
    import numpy as np
    import torch

    a = np.asarray(a)
    if a.dtype.name == "bfloat16":
        return torch.from_numpy(a.astype(np.float32)).to(device=device, dtype=torch.bfloat16)
    return torch.from_numpy(a.copy()).to(device)


class JaxGpuRunner:
    """`forward_backward(directory, inputs, grad_outputs)` on torch CUDA tensors, through the
    folder's JAX API on XLA's CUDA platform (the first GPU jax sees). Also checks that the op left
    its inputs unchanged."""

    def __init__(self):
        import os

        # torch shares the GPU: jax must not take most of its memory up front
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        import jax

        jax.config.update("jax_enable_x64", True)  # ops may take int64 inputs, as torch gives them
        self.functions: dict[str, JaxFunction] = {}

    def function(self, directory) -> JaxFunction:
        key = str(Path(directory).resolve())
        if key not in self.functions:
            self.functions[key] = JaxFunction(directory, "CUDA")
        return self.functions[key]

    def forward_backward(self, directory, inputs, grad_outputs):
        import numpy as np

        fn = self.function(directory)
        args = [to_jax(t) for t in inputs]
        kept = [np.array(a) for a in args]
        outputs, grads = fn.forward_backward(args, [to_jax(t) for t in grad_outputs])
        device = inputs[0].device
        outputs = [to_torch(o, device) for o in outputs]
        grads = [None if g is None else to_torch(g, device) for g in grads]
        check_kept(kept, args)
        return outputs, grads

    def close(self) -> None:
        self.functions.clear()


def check_kept(before, args) -> None:
    """Raise if a call changed an input (compared as raw bytes, so NaNs compare too)."""
    import numpy as np

    from mirai.errors import MiraiError

    for k, (old, arg) in enumerate(zip(before, args)):
        if not np.array_equal(old.view(np.uint8), np.asarray(arg).view(np.uint8)):
            raise MiraiError(f"the op wrote into its input #{k}: a generated op never may")
