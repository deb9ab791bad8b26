"""Render: a Capture and its compiled kernels -> the generated/ folder, through Jinja2 templates only.

    generated/
      PffnFwd.cc PffnBwd.cc            TensorFlow ops (thin adapters), and those of any other
                                       framework asked for (mirai.export.frameworks)
      PffnFwd_launch.h ...             framework-neutral launch code, and its kernels (embedded)
      PffnFwd_capi.cc ...              a C interface over the launch code (GPU tests, benchmarks)
      mirai_runtime.h                  CUDA driver loading, kernel cache, launch helpers
      build.sh  pffn_api.py  manifest.json
      tf32/PffnFwd/<kernel>.py         Inductor's source of each kernel
      tf32/PffnFwd/sm_90/<kernel>.{ptx,cubin,json}   its binaries and metadata, per target

The same inputs give byte-identical files.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import jinja2

from mirai.export import frameworks as front_ends
from mirai.export.graph import Capture
from mirai.export.plan import ExportPlan, OpPlan, plan

TEMPLATES = Path(__file__).with_name("templates")


def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )


def render(
    capture: Capture,
    compiled: dict,
    output_dir: str | os.PathLike,
    targets=None,
    defined_in: dict | None = None,
    frameworks=front_ends.DEFAULT,
    variants=None,
) -> list[Path]:
    """Write the generated files for `capture` and its kernels compiled for `targets` (default: the
    targets the kernels were compiled for); return their paths (sorted). `defined_in` ({"file",
    "function"}) names the Python function the build came from, for `mirai verify DIR`.
    `frameworks` names the front ends to render (mirai.export.frameworks: "tf", "jax").
    `variants`, for a bucketed build, are its (Bucket, Capture) pairs (mirai.export.buckets), the
    first of them `capture`; `compiled` then holds the kernels of all of them."""
    from mirai import __version__
    from mirai.export.buckets import all_kernels, plan_variants

    out = Path(output_dir)
    env = _environment()
    compiled_for = [b.target for k in compiled["forward"].values() for b in k.binaries]
    targets = list(targets or dict.fromkeys(compiled_for) or [capture.target])
    common = {"version": __version__, "targets": targets, "precision": capture.precision}
    if variants:
        export = plan_variants(variants, compiled)
        capture = dataclasses.replace(capture, kernels=all_kernels(variants))
        captured = list(variants)
    else:
        export = plan(capture, compiled)
        captured = [(None, capture)]  # one variant, without a bucket
    frameworks = front_ends.parse(frameworks)
    files: dict[str, str | bytes] = {}
    files["mirai_runtime.h"] = env.get_template("mirai_runtime.h.j2").render(**common)
    for op in export.ops:
        name = op.op_name
        ctx = {**common, **op.template_fields()}
        files[f"{name}_kernels.h"] = env.get_template("kernels.h.j2").render(
            **ctx, guard=f"MIRAI_{name.upper()}_KERNELS_H_"
        )
        files[f"{name}_launch.h"] = env.get_template("launch.h.j2").render(
            **ctx, guard=f"MIRAI_{name.upper()}_LAUNCH_H_"
        )
        files[f"{name}_capi.cc"] = env.get_template("capi.cc.j2").render(**ctx)
        for kname, k in sorted(compiled[op.graph].items()):
            folder = f"{capture.precision}/{name}"
            source = capture.kernels[op.graph][kname]
            files[f"{folder}/{kname}.py"] = source.source
            for b in k.binaries:
                files[f"{folder}/{b.target}/{kname}.ptx"] = b.ptx
                files[f"{folder}/{b.target}/{kname}.cubin"] = b.cubin
                meta = b.metadata()
                meta.update(config=source.config, config_origin=source.config_origin)
                files[f"{folder}/{b.target}/{kname}.json"] = (
                    json.dumps(meta, indent=2, sort_keys=True) + "\n"
                )
    for name in frameworks:
        files.update(front_ends.FRAMEWORKS[name].files(env, common, export))
    manifest = _manifest(capture, compiled, export, targets, defined_in, captured)
    manifest["frameworks"] = list(frameworks)
    files["manifest.json"] = json.dumps(manifest, indent=2, sort_keys=True) + "\n"

    written = []
    for rel, content in sorted(files.items()):
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        if rel.endswith(".sh"):
            path.chmod(0o755)
        written.append(path)
    return written


def _variant_manifest(variant, capture: Capture, graph: str) -> dict:
    return {
        "launches": list(variant.launches),
        "gemms": [
            {
                "op": g.op,
                "library": "cublaslt",
                "batch_m_n_k": list(g.shape),
                "bias": g.bias,
                "dots": [g.dots],
            }
            for g in variant.gemms
        ],
        "gemm_autotune": capture.gemm_timings.get(graph, []),
    }


def _op_manifest(op: OpPlan, compiled: dict, capture: Capture, wiring, variants) -> dict:
    """One op's entry. Its `variants` say what a call runs: one, or one per bucket of a bucketed
    build, with the batch each was captured at and the largest it serves."""
    return {
        "dispatch": op.dispatch,
        "variants": [
            {"sample": v.sample, "upto": v.upto, **_variant_manifest(v, cap, op.graph)}
            for v, (_, cap) in zip(op.variants, variants)
        ],
        "graph": op.graph,
        "inputs": [
            {
                "name": i.tf_name,
                "dtype": i.dtype,
                "sizes": list(i.shape),
                "kind": i.kind,
                "source": (
                    None if i.source is None else {"kind": i.source.kind, "index": i.source.index}
                ),
            }
            for i in op.inputs
        ],
        "outputs": [
            {"name": o.tf_name, "dtype": o.dtype, "sizes": list(o.shape), "kind": o.kind}
            for o in op.outputs
        ],
        "grad_inputs": (
            [k for k, g in enumerate(wiring.gradients) if g is not None]
            if op.graph == "backward"
            else None
        ),
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
                "config": capture.kernels[op.graph][name].config,
                "config_origin": capture.kernels[op.graph][name].config_origin,
            }
            for name, k in sorted(compiled[op.graph].items())
        },
    }


def _manifest(
    capture: Capture, compiled: dict, export: ExportPlan, targets, defined_in, variants
) -> dict:
    from mirai import __version__

    return {
        "mirai": __version__,
        "name": capture.name,
        "source": defined_in,
        "targets": targets,
        "capture_target": capture.target,
        "precision": capture.precision,
        "gemm": capture.gemm,
        "fused": capture.fused,
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
        "buckets": [{"sample": b.sample, "upto": b.upto} for b, _ in variants if b is not None],
        "wiring": export.wiring.to_json(),
        "ops": {
            op.op_name: _op_manifest(op, compiled, capture, export.wiring, variants)
            for op in export.ops
        },
    }
