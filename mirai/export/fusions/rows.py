"""Fusion `bmm_rows`: a batched GEMM whose result is transposed back to the rows it came from,

    y = (torch.bmm(p, w) + bias).transpose(0, 1)      p [E, M, K], w [E, K, N], bias -> [E, 1, N]

(a mixture of experts over x [M, E, K], returning [M, E, N]), becomes `mirai::rows_gemm(p, w, bias)`:
one cuBLASLt GEMM that writes [M, E, N] directly, with the bias in its epilogue (`mirai::bmm_rows`),
or, where the op is traced at few rows (FEW_ROWS or less), one launch of the few_rows Triton kernel
writing the same, which costs the host less (mirai.export.fusions.few_rows). Inductor would
write the GEMM's [E, M, N] result, then read it back in a kernel that adds the bias and transposes
it (at pffn's B = 8000, 65 MB written and read again, and a launch). In a training graph the
operator's backward reads the result's gradient where it lies, as [E, M, N] strides
(mirai.export.fusions.ops).

The transpose may be `.transpose(0, 1)`, `.transpose(1, 0)`, `torch.transpose` or `.permute(1, 0, 2)`;
the bias, where there is one, anything broadcastable to [E, 1, N] (`b.unsqueeze(1)` for b [E, N]).
The GEMM's result and the sum must feed nothing else: the rewrite removes them.
"""

from __future__ import annotations

import torch

from mirai.export.fusions.match import (
    ADDS,
    Branch,
    bias_fits,
    branch_of,
    is_call,
    value_of,
    propagate,
)

_TRANSPOSES = {torch.transpose}


def _transposed(node):
    """What `node` transposes in its first two dimensions (a rank-3 tensor), else None."""
    if len(node.args) < 1 or node.kwargs or not hasattr(node.args[0], "op"):
        return None
    source, rest = node.args[0], tuple(node.args[1:])
    if node.op == "call_method" and node.target == "permute":
        dims = rest[0] if len(rest) == 1 and isinstance(rest[0], (tuple, list)) else rest
        return source if tuple(dims) == (1, 0, 2) else None
    if (node.op == "call_method" and node.target == "transpose") or (
        node.op == "call_function" and node.target in _TRANSPOSES
    ):
        return source if rest in ((0, 1), (1, 0)) else None
    return None


def find(graph) -> list[tuple]:
    """(transpose node, Branch) for each `(bmm(p, w) + bias).transpose(0, 1)` in `graph`: every
    float32 batched GEMM that `find_after` sees transposed back to rows."""
    found = []
    for node in graph.nodes:
        gemm = branch_of(node)
        if gemm is None or gemm.kind != "bmm" or gemm.nodes != (node,):  # the GEMM itself
            continue
        p, w = value_of(gemm.x), value_of(gemm.weight)
        if not all(isinstance(t, torch.Tensor) and t.dim() == 3 for t in (p, w)):
            continue
        if p.dtype != torch.float32 or w.dtype != torch.float32 or p.shape[0] != w.shape[0]:
            continue
        after = find_after(node, w.shape[0], w.shape[2])
        if after is not None:
            transpose, bias, between = after
            # the nodes the rewrite erases, users first
            found.append((transpose, Branch("bmm", gemm.x, gemm.weight, bias, (*between, node))))
    return found


def _fits(bias, e, n) -> bool:
    """Whether a result of E x N columns takes `bias` in the GEMM's epilogue (E and N known)."""
    if not isinstance(e, int) or not isinstance(n, int):
        return False
    return bias is None or bias_fits(bias, "bmm", e, n)


def find_after(projection, e: int, n: int):
    """Where the GEMM node `projection` ([E, M, N]) is transposed back to rows, with or without a
    bias on the way: (transpose node, bias or None, the nodes between, which the transpose's
    replacement makes dead); else None."""
    if len(projection.users) != 1:
        return None
    (user,) = projection.users
    bias, between = None, ()
    if is_call(user, ADDS, {"add", "__add__"}) and len(user.args) == 2 and len(user.users) == 1:
        left, right = user.args
        bias = right if left is projection else left if right is projection else None
        if bias is None or bias is projection:
            return None
        between, (user,) = (user,), user.users
    if _transposed(user) is not (between[0] if between else projection):
        return None
    if not _fits(bias, e, n):
        return None
    return user, bias, between


def bias_as_rows(graph, bias, weight):
    """`bias` as the operators take it, [E, 1, N] for `weight` [E, K, N]: broadcast where it is
    smaller (a [N] or [1, 1, N] bias); None stays None. Inserts at the graph's insertion point."""
    if bias is None:
        return None
    w = value_of(weight)
    shape = (w.shape[0], 1, w.shape[2])
    if tuple(value_of(bias).shape) == shape:
        return bias
    return graph.call_function(torch.broadcast_to, (bias, shape))


def rewrite(gm, example_inputs) -> int:
    """Replace every match in `gm` (in place); return how many."""
    import mirai.export.fusions.ops  # noqa: F401  (registers the operator)

    propagate(gm, example_inputs)
    matches = find(gm.graph)
    for transpose, branch in matches:
        with gm.graph.inserting_before(transpose):
            bias = bias_as_rows(gm.graph, branch.bias, branch.weight)
            rows = gm.graph.call_function(
                torch.ops.mirai.rows_gemm.default, (branch.x, branch.weight, bias)
            )
        transpose.replace_all_uses_with(rows)
        for node in (transpose, *branch.nodes):
            gm.graph.erase_node(node)
    if matches:
        gm.graph.lint()
        gm.recompile()
    return len(matches)
