"""User code the tests send: the guide's example, several models, Triton kernels."""

GUIDE_MODEL = """
import torch
import torch.nn as nn

class MyModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x):
        return torch.relu(self.linear(x))

model = MyModel()
example_input = torch.randn(4, 4)
""".strip()

TWO_MODELS = """
import torch
import torch.nn as nn

class Scale(nn.Module):
    def forward(self, x):
        return x * 2.0

class MatMul(nn.Module):
    def forward(self, a, b):
        return torch.tanh(a @ b)

__explore__(Scale(), torch.randn(3))
__explore__(MatMul(), torch.randn(2, 3), torch.randn(3, 5))
""".strip()

ADD_KERNEL = """
import torch
import triton
import triton.language as tl

@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)

x = torch.randn(4096, device="cuda")
y = torch.randn(4096, device="cuda")
out = torch.empty_like(x)
add_kernel[(triton.cdiv(4096, 1024),)](x, y, out, 4096, BLOCK=1024)
torch.cuda.synchronize()
assert torch.allclose(out, x + y)
""".strip()

AUTOTUNED_SOFTMAX = """
import torch
import triton
import triton.language as tl

@triton.autotune(
    configs=[triton.Config({}, num_warps=4), triton.Config({}, num_warps=8)], key=["n_cols"]
)
@triton.jit
def softmax_kernel(out_ptr, in_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(in_ptr + row * n_cols + cols, mask=cols < n_cols, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * n_cols + cols, num / tl.sum(num, axis=0), mask=cols < n_cols)

x = torch.randn(8, 100, device="cuda")
y = torch.empty_like(x)
softmax_kernel[(8,)](y, x, 100, BLOCK=128)
""".strip()

PRINTS_TTGIR = (
    ADD_KERNEL.replace(
        "add_kernel[(triton.cdiv(4096, 1024),)]", "kernel = add_kernel[(triton.cdiv(4096, 1024),)]"
    ).split("torch.cuda.synchronize()")[0]
    + 'print(kernel.asm["ttgir"])\n'
)

NO_LAUNCH = ADD_KERNEL.split("x = torch.randn")[0]

# Raw IR for the pipeline tools: an LLVM-dialect module and LLVM IR.
LLVM_DIALECT = """
module {
  llvm.func @add(%a: i32, %b: i32) -> i32 {
    %0 = llvm.add %a, %b : i32
    llvm.return %0 : i32
  }
}
""".lstrip()

LLVM_IR = """
define i32 @square_plus(i32 %x) {
  %1 = mul i32 %x, %x
  %2 = add i32 %1, 0
  ret i32 %2
}
""".lstrip()
