"""Front ends: the frameworks a generated folder serves, each an adapter over the same launch code.

Every framework is one module here and one entry in `FRAMEWORKS`. Its module's `files(env, common,
export)` renders what that framework needs (its op adapters, its build script, its Python API) from
the same `ExportPlan` and the same template context as the launch code; `render` writes them beside
the framework-neutral files (launch code, kernels, C interface, manifest).

    >>> parse("tf,jax")
    ('tf', 'jax')
    >>> parse(["jax", "tf", "jax"])
    ('tf', 'jax')
    >>> FRAMEWORKS["jax"].build
    'bash build_jax.sh'
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from mirai.errors import MiraiError


@dataclass(frozen=True)
class Framework:
    """One front end: `module` (under mirai.export.frameworks) renders its files; `build` is the
    command that builds its libraries inside the generated folder."""

    name: str
    help: str
    module: str
    build: str

    def files(self, env, common: dict, export) -> dict[str, str]:
        """The framework's files, by path relative to the generated folder."""
        return importlib.import_module(f"{__name__}.{self.module}").files(env, common, export)


FRAMEWORKS: dict[str, Framework] = {
    f.name: f
    for f in (
        Framework(
            "tf",
            "TensorFlow custom ops and tf.custom_gradient (build.sh: g++ and TensorFlow)",
            "tf_ops",
            "bash build.sh",
        ),
        Framework(
            "jax",
            "XLA FFI handlers and jax.custom_vjp (build_jax.sh: g++ and jaxlib's headers)",
            "jax_ffi",
            "bash build_jax.sh",
        ),
    )
}
DEFAULT = ("tf",)


def parse(value) -> tuple[str, ...]:
    """Framework names from "tf,jax", ["tf", "jax"] or a mix; in registry order, each once."""
    if value is None:
        return DEFAULT
    items = [value] if isinstance(value, str) else list(value)
    names = {n.strip() for item in items for n in str(item).split(",") if n.strip()}
    unknown = sorted(names - set(FRAMEWORKS))
    if unknown:
        raise MiraiError(
            f"unknown framework {unknown[0]!r}: choose from {', '.join(FRAMEWORKS)} "
            "(e.g. frameworks=('tf', 'jax'))"
        )
    if not names:
        raise MiraiError(f"no framework named: choose one or more of {', '.join(FRAMEWORKS)}")
    return tuple(n for n in FRAMEWORKS if n in names)


class Indexed:
    """Stands for a Python list in generated code: item k is the expression `name[k]`."""

    def __init__(self, name: str):
        self.name = name

    def __getitem__(self, k: int) -> str:
        return f"{self.name}[{k}]"


def api_fields(export) -> dict:
    """What every framework's Python API needs to join the forward and backward ops, as Python
    expressions over `params`, `outputs`, `residuals`, `grad_outputs` and `grads` (the wiring of
    mirai.export.plan.Wiring, which decides it)."""
    fwd, bwd, wiring = export.forward, export.backward, export.wiring
    params = [i.tf_name for i in fwd.inputs]
    bwd_args, grad_returns = [], []
    if bwd is not None:
        bwd_args = wiring.backward_args(
            params, Indexed("outputs"), Indexed("residuals"), Indexed("grad_outputs")
        )
        grad_returns = [g or "None" for g in wiring.gradients_of(Indexed("grads"))]
    return {
        "name": export.name,
        "fwd": fwd,
        "bwd": bwd,
        "params": params,
        "num_outputs": wiring.num_outputs,
        "bwd_args": bwd_args,
        "grad_returns": grad_returns,
    }
