"""Render: a Capture and its compiled kernels -> the generated/ folder, through Jinja2 templates only.

    generated/
      PffnFwd.cc PffnBwd.cc            TensorFlow ops (thin adapters)
      PffnFwd_launch.h ...             framework-neutral launch code, and its kernels (embedded)
      PffnFwd_capi.cc ...              a C interface over the launch code (GPU tests, benchmarks)
      mirai_runtime.h                  CUDA driver loading, kernel cache, launch helpers
      build.sh  pffn_api.py  manifest.json
      tf32/PffnFwd/<kernel>.py         Inductor's source of each kernel
      tf32/PffnFwd/sm_90/<kernel>.{ptx,cubin,json}   its binaries and metadata, per target

The same inputs give byte-identical files.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import jinja2

from mirai.errors import MiraiError
from mirai.graph import Capture, KernelBinaries
from mirai.render.plan import plan_backward, plan_forward
from mirai.symbolic import free_symbols

TEMPLATES = Path(__file__).with_name("templates")


def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )


def py_op_name(op_name: str) -> str:
    """The Python name TensorFlow gives an op: CamelCase -> snake_case, as tf's op wrappers do."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])|(?<=[A-Z])([A-Z])(?=[a-z])", r"_\1\2", op_name).lower()


def _cubin_hex(data: bytes) -> str:
    lines = []
    for start in range(0, len(data), 20):
        chunk = data[start : start + 20]
        lines.append("    " + ",".join(f"0x{b:02x}" for b in chunk) + ",")
    return "\n".join(lines)


def _ptx_literal(ptx: str) -> str:
    delimiter = "mirai_ptx"
    if f'){delimiter}"' in ptx:
        raise MiraiError("PTX contains the raw-string delimiter")
    return f'R"{delimiter}({ptx}){delimiter}"'


def _kernel_entries(kernels: dict, sources: dict) -> list[dict]:
    entries = []
    for name in sorted(kernels):
        k: KernelBinaries = kernels[name]
        binaries = [
            {
                "arch": b.cc,
                "arch_name": b.arch,
                "arch_specific": b.arch_specific,
                "num_warps": b.num_warps,
                "shared": b.shared,
                "global_scratch_size": b.global_scratch_size,
                "global_scratch_align": b.global_scratch_align,
                "profile_scratch_size": b.profile_scratch_size,
                "profile_scratch_align": b.profile_scratch_align,
                "cubin_size": len(b.cubin),
                "cubin_hex": _cubin_hex(b.cubin),
                "ptx_literal": _ptx_literal(b.ptx),
            }
            for b in k.binaries
        ]
        entries.append(
            {
                "name": name,
                "function": k.function,
                "binaries": binaries,
                "config": json.dumps(sources[name].config, sort_keys=True),
            }
        )
    return entries


def _annotate_shapes(plan: dict) -> None:
    for i in plan["inputs"]:
        i["shape_symbols"] = [sorted(free_symbols(s)) or None for s in i["shape_sizes"]]
    for o in plan["outputs"]:
        o["dim_symbols"] = [sorted(free_symbols(s)) for s in o["shape_sizes"]]
    plan["all_symbols"] = plan["symbols"]
    plan["max_rank"] = max(
        [i["rank"] for i in plan["inputs"]] + [o["rank"] for o in plan["outputs"]] + [1]
    )


def render(
    capture: Capture,
    compiled: dict,
    output_dir: str | os.PathLike,
    targets=None,
    defined_in: dict | None = None,
) -> list[Path]:
    """Write the generated files for `capture` and its kernels compiled for `targets` (default: the
    targets the kernels were compiled for); return their paths (sorted). `defined_in` ({"file",
    "function"}) names the Python function the build came from, for `mirai verify DIR`."""
    from mirai import __version__

    out = Path(output_dir)
    env = _environment()
    compiled_for = [b.target for k in compiled["forward"].values() for b in k.binaries]
    targets = list(targets or dict.fromkeys(compiled_for) or [capture.target])
    common = {"version": __version__, "targets": targets, "precision": capture.precision}
    fwd, residuals = plan_forward(capture, compiled["forward"])
    ops = [("forward", fwd)]
    bwd = None
    if capture.backward is not None and capture.backward.launches:
        bwd = plan_backward(capture, compiled["backward"], fwd["saved_sources"], residuals)
        ops.append(("backward", bwd))
    n_user = fwd["num_user_outputs"]
    fwd["description"] = (
        f"Forward of {capture.name}: {len(fwd['inputs'])} inputs, {n_user} outputs"
        + (f" and {len(residuals)} residuals for {capture.name}Bwd" if residuals else "")
        + "."
    )
    if bwd is not None:
        bwd["description"] = (
            f"Backward of {capture.name}: gradients of "
            + ", ".join(o["tf_name"].removeprefix("grad_") for o in bwd["outputs"])
            + "."
        )
    files: dict[str, str | bytes] = {}
    files["mirai_runtime.h"] = env.get_template("mirai_runtime.h.j2").render(**common)
    for graph, plan in ops:
        _annotate_shapes(plan)
        plan["py_name"] = py_op_name(plan["op_name"])
        name = plan["op_name"]
        kernels = _kernel_entries(compiled[graph], capture.kernels[graph])
        ctx = {**common, **plan, "kernels": kernels}
        files[f"{name}_kernels.h"] = env.get_template("kernels.h.j2").render(
            **ctx, guard=f"MIRAI_{name.upper()}_KERNELS_H_"
        )
        files[f"{name}_launch.h"] = env.get_template("launch.h.j2").render(
            **ctx, guard=f"MIRAI_{name.upper()}_LAUNCH_H_"
        )
        files[f"{name}.cc"] = env.get_template("tf_op.cc.j2").render(**ctx)
        files[f"{name}_capi.cc"] = env.get_template("capi.cc.j2").render(**ctx)
        for kname, k in sorted(compiled[graph].items()):
            folder = f"{capture.precision}/{name}"
            source = capture.kernels[graph][kname]
            files[f"{folder}/{kname}.py"] = source.source
            for b in k.binaries:
                files[f"{folder}/{b.target}/{kname}.ptx"] = b.ptx
                files[f"{folder}/{b.target}/{kname}.cubin"] = b.cubin
                meta = b.metadata()
                meta.update(config=source.config, config_origin=source.config_origin)
                files[f"{folder}/{b.target}/{kname}.json"] = (
                    json.dumps(meta, indent=2, sort_keys=True) + "\n"
                )
    snake = py_op_name(capture.name)
    files["build.sh"] = env.get_template("build.sh.j2").render(
        **common, name=capture.name, ops=[p["op_name"] for _, p in ops]
    )
    files[f"{snake}_api.py"] = _render_api(env, common, capture, fwd, bwd, snake)
    files["manifest.json"] = (
        json.dumps(_manifest(capture, compiled, ops, targets, defined_in), indent=2, sort_keys=True)
        + "\n"
    )

    written = []
    for rel, content in sorted(files.items()):
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        if rel == "build.sh":
            path.chmod(0o755)
        written.append(path)
    return written


