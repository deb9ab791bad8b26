"""Find gated feed-forward patterns in a Dynamo-traced FX graph and call the fused operator instead.

The pattern, in any of the spellings Dynamo records (`torch.bmm`, `torch.matmul`, `@`, the Tensor
methods; `F.silu`, which an `nn.SiLU` module becomes; `*` or `torch.mul`):

    gate = x @ w_gate (+ b_gate)     x [E, M, K], weights [E, K, N], float32
    up   = x @ w_up   (+ b_up)       biases broadcastable to [E, 1, N]
    out  = silu(gate) * up           (either order)

Each intermediate must feed nothing else: the rewrite removes them. The node's shapes come from fake-
tensor propagation over the graph's example inputs. A match becomes `mirai::gate_up_silu_train` (and
its first output) when any of its tensors needs a gradient, else `mirai::gate_up_silu`.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

import torch

_MATMULS = {torch.bmm, torch.matmul, operator.matmul}
_ADDS = {operator.add, torch.add, operator.iadd}
_MULS = {operator.mul, torch.mul}
_SILUS = {torch.nn.functional.silu}


def _is(node, functions, methods, kwargs=None) -> bool:
    """Whether `node` calls one of `functions` or `methods` with no keyword arguments but `kwargs`."""
    if node.kwargs and dict(node.kwargs) != (kwargs or {}):
        return False
    if node.op == "call_function":
        return node.target in functions
    if node.op == "call_method":
        return node.target in methods
    return False


def _value(node):
    return node.meta.get("val", node.meta.get("example_value")) if hasattr(node, "meta") else None


@dataclass(frozen=True)
class Branch:
    """One side of the pattern: x @ w (+ b), and the nodes the rewrite makes dead."""

    x: object
    weight: object
    bias: object | None
    nodes: tuple


def _branch(node) -> Branch | None:
    nodes = [node]
    bias = None
    if _is(node, _ADDS, {"add", "__add__"}) and len(node.args) == 2:
        left, right = node.args
        if _is(left, _MATMULS, {"bmm", "matmul", "__matmul__"}):
            node, bias = left, right
        elif _is(right, _MATMULS, {"bmm", "matmul", "__matmul__"}):
            node, bias = right, left
        else:
            return None
        nodes.append(node)
    if not _is(node, _MATMULS, {"bmm", "matmul", "__matmul__"}) or len(node.args) != 2:
        return None
    x, weight = node.args
    return Branch(x=x, weight=weight, bias=bias, nodes=tuple(nodes))


def _fits(gate: Branch, up: Branch) -> bool:
    if gate.x is not up.x or not all(hasattr(n, "meta") for n in (gate.x, gate.weight, up.weight)):
        return False
    x, wg, wu = _value(gate.x), _value(gate.weight), _value(up.weight)
    if not all(isinstance(t, torch.Tensor) for t in (x, wg, wu)):
        return False
    if any(t.dtype != torch.float32 or t.dim() != 3 for t in (x, wg, wu)):
        return False
    e, _, k = x.shape
    if wg.shape != wu.shape or wg.shape[0] != e or wg.shape[1] != k:
        return False
    n = wg.shape[2]
    for bias in (gate.bias, up.bias):
        if bias is None:
            continue
        b = _value(bias)
        if not isinstance(b, torch.Tensor) or b.dtype != torch.float32 or b.dim() > 3:
            return False
        shape = (1,) * (3 - b.dim()) + tuple(b.shape)
        if shape[1] != 1 or shape[2] != n or shape[0] not in (1, e):
            return False
    return (gate.bias is None) == (up.bias is None)


def _single_use(nodes) -> bool:
    return all(len(n.users) == 1 for n in nodes)


def _grad_flow(graph, example_inputs) -> set:
    """The nodes whose values depend on an input that needs a gradient."""
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    flows = {
        n
        for n, value in zip(placeholders, example_inputs)
        if isinstance(value, torch.Tensor) and value.requires_grad
    }
    for node in graph.nodes:
        if node.op != "placeholder" and any(i in flows for i in node.all_input_nodes):
            flows.add(node)
    return flows


def find(graph) -> list[tuple]:
    """(mul node, gate Branch, up Branch, silu node) for each match in `graph`."""
    found = []
    for node in graph.nodes:
        if not _is(node, _MULS, {"mul", "__mul__"}) or len(node.args) != 2:
            continue
        for silu, other in (node.args, node.args[::-1]):
            if not hasattr(silu, "op") or not hasattr(other, "op"):
                continue
            if not _is(silu, _SILUS, {"silu"}, {"inplace": False}) or len(silu.args) != 1:
                continue
            gate, up = _branch(silu.args[0]), _branch(other)
            if gate is None or up is None or not _fits(gate, up):
                continue
            if not _single_use((silu, *gate.nodes, *up.nodes)):
                continue
            found.append((node, gate, up, silu))
            break
    return found


def rewrite(gm, example_inputs) -> int:
    """Replace every match in `gm` (in place); return how many."""
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp

    import mirai.export.fusions.ops  # noqa: F401  (registers the operators)

    fake_mode = next((t.fake_mode for t in example_inputs if hasattr(t, "fake_mode")), None)
    FakeTensorProp(gm, mode=fake_mode).propagate(*example_inputs)
    matches = find(gm.graph)
    flows = _grad_flow(gm.graph, example_inputs) if torch.is_grad_enabled() else set()
    for mul, gate, up, silu in matches:
        args = (gate.x, gate.weight, gate.bias, up.weight, up.bias)
        train = any(a in flows for a in args)
        with gm.graph.inserting_before(mul):
            if train:
                call = gm.graph.call_function(torch.ops.mirai.gate_up_silu_train.default, args)
                product = gm.graph.call_function(operator.getitem, (call, 0))
            else:
                product = gm.graph.call_function(torch.ops.mirai.gate_up_silu.default, args)
        mul.replace_all_uses_with(product)
        for node in (mul, silu, *gate.nodes, *up.nodes):
            gm.graph.erase_node(node)
    if matches:
        gm.graph.lint()
        gm.recompile()
    return len(matches)
