/** Ready examples of each input language, each with the output panes that show it best. */
import type { Language } from "./catalog";
import type { PageState, PaneState } from "./state";

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

export const TWO_MODELS_EXAMPLE = `import torch
import torch.nn as nn


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 16)

    def forward(self, x):
        return nn.functional.gelu(self.proj(x))


class Scale(nn.Module):
    def forward(self, x):
        return x * 2.0 + 1.0


# One __explore__ call per model: the output holds each model's IR in turn.
__explore__(Encoder(), torch.randn(2, 8))
__explore__(Scale(), torch.randn(3))
`;

export const SOFTMAX_EXAMPLE = `import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(out_ptr, in_ptr, row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * row_stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * row_stride + cols, num / tl.sum(num, axis=0), mask=mask)


# Launches compile for the pane's target; nothing runs.
x = torch.randn(64, 1000, device="cuda")
out = torch.empty_like(x)
softmax_kernel[(x.shape[0],)](out, x, x.stride(0), x.shape[1], BLOCK=1024)
`;

export const LLVM_IR_EXAMPLE = `define i32 @sum_to(i32 %n) {
entry:
  br label %loop

loop:
  %i = phi i32 [ 0, %entry ], [ %next, %loop ]
  %acc = phi i32 [ 0, %entry ], [ %sum, %loop ]
  %sum = add i32 %acc, %i
  %next = add i32 %i, 1
  %done = icmp eq i32 %next, %n
  br i1 %done, label %exit, label %loop

exit:
  ret i32 %sum
}
`;

export interface Example {
  name: string;
  code: string;
  panes: PaneState[];
}

const pane = (irType: string, extra: Partial<PaneState> = {}): PaneState => ({
  irType,
  steps: [],
  dumpAfterEach: false,
  ...extra,
});

/** The examples of each language; the first one is what a fresh page shows. */
export const EXAMPLES: Record<Language, Example[]> = {
  pytorch: [
    { name: "Linear + ReLU", code: PYTORCH_EXAMPLE, panes: [pane("torch_mlir")] },
    {
      name: "Two models (__explore__)",
      code: TWO_MODELS_EXAMPLE,
      panes: [pane("torch_mlir"), pane("linalg_on_tensors_mlir")],
    },
  ],
  triton: [
    { name: "Vector add", code: TRITON_EXAMPLE, panes: [pane("triton_ir")] },
    {
      name: "Row softmax",
      code: SOFTMAX_EXAMPLE,
      panes: [pane("triton_gpu_ir"), pane("triton_nvptx", { target: "sm_90" })],
    },
  ],
  raw_ir: [
    {
      name: "MLIR: canonicalize",
      code: RAW_IR_EXAMPLE,
      panes: [
        pane("raw_ir", { steps: [{ tool: "mlir_opt", flags: "--canonicalize" }], dumpAfterEach: true }),
      ],
    },
    {
      name: "LLVM IR: opt -O2, llc to PTX",
      code: LLVM_IR_EXAMPLE,
      panes: [
        pane("raw_ir", {
          steps: [
            { tool: "llvm_opt", flags: "-O2" },
            { tool: "llc", flags: "-mtriple=nvptx64-nvidia-cuda -mcpu=sm_90" },
          ],
          dumpAfterEach: true,
        }),
      ],
    },
  ],
};

/** The page state of an example. */
export function exampleState(language: Language, index = 0): PageState {
  const example = EXAMPLES[language][index] ?? EXAMPLES[language][0]!;
  return { version: 1, language, code: example.code, panes: structuredClone(example.panes) };
}

/** Whether `code` is one of a language's examples, unchanged. */
export function isExample(language: Language, code: string): boolean {
  return EXAMPLES[language].some((e) => e.code.trim() === code.trim());
}