def _render_api(env, common, capture: Capture, fwd: dict, bwd: dict | None, snake: str) -> str:
    params = [i["tf_name"] for i in fwd["inputs"]]
    n_user = fwd["num_user_outputs"]
    bwd_args, grad_returns = [], []
    if bwd is not None:
        for inp in bwd["inputs"]:
            src = inp["source"]
            bwd_args.append(
                {
                    "input": params[src["index"]],
                    "output": f"outputs[{src['index']}]",
                    "residual": f"residuals[{src['index']}]",
                    "tangent": f"grad_outputs[{src['index']}]",
                }[src["kind"]]
            )
        for k in range(len(params)):
            grad_returns.append(
                f"grads[{bwd['grad_inputs'].index(k)}]" if k in bwd["grad_inputs"] else "None"
            )
    specs = lambda items: repr(  # noqa: E731
        tuple((i["tf_name"], i["dtype"], tuple(i["shape_sizes"])) for i in items)
    )
    return env.get_template("api.py.j2").render(
        **common,
        name=capture.name,
        module=f"{snake}_api",
        function=snake,
        params=params,
        fwd=fwd,
        bwd=bwd,
        num_outputs=n_user,
        bwd_args=bwd_args,
        grad_returns=grad_returns,
        input_specs=specs(fwd["inputs"]),
        output_specs=specs(fwd["outputs"][:n_user]),
    )


def _manifest(capture: Capture, compiled: dict, ops, targets: list[str], defined_in) -> dict:
    from mirai import __version__

    return {
        "mirai": __version__,
        "name": capture.name,
        "source": defined_in,
        "targets": targets,
        "capture_target": capture.target,
        "precision": capture.precision,
        "origin": capture.origin,
        "versions": capture.versions,
        "symbols": {
            s: {"input": k, "dim": d, "range": list(capture.symbol_ranges.get(s, (0, None)))}
            for s, (k, d) in sorted(capture.symbols.items())
        },
        "inputs": [
            {"name": i.name, "dtype": i.dtype, "sizes": list(i.sizes)} for i in capture.inputs
        ],
        "outputs": [
            {"name": o.name, "dtype": o.dtype, "sizes": list(o.sizes)} for o in capture.outputs
        ],
        "ops": {
            plan["op_name"]: {
                "graph": graph,
                "inputs": [
                    {
                        "name": i["tf_name"],
                        "dtype": i["dtype"],
                        "sizes": i["shape_sizes"],
                        "kind": i["kind"],
                        "source": i.get("source"),
                    }
                    for i in plan["inputs"]
                ],
                "outputs": [
                    {
                        "name": o["tf_name"],
                        "dtype": o["dtype"],
                        "sizes": o["shape_sizes"],
                        "kind": o["kind"],
                    }
                    for o in plan["outputs"]
                ],
                "grad_inputs": plan.get("grad_inputs"),
                "launches": [s["kernel"] for s in plan["steps"] if s["kind"] == "launch"],
                "kernels": {
                    name: {
                        "function": k.function,
                        "binaries": {
                            b.target: {
                                "arch": b.arch,
                                "dots": list(b.dots),
                                "num_warps": b.num_warps,
                                "shared": b.shared,
                            }
                            for b in k.binaries
                        },
                        "config": capture.kernels[graph][name].config,
                        "config_origin": capture.kernels[graph][name].config_origin,
                    }
                    for name, k in sorted(compiled[graph].items())
                },
            }
            for graph, plan in ops
        },
    }
