"""Bucketed dynamic builds: one dynamic op that runs the kernels captured for the batch it is given.

A dynamic build compiles its graph once, at the sample batch, and every choice Inductor makes
follows that sample: which GEMMs a tuning table puts in a Triton template, block sizes, rows per
program. With `mirai.build(..., dynamic=True, buckets=(64, 512, 2000, 8000))` the same traced graph
is captured once per bucket, only the size hint of the batch symbol changing, and the generated op
picks at run time: batch b runs the variant captured at the bucket nearest to b on a log scale
(the bounds are the geometric means of neighbouring buckets, rounded down).

The stages, in order:

- `make_buckets`: the buckets with their bounds;
- `distinct_names`: each variant's kernels renamed apart (`<kernel>_b<sample>`), before compiling;
- `share_identical`: after compiling, a kernel whose binaries equal an earlier one's is dropped
  and its launches run the earlier one (the op embeds each binary once);
- `plan_variants`: one ExportPlan whose ops hold a `Variant` per bucket, once every variant is shown
  to have the same interface (inputs, outputs, residuals, wiring): the forward op of one bucket
  must be able to feed the backward op of any other, since both pick by the same batch.

>>> [(b.sample, b.upto) for b in make_buckets([2000, 64, 512, 8000])]
[(64, 181), (512, 1011), (2000, 4000), (8000, None)]
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from mirai.errors import MiraiError
from mirai.export.graph import Capture, KernelGraph, Launch


@dataclass(frozen=True)
class Bucket:
    """The batches one variant serves: up to `upto` (None: all the larger ones), captured at
    `sample`."""

    sample: int
    upto: int | None


def _batch(value) -> int:
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise MiraiError(f"a bucket is a batch size (a positive integer); got {value!r}")


def make_buckets(samples, minimum: int = 2) -> tuple[Bucket, ...]:
    """Sorted buckets for the sample batches `samples` (at least two, each >= `minimum`): integers,
    or a comma-separated string of them ("64,512,2000")."""
    if isinstance(samples, str):
        samples = samples.split(",")
    values = sorted({_batch(s) for s in samples})
    if len(values) < 2:
        raise MiraiError(
            f"buckets needs at least two batch sizes (got {values}); a dynamic build without "
            "buckets already runs the choices of its one sample batch"
        )
    if values[0] < minimum:
        raise MiraiError(
            f"bucket {values[0]} is below {minimum}, the smallest batch the dynamic op serves"
        )
    bounds = [math.isqrt(a * b) for a, b in zip(values, values[1:])]
    return tuple(Bucket(v, u) for v, u in zip(values, bounds + [None]))


def dispatch_symbol(symbols: dict) -> str:
    """The size symbol buckets vary: the one bound from the first dynamic dimension (the batch
    dimension of the first dynamic input). `symbols`: symbol -> (input index, dim)."""
    if not symbols:
        raise MiraiError(
            "buckets are for dynamic builds: pass dynamic=True (or --dynamic) with them"
        )
    return min(symbols, key=lambda s: symbols[s])


def _renamed_graph(graph: KernelGraph | None, names: dict) -> KernelGraph | None:
    if graph is None:
        return None
    steps = tuple(
        dataclasses.replace(s, kernel=names[s.kernel]) if isinstance(s, Launch) else s
        for s in graph.steps
    )
    return dataclasses.replace(graph, steps=steps)


def _with_names(capture: Capture, names: dict, kernels: dict) -> Capture:
    """`capture` with its launches renamed by `names` (graph -> {old: new}) and these `kernels`."""
    return dataclasses.replace(
        capture,
        kernels=kernels,
        forward=_renamed_graph(capture.forward, names.get("forward", {})),
        backward=_renamed_graph(capture.backward, names.get("backward", {})),
    )


def distinct_names(variants) -> list[tuple[Bucket, Capture]]:
    """Each variant's kernels renamed `<kernel>_b<sample>`, so that the variants' kernels can live in
    one op (Inductor names them alike in every capture). `variants`: (Bucket, Capture) pairs."""
    out = []
    for bucket, cap in variants:
        names = {
            graph: {name: f"{name}_b{bucket.sample}" for name in found}
            for graph, found in cap.kernels.items()
        }
        kernels = {
            graph: {
                names[graph][name]: dataclasses.replace(
                    k, name=names[graph][name], function=k.entry
                )
                for name, k in found.items()
            }
            for graph, found in cap.kernels.items()
        }
        out.append((bucket, _with_names(cap, names, kernels)))
    return out


def _binary_key(kernel) -> tuple:
    return tuple((b.target, b.ptx, b.cubin) for b in kernel.binaries)


def share_identical(variants, compiled: dict):
    """(variants, compiled) with every kernel whose binaries equal those of an earlier kernel of the
    same graph dropped (an earlier variant's, or one of the same variant's: Inductor's
    specializations of one user-defined kernel may compile alike), its launches running the
    earlier one. `compiled`: graph -> {kernel name: KernelBinaries} over every variant. A build
    without buckets passes its one capture as the one variant."""
    kept = {graph: {} for graph in compiled}
    seen = {graph: {} for graph in compiled}  # graph -> binary key -> kept name
    out = []
    for bucket, cap in variants:
        names, kernels = {}, {}
        for graph, found in cap.kernels.items():
            names[graph], kernels[graph] = {}, {}
            for name in sorted(found):
                key = _binary_key(compiled[graph][name])
                first = seen[graph].setdefault(key, name)
                names[graph][name] = first
                if first == name:
                    kernels[graph][name] = found[name]
                    kept[graph][name] = compiled[graph][name]
        out.append((bucket, _with_names(cap, names, kernels)))
    return out, kept


def all_kernels(variants) -> dict:
    """graph -> {kernel name: KernelSource} of every variant (names are distinct by now)."""
    merged: dict = {}
    for _, cap in variants:
        for graph, found in cap.kernels.items():
            merged.setdefault(graph, {}).update(found)
    return merged


def _interface(export) -> tuple:
    """What must be equal in every variant of a bucketed build: the ops' inputs and outputs (their
    alignment needs aside), size symbols and their bindings, the residuals and the wiring."""

    def op_interface(op):
        if op is None:
            return None
        tensors = [(t.name, t.dtype, t.shape, t.kind, t.source) for t in op.inputs + op.outputs]
        return (op.op_name, tuple(tensors), op.all_symbols, op.bindings)

    return (
        op_interface(export.forward),
        op_interface(export.backward),
        tuple((r.index, r.dtype, r.numel) for r in export.residuals),
        export.wiring,
    )


def plan_variants(variants, compiled: dict):
    """The ExportPlan of a bucketed build: each op with one Variant per bucket, in bucket order.
    `variants`: (Bucket, Capture) pairs after `share_identical`; `compiled` its kernels."""
    from mirai.export.plan import ExportPlan, plan

    merged = all_kernels(variants)
    symbol = dispatch_symbol(variants[0][1].symbols)
    plans = [plan(dataclasses.replace(cap, kernels=merged), compiled) for _, cap in variants]
    first = plans[0]
    for (bucket, _), other in zip(variants[1:], plans[1:]):
        if _interface(other) != _interface(first):
            raise MiraiError(
                f"{first.name}: the ops captured at {symbol} = {bucket.sample} differ from those "
                f"captured at {variants[0][0].sample} in their inputs, outputs or the residuals "
                "the forward hands the backward; a bucketed op needs the same interface at every "
                "bucket. Build without buckets, or with buckets closer together"
            )

    def combined(pick):
        ops = [pick(p) for p in plans]
        if ops[0] is None:
            return None
        inputs = tuple(
            dataclasses.replace(t, aligned=any(op.inputs[i].aligned for op in ops))
            for i, t in enumerate(ops[0].inputs)
        )
        chosen = tuple(
            dataclasses.replace(op.variants[0], sample=bucket.sample, upto=bucket.upto)
            for (bucket, _), op in zip(variants, ops)
        )
        return dataclasses.replace(ops[0], inputs=inputs, variants=chosen, dispatch=symbol)

    return ExportPlan(
        first.name,
        combined(lambda p: p.forward),
        combined(lambda p: p.backward),
        first.residuals,
        first.wiring,
    )
