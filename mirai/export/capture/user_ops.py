"""The user's own operators in a traced graph, carried to the GPU-less capture worker.

A function may call operators it registers itself: `torch.library.triton_op` (its own Triton kernel,
which Inductor emits like a fusion's) or `torch.library.custom_op`. The capture worker is a fresh
process, and the graph it unpickles calls `torch.ops.<namespace>.<name>`, which exists there only
once the Python module that registers the operator has run. `sources` names those modules in the
building process, from the operators' Python implementations; `load` imports them in the worker,
after the GPU-less shim and before the graph.

The implementation is read from torch's registry of Python-defined operators
(`torch._library.custom_ops.OPDEFS`), an internal that torch 2.11 and 2.13 share: a `triton_op`
keeps the user's function as its fake implementation (`_abstract_fn`), a `custom_op` as its
`_init_fn`. mirai's own operators (namespace `mirai`) are imported by the capture itself.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from dataclasses import dataclass
from pathlib import Path

from mirai.errors import CaptureError

OWN_NAMESPACE = "mirai"


@dataclass(frozen=True)
class OpSource:
    qualname: str  # "namespace::name"
    module: str  # the defining module's name in the building process
    path: str  # its file


def sources(graph_module) -> tuple[OpSource, ...]:
    """The modules that register the Python-defined operators `graph_module` calls (not mirai's)."""
    import torch
    from torch._library import custom_ops

    found = {}
    for node in graph_module.graph.nodes:
        target = node.target
        if node.op != "call_function":
            continue
        if isinstance(target, torch._ops.OpOverload):
            qualname = target._schema.name
        elif isinstance(target, torch._ops.OpOverloadPacket):  # as Dynamo records a call
            qualname = target._qualified_op_name
        else:
            continue
        if qualname in found or qualname.split("::")[0] == OWN_NAMESPACE:
            continue
        opdef = custom_ops.OPDEFS.get(qualname)
        if opdef is None:  # an operator of torch's own, or one registered from C++
            continue
        found[qualname] = _source(qualname, opdef)
    return tuple(found.values())


def _source(qualname: str, opdef) -> OpSource:
    for attr in ("_abstract_fn", "_init_fn"):
        fn = getattr(opdef, attr, None)
        module = getattr(fn, "__module__", None) or ""
        if callable(fn) and module and not module.startswith("torch."):
            path = inspect.getsourcefile(fn)
            if path:
                return OpSource(qualname, module, str(Path(path).resolve()))
    raise CaptureError(
        f"the function calls operator {qualname}, whose defining Python module cannot be found "
        "(torch.library.triton_op or custom_op in a module of a file): the GPU-less capture "
        "must import it in its own process"
    )


def load(found: tuple[OpSource, ...]) -> None:
    """Import each operator's module unless the operator exists already; a script run as
    `__main__` is imported under a name of its own (code under `if __name__ == "__main__":` does not
    run)."""
    import torch

    for source in found:
        namespace, name = source.qualname.split("::")
        if hasattr(getattr(torch.ops, namespace), name):
            continue
        try:
            _import(source)
        except Exception as err:
            raise CaptureError(
                f"importing {source.path} (which registers operator {source.qualname}) in the "
                f"GPU-less capture process failed: {type(err).__name__}: {err}"
            ) from err
        if not hasattr(getattr(torch.ops, namespace), name):
            raise CaptureError(
                f"importing {source.path} did not register operator {source.qualname} in the "
                "GPU-less capture process"
            )


def _import(source: OpSource) -> None:
    path = Path(source.path)
    parts = source.module.split(".")
    root = path.parent
    for _ in parts[1:]:
        root = root.parent
    if source.module != "__main__" and path.stem == parts[-1]:  # importable from its root
        sys.path.insert(0, str(root))
        try:
            importlib.import_module(source.module)
        finally:
            sys.path.remove(str(root))
        return
    # a file loaded under another name (`mirai build FILE` loads mirai_user_<stem>) or run as a script
    name = source.module if source.module != "__main__" else f"mirai_user_main_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
