"""Shared by the GPU checks: feed a generated function wrong inputs and record how each is refused."""

from __future__ import annotations


def refusals(fn, cases: dict) -> dict:
    """{case: "code N: message"} for each list of inputs in `cases` (code 1 is InvalidArgument), or
    "accepted" where the op ran. A crash would end the check, which is the point."""
    import torch

    from mirai.export.launch import OpError

    seen = {}
    for case, inputs in cases.items():
        try:
            fn([t.contiguous() for t in inputs])
            seen[case] = "accepted"
        except OpError as err:
            seen[case] = f"code {err.code}: {err}"
    torch.cuda.synchronize()
    return seen
