"""Find gated feed-forward patterns in a Dynamo-traced FX graph and call the fused operator instead.

The pattern, in any of the spellings Dynamo records (`torch.bmm`, `torch.matmul`, `@`, the Tensor
methods, `F.linear`; `F.silu`, which an `nn.SiLU` module becomes; `*` or `torch.mul`):

    gate = proj(x, w_gate, b_gate)   out = silu(gate) * up   (either order)
    up   = proj(x, w_up,   b_up)

with float32 tensors and one of three projections (Branch.kind), the same on both sides:

- "bmm": x [E, M, K] @ w [E, K, N] (+ b broadcastable to [E, 1, N]): a mixture of experts;
- "matmul": x [..., K] @ w [K, N] (+ b [N]): a dense layer written with `@`;
- "linear": F.linear(x [..., K], w [N, K], b [N]): nn.Linear's layout (a LLaMA-style MLP), whose
  weights are already K-major, so the kernel reads them without a copy.

Fusion "gate_up" takes the first, "gate_up_linear" the other two (mirai.export.fusions). The last
two run as one expert over all of x's rows: x reshaped to [1, rows, K], the result back to
[..., N]. Each intermediate must feed nothing else: the rewrite removes them. The node's shapes come
from fake-tensor propagation over the graph's example inputs. A match becomes
`mirai::gate_up_silu_train` (and its first output) when any of its tensors needs a gradient, else
`mirai::gate_up_silu`.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

import torch

_MATMULS = {torch.bmm, torch.matmul, operator.matmul}
_MATMUL_METHODS = {"bmm", "matmul", "__matmul__"}
_LINEARS = {torch.nn.functional.linear, torch._C._nn.linear}
ADDS = {operator.add, torch.add, operator.iadd}
_MULS = {operator.mul, torch.mul}
_SILUS = {torch.nn.functional.silu}


def is_call(node, functions, methods, kwargs=None) -> bool:
    """Whether `node` calls one of `functions` or `methods` with no keyword arguments but `kwargs`."""
    if node.kwargs and dict(node.kwargs) != (kwargs or {}):
        return False
    if node.op == "call_function":
        return node.target in functions
    if node.op == "call_method":
        return node.target in methods
    return False


def value_of(node):
    return node.meta.get("val", node.meta.get("example_value")) if hasattr(node, "meta") else None


@dataclass(frozen=True)
class Branch:
    """One side of the pattern: proj(x, w) (+ b), and the nodes the rewrite makes dead. `kind` says
    which projection (see the module's docstring); "bmm" and "matmul" are told apart by shapes."""

    kind: str
    x: object
    weight: object
    bias: object | None
    nodes: tuple


def _projection(node) -> tuple | None:
    """(kind, x, weight, bias) when `node` is a projection, else None."""
    if is_call(node, _MATMULS, _MATMUL_METHODS) and len(node.args) == 2:
        x, weight = node.args
        w = value_of(weight)
        return (
            ("matmul" if isinstance(w, torch.Tensor) and w.dim() == 2 else "bmm"),
            x,
            weight,
            None,
        )
    if node.op == "call_function" and node.target in _LINEARS and not set(node.kwargs) - {"bias"}:
        if 2 <= len(node.args) + len(node.kwargs) <= 3:
            x, weight, *rest = node.args
            bias = rest[0] if rest else node.kwargs.get("bias")
            return "linear", x, weight, bias
    return None


def branch_of(node) -> Branch | None:
    nodes = [node]
    bias = None
    if is_call(node, ADDS, {"add", "__add__"}) and len(node.args) == 2:
        left, right = node.args

        def matmul(side) -> bool:  # a bias is added to `@` (F.linear takes its own)
            found = _projection(side) if hasattr(side, "op") else None
            return found is not None and found[0] != "linear"

        if matmul(left):
            node, bias = left, right
        elif matmul(right):
            node, bias = right, left
        else:
            return None
        nodes.append(node)
    found = _projection(node)
    if found is None:
        return None
    kind, x, weight, own_bias = found
    return Branch(
        kind=kind, x=x, weight=weight, bias=own_bias if bias is None else bias, nodes=tuple(nodes)
    )


def bias_fits(bias, kind: str, e: int, n: int) -> bool:
    b = value_of(bias)
    if not isinstance(b, torch.Tensor) or b.dtype != torch.float32:
        return False
    if kind == "bmm":
        if b.dim() > 3:
            return False
        shape = (1,) * (3 - b.dim()) + tuple(b.shape)
        return shape[1] == 1 and shape[2] == n and shape[0] in (1, e)
    return tuple(b.shape) == (n,)


def _features(branch: Branch) -> int:
    """N, the output features of a "matmul" or "linear" branch."""
    w = value_of(branch.weight)
    return w.shape[0] if branch.kind == "linear" else w.shape[1]


def _fits(gate: Branch, up: Branch) -> bool:
    if gate.x is not up.x or gate.kind != up.kind:
        return False
    if not all(hasattr(n, "meta") for n in (gate.x, gate.weight, up.weight)):
        return False
    x, wg, wu = value_of(gate.x), value_of(gate.weight), value_of(up.weight)
    if not all(isinstance(t, torch.Tensor) for t in (x, wg, wu)):
        return False
    if any(t.dtype != torch.float32 for t in (x, wg, wu)) or wg.shape != wu.shape:
        return False
    if wg.stride() != wu.stride():  # the kernel reads both weights with one set of strides
        return False
    if gate.kind == "bmm":
        if x.dim() != 3 or wg.dim() != 3 or wg.shape[0] != x.shape[0] or wg.shape[1] != x.shape[2]:
            return False
        e, n = x.shape[0], wg.shape[2]
    else:
        k_dim = 1 if gate.kind == "linear" else 0  # linear's weight is [N, K], matmul's [K, N]
        if x.dim() < 2 or wg.dim() != 2 or wg.shape[k_dim] != x.shape[-1]:
            return False
        if not all(isinstance(d, int) for d in wg.shape):  # the reshapes name K and N
            return False
        e, n = 1, _features(gate)
    if (gate.bias is None) != (up.bias is None):
        return False
    return all(b is None or bias_fits(b, gate.kind, e, n) for b in (gate.bias, up.bias))


def single_use(nodes) -> bool:
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


def find(graph, kinds=frozenset({"bmm", "matmul", "linear"})) -> list[tuple]:
    """(mul node, gate Branch, up Branch, silu node) for each match in `graph` whose projections
    are of one of `kinds`."""
    found = []
    for node in graph.nodes:
        if not is_call(node, _MULS, {"mul", "__mul__"}) or len(node.args) != 2:
            continue
        for silu, other in (node.args, node.args[::-1]):
            if not hasattr(silu, "op") or not hasattr(other, "op"):
                continue
            if not is_call(silu, _SILUS, {"silu"}, {"inplace": False}) or len(silu.args) != 1:
                continue
            gate, up = branch_of(silu.args[0]), branch_of(other)
            if gate is None or up is None or gate.kind not in kinds or not _fits(gate, up):
                continue
            if not single_use((silu, *gate.nodes, *up.nodes)):
                continue
            found.append((node, gate, up, silu))
            break
    return found


def _down(mul, gate: Branch):
    """The weight of the down projection `mul` feeds, `bmm(mul, w_down)` with w_down [E, N, D]
    float32, when that is the product's one use in a "bmm" match; else None."""
    if gate.kind != "bmm" or len(mul.users) != 1:
        return None
    (user,) = mul.users
    if (
        not is_call(user, _MATMULS, _MATMUL_METHODS)
        or len(user.args) != 2
        or user.args[0] is not mul
    ):
        return None
    weight = user.args[1]
    w, wg, x = value_of(weight), value_of(gate.weight), value_of(gate.x)
    if not isinstance(w, torch.Tensor) or w.dtype != torch.float32 or w.dim() != 3:
        return None
    if w.shape[0] != x.shape[0] or w.shape[1] != wg.shape[2]:
        return None
    return user, weight


def propagate(gm, example_inputs) -> None:
    """Give every node of `gm` its value's shape and strides (node.meta["val"]) for the graph's
    example inputs, by fake-tensor propagation."""
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp

    fake_mode = next((t.fake_mode for t in example_inputs if hasattr(t, "fake_mode")), None)
    FakeTensorProp(gm, mode=fake_mode).propagate(*example_inputs)


def rewrite(gm, example_inputs, kinds, down: bool = False) -> int:
    """Replace every match in `gm` whose projections are of one of `kinds` (in place); return how
    many. With `down`, a training match of kind "bmm" whose product feeds a down projection alone
    takes that GEMM in too (`mirai::gate_up_down_train`: its backward computes the down GEMM's
    input gradient with SiLU's gradient in the epilogue, mirai.export.fusions.silu_grad), and,
    where the projection's result is transposed back to rows as fusion bmm_rows finds it, its bias
    and that transpose (the operator's result is then [M, E, D], written by one GEMM)."""
    import mirai.export.fusions.ops  # noqa: F401  (registers the operators)
    from mirai.export.fusions.rows import bias_as_rows, find_after

    def _rows_after(node, weight):  # the down GEMM transposed back to rows, as bmm_rows finds it
        w = value_of(weight)
        return find_after(node, w.shape[0], w.shape[2])

    propagate(gm, example_inputs)
    matches = find(gm.graph, kinds)
    flows = _grad_flow(gm.graph, example_inputs) if torch.is_grad_enabled() else set()
    for mul, gate, up, silu in matches:
        args = (gate.x, gate.weight, gate.bias, up.weight, up.bias)
        train = any(a in flows for a in args)
        projection = _down(mul, gate) if down and train else None
        rows = None if projection is None else _rows_after(*projection)
        # where the operator takes the down bias too, that may be computed after the GEMM
        place = mul if projection is None else projection[0] if rows is None else rows[0]
        with gm.graph.inserting_before(place):
            operands = args if gate.kind == "bmm" else _as_one_expert(gm.graph, gate, up)
            if projection is not None:
                op = torch.ops.mirai.gate_up_down_train.default
                bias = None if rows is None else bias_as_rows(gm.graph, rows[1], projection[1])
                call = gm.graph.call_function(
                    op, (*operands, projection[1], bias, rows is not None)
                )
                result = gm.graph.call_function(operator.getitem, (call, 0))
                last = projection[0] if rows is None else rows[0]
                last.replace_all_uses_with(result)
                for node in (last,) if rows is None else (rows[0], *rows[2], projection[0]):
                    gm.graph.erase_node(node)
            elif train:
                call = gm.graph.call_function(torch.ops.mirai.gate_up_silu_train.default, operands)
                product = gm.graph.call_function(operator.getitem, (call, 0))
            else:
                product = gm.graph.call_function(torch.ops.mirai.gate_up_silu.default, operands)
            if projection is None and gate.kind != "bmm":
                product = _rows_back(gm.graph, product, gate)
        if projection is None:
            mul.replace_all_uses_with(product)
        for node in (mul, silu, *gate.nodes, *up.nodes):
            gm.graph.erase_node(node)
    if matches:
        gm.graph.lint()
        gm.recompile()
    return len(matches)


def _as_one_expert(graph, gate: Branch, up: Branch) -> tuple:
    """The operator's operands for a "matmul" or "linear" match: x as [1, rows, K], both weights as
    [1, K, N] (a transposed view of linear's [N, K]), the biases as [1, 1, N]."""
    x = value_of(gate.x)
    k = x.shape[-1]
    method = graph.call_method
    rows = method("reshape", (gate.x, 1, -1, k))

    def weight(node):
        if gate.kind == "linear":
            node = method("t", (node,))
        return method("unsqueeze", (node, 0))

    def bias(node):
        return None if node is None else method("reshape", (node, 1, 1, -1))

    return rows, weight(gate.weight), bias(gate.bias), weight(up.weight), bias(up.bias)


def _rows_back(graph, product, gate: Branch):
    """The operator's [1, rows, N] result in x's leading shape: [..., N]."""
    x = value_of(gate.x)
    if x.dim() == 2:
        return graph.call_method("squeeze", (product, 0))
    size = graph.call_method("size", (gate.x,))
    lead = [graph.call_function(operator.getitem, (size, i)) for i in range(x.dim() - 1)]
    return graph.call_method("reshape", (product, *lead, _features(gate)))
