/** The ready example of each input language, and the default output pane for it. */
import type { Language } from "./catalog";
import type { PaneState } from "./state";

export const PYTORCH_EXAMPLE = `import torch
import torch.nn as nn


class MyModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x):
        return torch.relu(self.linear(x))


model = MyModel()
example_input = torch.randn(4, 4)
`;

export const TRITON_EXAMPLE = `import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


n = 1024
x = torch.randn(n, device="cuda")
y = torch.randn(n, device="cuda")
out = torch.empty_like(x)
add_kernel[(triton.cdiv(n, 256),)](x, y, out, n, BLOCK_SIZE=256)
`;

// Printed the way mlir-opt prints it, so the diff of a pass shows only what the pass changed.
export const RAW_IR_EXAMPLE = `module {
  func.func @axpy(%arg0: f32, %arg1: f32, %arg2: f32) -> f32 {
    %cst = arith.constant 0.000000e+00 : f32
    %0 = arith.mulf %arg0, %arg1 : f32
    %1 = arith.addf %cst, %cst : f32
    %2 = arith.addf %0, %arg2 : f32
    return %2 : f32
  }
}
`;

export const EXAMPLES: Record<Language, string> = {
  pytorch: PYTORCH_EXAMPLE,
  triton: TRITON_EXAMPLE,
  raw_ir: RAW_IR_EXAMPLE,
};

/** The pane a fresh page shows for a language. */
export function examplePanes(language: Language): PaneState[] {
  if (language === "raw_ir") {
    return [
      {
        irType: "raw_ir",
        steps: [{ tool: "mlir_opt", flags: "--canonicalize" }],
        dumpAfterEach: true,
      },
    ];
  }
  const irType = language === "pytorch" ? "torch_mlir" : "triton_ir";
  return [{ irType, steps: [], dumpAfterEach: false }];
}
