"""The seed's position-wise feed-forward network (a mixture of E experts), exported with static shapes.

python examples/pffn.py            # or: mirai build examples/pffn.py
cd generated && bash build.sh
"""

import torch

import mirai

E, D, H, B = 8, 256, 1024, 8000


@mirai.op(name="Pffn")
def pffn(inputs, w_gate, b_gate, w_up, b_up, w_down, b_down):
    inputs_t = inputs.transpose(0, 1)
    gates = torch.bmm(inputs_t, w_gate) + b_gate.unsqueeze(1)
    gates = torch.nn.functional.silu(gates)
    vals = torch.bmm(inputs_t, w_up) + b_up.unsqueeze(1)
    outputs = torch.bmm(gates * vals, w_down) + b_down.unsqueeze(1)
    return outputs.transpose(0, 1)


def sample_inputs(batch: int = B, device: str = "cpu", experts=E, d_model=D, hidden=H):
    """The seed's inputs; the CPU numeric check builds the same function at smaller sizes."""
    g = torch.Generator(device=device).manual_seed(0)
    e, d, h = experts, d_model, hidden

    def rand(*shape, scale=1.0):
        return torch.randn(*shape, generator=g, device=device) * scale

    return [
        rand(batch, e, d),
        rand(e, d, h, scale=d**-0.5),
        rand(e, h, scale=0.1),
        rand(e, d, h, scale=d**-0.5),
        rand(e, h, scale=0.1),
        rand(e, h, d, scale=h**-0.5),
        rand(e, d, scale=0.1),
    ]


# What `mirai build examples/pffn.py` exports.
MIRAI_BUILD = {"op": pffn, "sample_inputs": sample_inputs}

if __name__ == "__main__":
    mirai.build(pffn, sample_inputs=sample_inputs())
