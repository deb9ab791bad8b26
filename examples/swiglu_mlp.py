"""A LLaMA-style feed-forward block (SwiGLU) over nn.Linear weights, exported with a dynamic batch.

python examples/swiglu_mlp.py   # or: mirai build examples/swiglu_mlp.py --inference --fuse gate_up_linear
cd generated && bash build.sh

Its gate and up projections share their input and meet in `silu(gate) * up`: the pattern of the
`gate_up_linear` fusion (mirai.export.fusions), which a build applies when named (`--fuse
gate_up_linear`): one Triton kernel for both projections and the SiLU product. nn.Linear stores
weights [out, in], which the fused kernel reads as they are (K-major) without a copy.
"""

import torch
import torch.nn.functional as F

import mirai

B, S, D, H = 4, 512, 1024, 2816


@mirai.op(name="SwiGluMlp")
def swiglu_mlp(x, w_gate, w_up, w_down):
    return F.linear(F.silu(F.linear(x, w_gate)) * F.linear(x, w_up), w_down)


def sample_inputs(batch: int = B, device: str = "cpu", seq=S, dim=D, hidden=H):
    """x [batch, seq, dim] and the three weights as nn.Linear keeps them ([out, in])."""
    g = torch.Generator(device=device).manual_seed(0)

    def rand(*shape, scale=1.0):
        return torch.randn(*shape, generator=g, device=device) * scale

    return [
        rand(batch, seq, dim),
        rand(hidden, dim, scale=dim**-0.5),
        rand(hidden, dim, scale=dim**-0.5),
        rand(dim, hidden, scale=hidden**-0.5),
    ]


# What `mirai build examples/swiglu_mlp.py` exports: one op for every batch size.
MIRAI_BUILD = {"op": swiglu_mlp, "sample_inputs": sample_inputs, "dynamic": True}

if __name__ == "__main__":
    mirai.build(swiglu_mlp, sample_inputs=sample_inputs(), dynamic=True)
