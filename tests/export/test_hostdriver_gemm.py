"""The CPU stand-in for cuBLASLt (mirai/export/hostdriver/native/libcublaslt_host.cc), driven through
ctypes as the generated launch code drives the real library: handle, matmul descriptor, matrix layouts,
preference, heuristic, workspace, matmul. Every result is compared with torch in float64, within a
bound derived from the output's dtype and fp32 accumulation over k; bad input gives cuBLASLt's
statuses. The stand-in is loaded into this process by path (its soname does not matter here); the
last test loads it the way the CPU driver's process does, by soname, in a process of its own.

Tests named `stand_in` check what only the stand-in does (its workspace, counter, fp32 for TF32, the
modes it refuses). The others hold for the real library too: with DEVICE = "cuda" and
`open_library` returning cuBLASLt 13.1, they passed on an H200.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import pytest
import torch

from mirai.export.hostdriver import driver
from tests.export.conftest import interpreted

DEVICE = "cpu"  # where the matrices live: host memory is the stand-in's "device" memory

# cublasStatus_t
SUCCESS, NOT_INITIALIZED, INVALID_VALUE, NOT_SUPPORTED = 0, 1, 7, 15
# cudaDataType_t and cublasComputeType_t
DATA_TYPE = {torch.float32: 0, torch.float16: 2, torch.bfloat16: 14}
COMPUTE_32F, COMPUTE_32F_FAST_TF32, COMPUTE_64F = 68, 77, 70
# cublasLtMatmulDescAttributes_t
DESC_POINTER_MODE, DESC_TRANSA, DESC_TRANSB = 2, 3, 4
DESC_EPILOGUE, DESC_BIAS_POINTER, DESC_BIAS_BATCH_STRIDE, DESC_BIAS_DATA_TYPE = 7, 8, 10, 26
OP_N, OP_T = 0, 1
EPILOGUE_RELU, EPILOGUE_BIAS = 2, 4
POINTER_MODE_DEVICE = 1
# cublasLtMatrixLayoutAttribute_t
LAYOUT_ORDER, LAYOUT_LD, LAYOUT_BATCH_COUNT, LAYOUT_STRIDED_BATCH_OFFSET = 1, 4, 5, 6
ORDER_ROW = 1
# cublasLtMatmulPreferenceAttributes_t
PREF_MAX_WORKSPACE_BYTES, PREF_MIN_ALIGNMENT_A_BYTES = 1, 5

WORKSPACE = 1 << 20  # what the caller offers: the preference's maximum and the buffer it passes


class Algo(ctypes.Structure):
    _fields_ = [("data", ctypes.c_uint64 * 8)]


class HeuristicResult(ctypes.Structure):
    _fields_ = [
        ("algo", Algo),
        ("workspaceSize", ctypes.c_size_t),
        ("state", ctypes.c_int),
        ("wavesCount", ctypes.c_float),
        ("reserved", ctypes.c_int * 4),
    ]


def _declare(lib: ctypes.CDLL) -> ctypes.CDLL:
    """The C signatures of the API (cublasLt.h), so ctypes passes every argument at its real width."""
    p, i, u64, i64, size = (
        ctypes.c_void_p,
        ctypes.c_int,
        ctypes.c_uint64,
        ctypes.c_int64,
        ctypes.c_size_t,
    )
    pp = ctypes.POINTER(ctypes.c_void_p)
    signatures = {
        "cublasLtCreate": [pp],
        "cublasLtDestroy": [p],
        "cublasLtMatmulDescCreate": [pp, i, i],
        "cublasLtMatmulDescDestroy": [p],
        "cublasLtMatmulDescSetAttribute": [p, i, p, size],
        "cublasLtMatrixLayoutCreate": [pp, i, u64, u64, i64],
        "cublasLtMatrixLayoutDestroy": [p],
        "cublasLtMatrixLayoutSetAttribute": [p, i, p, size],
        "cublasLtMatmulPreferenceCreate": [pp],
        "cublasLtMatmulPreferenceDestroy": [p],
        "cublasLtMatmulPreferenceSetAttribute": [p, i, p, size],
        "cublasLtMatmulAlgoGetHeuristic": [
            *[p] * 7,
            i,
            ctypes.POINTER(HeuristicResult),
            ctypes.POINTER(ctypes.c_int),
        ],
        "cublasLtMatmul": [
            *[p] * 12,
            ctypes.POINTER(Algo),
            p,
            size,
            p,
        ],
    }
    for name, argtypes in signatures.items():
        getattr(lib, name).argtypes = argtypes
        getattr(lib, name).restype = ctypes.c_int
    lib.cublasLtGetVersion.restype = ctypes.c_size_t
    lib.cublasLtGetStatusString.argtypes = [ctypes.c_int]
    lib.cublasLtGetStatusString.restype = ctypes.c_char_p
    return lib


def open_library() -> ctypes.CDLL:
    return ctypes.CDLL(str(driver.build_cublaslt()))


@pytest.fixture(scope="module")
def lib():
    return _declare(open_library())


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def _value(ctype, value):
    return ctypes.byref(ctype(value)), ctypes.sizeof(ctype)


@dataclass
class Matrix:
    """A column-major matrix (or batch of them) in a flat buffer: element (i, j) of batch b is at
    b * stride + i + j * ld, as a cuBLASLt layout describes it."""

    storage: torch.Tensor
    rows: int
    cols: int
    ld: int
    batch: int = 1
    stride: int = 0

    @property
    def view(self) -> torch.Tensor:  # batch x rows x cols
        return self.storage.as_strided(
            (self.batch, self.rows, self.cols), (self.stride, 1, self.ld)
        )

    @property
    def ptr(self) -> int:
        return self.storage.data_ptr()


def matrix(rows, cols, dtype=torch.float32, *, ld=None, batch=1, stride=None, fill=None) -> Matrix:
    """Random values exact in `dtype`, padding (past `rows`, between batches) included."""
    ld = rows if ld is None else ld
    stride = ld * cols if stride is None else stride
    size = max(1, (batch - 1) * stride + ld * cols)
    if fill is None:
        storage = torch.randn(size).to(dtype)
    else:
        storage = torch.full((size,), fill, dtype=dtype)
    return Matrix(storage.to(DEVICE), rows, cols, ld, batch, stride)


class Gemm:
    """One matmul set up as a caller of cuBLASLt sets it up; every object is destroyed on exit."""

    def __init__(self, lib, a, b, c, d, *, trans_a=False, trans_b=False, compute=COMPUTE_32F):
        self.lib, self.a, self.b, self.c, self.d = lib, a, b, c, d
        self.handle = self._create("cublasLtCreate")
        self.desc = self._create("cublasLtMatmulDescCreate", compute, DATA_TYPE[torch.float32])
        self.set_desc(DESC_TRANSA, ctypes.c_int32, OP_T if trans_a else OP_N)
        self.set_desc(DESC_TRANSB, ctypes.c_int32, OP_T if trans_b else OP_N)
        self.layouts = [self._layout(x) for x in (a, b, c, d)]
        self.pref = self._create("cublasLtMatmulPreferenceCreate")
        self.set_pref(PREF_MAX_WORKSPACE_BYTES, ctypes.c_uint64, WORKSPACE)

    def __enter__(self) -> Gemm:
        return self

    def __exit__(self, *exc) -> None:
        for layout in self.layouts:
            assert self.lib.cublasLtMatrixLayoutDestroy(layout) == SUCCESS
        assert self.lib.cublasLtMatmulPreferenceDestroy(self.pref) == SUCCESS
        assert self.lib.cublasLtMatmulDescDestroy(self.desc) == SUCCESS
        assert self.lib.cublasLtDestroy(self.handle) == SUCCESS

    def _create(self, fn, *args) -> ctypes.c_void_p:
        out = ctypes.c_void_p()
        assert getattr(self.lib, fn)(ctypes.byref(out), *args) == SUCCESS, fn
        return out

    def _layout(self, m: Matrix) -> ctypes.c_void_p:
        dtype = DATA_TYPE[m.storage.dtype]
        layout = self._create("cublasLtMatrixLayoutCreate", dtype, m.rows, m.cols, m.ld)
        if m.batch != 1:
            self.set_layout(layout, LAYOUT_BATCH_COUNT, ctypes.c_int32, m.batch)
            self.set_layout(layout, LAYOUT_STRIDED_BATCH_OFFSET, ctypes.c_int64, m.stride)
        return layout

    def set_desc(self, attr, ctype, value, expect=SUCCESS) -> None:
        status = self.lib.cublasLtMatmulDescSetAttribute(self.desc, attr, *_value(ctype, value))
        assert status == expect, (attr, status)

    def set_layout(self, layout, attr, ctype, value, expect=SUCCESS) -> None:
        status = self.lib.cublasLtMatrixLayoutSetAttribute(layout, attr, *_value(ctype, value))
        assert status == expect, (attr, status)

    def set_pref(self, attr, ctype, value, expect=SUCCESS) -> None:
        status = self.lib.cublasLtMatmulPreferenceSetAttribute(
            self.pref, attr, *_value(ctype, value)
        )
        assert status == expect, (attr, status)

    def bias(self, bias: torch.Tensor, dtype=None) -> None:
        self.set_desc(DESC_EPILOGUE, ctypes.c_uint32, EPILOGUE_BIAS)
        self.set_desc(DESC_BIAS_POINTER, ctypes.c_void_p, bias.data_ptr())
        if dtype is not None:
            self.set_desc(DESC_BIAS_DATA_TYPE, ctypes.c_int32, DATA_TYPE[dtype])

    def heuristic(self, requested=1) -> tuple[int, list[HeuristicResult]]:
        results = (HeuristicResult * max(requested, 1))()
        count = ctypes.c_int(-1)
        status = self.lib.cublasLtMatmulAlgoGetHeuristic(
            self.handle,
            self.desc,
            *self.layouts,
            self.pref,
            requested,
            results,
            ctypes.byref(count),
        )
        return status, list(results[: count.value])

    def matmul(
        self, alpha=1.0, beta=0.0, *, algo=None, workspace=None, workspace_size=None, null=False
    ) -> int:
        """cublasLtMatmul with the heuristic's first algorithm (algo=False: none) and a new workspace
        of the size it asks for, unless given (null: a null workspace pointer); returns the status.
        """
        if algo is None:
            status, results = self.heuristic()
            assert status == SUCCESS and len(results) == 1, status
            algo = results[0].algo
            workspace_size = results[0].workspaceSize if workspace_size is None else workspace_size
        scratch = None  # the workspace this call allocates, alive until it returns
        if workspace is None and workspace_size and not null:
            scratch = torch.empty(workspace_size, dtype=torch.uint8, device=DEVICE)
            workspace = scratch.data_ptr()
        c = None if self.c is None else self.c.ptr
        status = self.lib.cublasLtMatmul(
            self.handle,
            self.desc,
            ctypes.byref(ctypes.c_float(alpha)),
            self.a.ptr,
            self.layouts[0],
            self.b.ptr,
            self.layouts[1],
            ctypes.byref(ctypes.c_float(beta)),
            c,
            self.layouts[2],
            self.d.ptr,
            self.layouts[3],
            None if algo is False else ctypes.byref(algo),
            workspace,
            workspace_size or 0,
            None,
        )
        if DEVICE != "cpu":
            torch.cuda.synchronize()
        del scratch
        return status


def reference(a, b, c, *, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, bias=None):
    """(expected, magnitude): D in float64, and alpha |op(A)| @ |op(B)| + |beta C| + |bias|, the
    scale of the rounding errors in each element."""
    op_a = a.view.double().cpu()
    op_b = b.view.double().cpu()
    op_a = op_a.transpose(1, 2) if trans_a else op_a
    op_b = op_b.transpose(1, 2) if trans_b else op_b
    expected = alpha * (op_a @ op_b)
    magnitude = abs(alpha) * (op_a.abs() @ op_b.abs())
    if beta != 0.0:
        expected = expected + beta * c.view.double().cpu()
        magnitude = magnitude + abs(beta) * c.view.double().cpu().abs()
    if bias is not None:
        expected = expected + bias.double().cpu()[..., :, None]  # [m] or, batched, [batch, m]
        magnitude = magnitude + bias.double().cpu().abs()[..., :, None]
    return expected, magnitude


def assert_close(d: Matrix, expected, magnitude, k: int) -> None:
    """Within fp32 accumulation over k (plus alpha, beta C and bias: three more roundings) and one
    rounding to D's dtype: the error bound of the computation, not a tuned tolerance."""
    got = d.view.double().cpu()
    bound = torch.finfo(d.storage.dtype).eps * expected.abs()
    bound += (k + 3) * torch.finfo(torch.float32).eps * magnitude + 1e-30
    error = (got - expected).abs()
    assert torch.isfinite(got).all()
    worst = (error - bound).argmax()
    assert (
        error <= bound
    ).all(), f"error {error.flatten()[worst]:.3g} over its bound {bound.flatten()[worst]:.3g}"


def padding_of(m: Matrix) -> torch.Tensor:
    """The storage elements no element of the matrix covers."""
    covered = torch.zeros(m.storage.numel(), dtype=torch.bool)
    index = torch.arange(m.storage.numel()).as_strided(m.view.shape, m.view.stride())
    covered[index.flatten()] = True
    return m.storage.cpu()[~covered]


# ---- numbers -------------------------------------------------------------------------------------
@pytest.mark.parametrize("trans_a", [False, True], ids=["N", "T"])
@pytest.mark.parametrize("trans_b", [False, True], ids=["N", "T"])
def test_every_transpose_combination(lib, trans_a, trans_b):
    m, n, k = 5, 7, 3  # all different, so a swapped dimension cannot pass
    a = matrix(k, m) if trans_a else matrix(m, k)
    b = matrix(n, k) if trans_b else matrix(k, n)
    c, d = matrix(m, n), matrix(m, n)
    with Gemm(lib, a, b, c, d, trans_a=trans_a, trans_b=trans_b) as gemm:
        assert gemm.matmul(alpha=1.0, beta=0.0) == SUCCESS
    expected, magnitude = reference(a, b, c, trans_a=trans_a, trans_b=trans_b)
    assert_close(d, expected, magnitude, k)


@pytest.mark.parametrize("broadcast", ["A", "B"])
def test_strided_batches_with_a_broadcast_operand(lib, broadcast):
    m, n, k, batch = 6, 4, 9, 3
    # Gaps between batches (stride > ld * cols) and ld > rows; the broadcast operand has stride 0.
    a = matrix(m, k, ld=8, batch=batch, stride=0 if broadcast == "A" else 8 * k + 5)
    b = matrix(k, n, batch=batch, stride=0 if broadcast == "B" else k * n + 3)
    c = matrix(m, n, batch=batch, stride=m * n + 2)
    d = matrix(m, n, ld=7, batch=batch, stride=7 * n + 1)
    padding = padding_of(d)
    with Gemm(lib, a, b, c, d) as gemm:
        assert gemm.matmul(alpha=0.5, beta=2.0) == SUCCESS
    expected, magnitude = reference(a, b, c, alpha=0.5, beta=2.0)
    assert_close(d, expected, magnitude, k)
    assert torch.equal(padding_of(d), padding)  # nothing between or after the batches is written


@pytest.mark.parametrize("trans_a", [False, True], ids=["N", "T"])
def test_leading_dimensions_larger_than_rows(lib, trans_a):
    m, n, k = 3, 5, 4
    a = matrix(k, m, ld=k + 6) if trans_a else matrix(m, k, ld=m + 4)
    b, c, d = matrix(k, n, ld=k + 1), matrix(m, n, ld=m + 2), matrix(m, n, ld=m + 5)
    padding = padding_of(d)
    with Gemm(lib, a, b, c, d, trans_a=trans_a) as gemm:
        assert gemm.matmul(alpha=1.0, beta=1.0) == SUCCESS
    expected, magnitude = reference(a, b, c, beta=1.0, trans_a=trans_a)
    assert_close(d, expected, magnitude, k)
    assert torch.equal(padding_of(d), padding)  # rows past m stay as they were


def test_alpha_and_beta_with_c_aliasing_d(lib):
    m, n, k, batch = 4, 6, 5, 2
    a, b = matrix(m, k, batch=batch, stride=0), matrix(k, n, ld=k + 2, batch=batch, stride=0)
    d = matrix(m, n, ld=m + 1, batch=batch)
    before = Matrix(d.storage.clone(), m, n, d.ld, d.batch, d.stride)
    with Gemm(lib, a, b, d, d) as gemm:  # C and D: one buffer, one layout
        assert gemm.matmul(alpha=1.5, beta=-0.75) == SUCCESS
    expected, magnitude = reference(a, b, before, alpha=1.5, beta=-0.75)
    assert_close(d, expected, magnitude, k)


def test_beta_zero_does_not_read_c(lib):
    m, n, k = 3, 4, 2
    a, b = matrix(m, k), matrix(k, n)
    c, d = matrix(m, n, fill=float("nan")), matrix(m, n)
    with Gemm(lib, a, b, c, d) as gemm:
        assert gemm.matmul(alpha=2.0, beta=0.0) == SUCCESS
    expected, magnitude = reference(a, b, c, alpha=2.0)
    assert_close(d, expected, magnitude, k)  # finite: the NaNs in C were not read


@pytest.mark.parametrize(
    "dtype,out_dtype,bias_dtype",
    [
        (torch.float32, torch.float32, None),
        (torch.float16, torch.float16, None),
        (torch.bfloat16, torch.bfloat16, None),
        (torch.float16, torch.float16, torch.float16),  # D's type, said explicitly
        (torch.bfloat16, torch.float32, torch.float32),
    ],
)
def test_bias_epilogue(lib, dtype, out_dtype, bias_dtype):
    m, n, k = 7, 3, 4
    a, b = matrix(m, k, dtype), matrix(k, n, dtype, ld=k + 3)
    c, d = matrix(m, n, out_dtype), matrix(m, n, out_dtype, ld=m + 1)
    bias = torch.randn(m).to(out_dtype).to(DEVICE)  # a bias is in D's type
    with Gemm(lib, a, b, c, d) as gemm:
        gemm.bias(bias, bias_dtype)
        assert gemm.matmul(alpha=1.0, beta=0.5) == SUCCESS
    expected, magnitude = reference(a, b, c, beta=0.5, bias=bias)
    assert_close(d, expected, magnitude, k)
    without, _ = reference(a, b, c, beta=0.5)
    assert not torch.allclose(d.view.double().cpu(), without, atol=1e-2)  # the bias was added


def test_bias_epilogue_with_a_bias_per_batch(lib):
    """A batched matmul whose batches add bias vectors `stride` elements apart (a bias per expert,
    as mirai::bmm_rows adds it to a result stored with the batch inside its rows)."""
    m, n, k, batch, stride = 5, 4, 6, 3, 7
    a, b = matrix(m, k, batch=batch), matrix(k, n, batch=batch)
    c = matrix(m, n, batch=batch)
    d = matrix(m, n, ld=m * batch, batch=batch, stride=m)  # batch inside the rows of one matrix
    bias = torch.randn(batch, stride).to(DEVICE)
    with Gemm(lib, a, b, c, d) as gemm:
        gemm.bias(bias)
        gemm.set_desc(DESC_BIAS_BATCH_STRIDE, ctypes.c_int64, stride)
        assert gemm.matmul() == SUCCESS
    expected, magnitude = reference(a, b, c, bias=bias[:, :m])
    assert_close(d, expected, magnitude, k)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("out", ["same", "float32"])
@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (True, False), (False, True)])
def test_half_precision_inputs_and_outputs(lib, dtype, out, trans_a, trans_b):
    out_dtype = dtype if out == "same" else torch.float32
    m, n, k = 9, 6, 33
    a = matrix(k, m, dtype) if trans_a else matrix(m, k, dtype, ld=m + 3)
    b = matrix(n, k, dtype) if trans_b else matrix(k, n, dtype)
    c, d = matrix(m, n, out_dtype), matrix(m, n, out_dtype)
    with Gemm(lib, a, b, c, d, trans_a=trans_a, trans_b=trans_b) as gemm:
        assert gemm.matmul(alpha=0.25, beta=1.0) == SUCCESS
    expected, magnitude = reference(a, b, c, alpha=0.25, beta=1.0, trans_a=trans_a, trans_b=trans_b)
    assert_close(d, expected, magnitude, k)


def rounding_cases(dtype) -> list[tuple[float, torch.Tensor, torch.Tensor]]:
    """(alpha, x, y) in `dtype`: alpha * (x + y), computed in fp32, is a value whose rounding to
    `dtype` is easy to get wrong: ties to even (normal and subnormal), just above a tie, the overflow
    threshold, infinities, NaN, and random values with bits below `dtype`'s precision."""
    info = torch.finfo(dtype)
    ulp = info.eps  # the spacing of `dtype` just above 1
    sub = info.smallest_normal * info.eps  # the spacing of its subnormals
    top = info.max * info.eps / (2 - info.eps)  # the spacing just below its largest value
    pairs = [
        (1.0, ulp / 2),  # a tie: stays 1 (even)
        (1.0 + ulp, ulp / 2),  # a tie: up to 1 + 2 ulp (even)
        (1.0, ulp / 2 + ulp / 16),  # above the tie: up
        (-(1.0 + ulp), -ulp / 2),
        (1.0, -ulp / 4),  # below 1, where the spacing halves: a tie again, to 1
        (info.smallest_normal, -sub),  # the largest subnormal, exact
        (info.max, top / 4),  # below the overflow threshold: stays the largest value
        (info.max, top / 2),  # at the threshold (ties to even): inf
        (-info.max, -top / 2),
        (info.max, info.max),
        (float("inf"), 1.0),
        (float("nan"), 1.0),
    ]
    x = torch.randn(300) * torch.exp2(torch.randint(-12, 12, (300,)).float())
    y = x * torch.rand(300) * torch.exp2(-torch.randint(1, 14, (300,)).float())
    pairs += list(zip(x.tolist(), y.tolist()))
    # Halved, the odd multiples of the smallest subnormal are ties between two subnormals.
    halves = [(k * sub, 0.0) for k in (1, 3, 5, 7, 1023)]
    column = lambda values: torch.tensor(values, dtype=torch.float32).to(dtype)  # noqa: E731
    return [
        (alpha, column([p[0] for p in group]), column([p[1] for p in group]))
        for alpha, group in ((1.0, pairs), (0.5, halves))
    ]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_stores_round_to_nearest_even(lib, dtype):
    """D = alpha * [x y] @ [1 1]^T: x + y and the scaling by alpha are exact or rounded in fp32, as
    torch does them; D is that rounded to D's type, compared bit for bit with torch's conversion
    (which rounds to nearest even)."""
    for alpha, x, y in rounding_cases(dtype):
        m = x.numel()
        a = Matrix(torch.stack([x, y], dim=1).t().contiguous().flatten().to(DEVICE), m, 2, m)
        b, c, d = matrix(2, 1, dtype, fill=1.0), matrix(m, 1, dtype), matrix(m, 1, dtype)
        with Gemm(lib, a, b, c, d) as gemm:
            assert gemm.matmul(alpha=alpha, beta=0.0) == SUCCESS
        got = d.view.flatten().cpu()
        expected = ((x.float() + y.float()) * alpha).to(dtype)
        assert torch.equal(got.isnan(), expected.isnan())
        keep = ~expected.isnan()
        wrong = (got[keep] != expected[keep]).nonzero().flatten()
        assert wrong.numel() == 0, [(x[i].item(), y[i].item(), got[i].item()) for i in wrong[:5]]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_stand_in_computes_tf32_in_fp32(lib, dtype):
    """CUBLAS_COMPUTE_32F_FAST_TF32 is IEEE fp32 here (a GPU rounds the inputs to TF32)."""
    m, n, k = 4, 4, 64
    a, b, c, d = matrix(m, k, dtype), matrix(k, n, dtype), matrix(m, n), matrix(m, n)
    with Gemm(lib, a, b, c, d, compute=COMPUTE_32F_FAST_TF32) as gemm:
        assert gemm.matmul() == SUCCESS
    expected, magnitude = reference(a, b, c)
    assert_close(d, expected, magnitude, k)


# ---- workspace -----------------------------------------------------------------------------------
def test_heuristic_asks_for_a_workspace_within_the_preference(lib):
    a, b, c, d = matrix(4, 3), matrix(3, 2), matrix(4, 2), matrix(4, 2)
    with Gemm(lib, a, b, c, d) as gemm:
        status, results = gemm.heuristic(requested=4)
        assert status == SUCCESS and len(results) >= 1
        assert all(r.state == SUCCESS and 0 <= r.workspaceSize <= WORKSPACE for r in results)
        gemm.set_pref(PREF_MAX_WORKSPACE_BYTES, ctypes.c_uint64, 100)
        status, results = gemm.heuristic()
        assert status == SUCCESS and results[0].workspaceSize <= 100
        gemm.set_pref(PREF_MIN_ALIGNMENT_A_BYTES, ctypes.c_uint32, 4)  # narrows the search only
        assert gemm.heuristic()[0] == SUCCESS
        status, results = gemm.heuristic(requested=0)
        assert status == INVALID_VALUE and results == []


def test_stand_in_needs_a_workspace(lib):
    a, b, c, d = matrix(4, 3), matrix(3, 2), matrix(4, 2), matrix(4, 2)
    with Gemm(lib, a, b, c, d) as gemm:
        status, results = gemm.heuristic()
        needed = results[0].workspaceSize
        assert status == SUCCESS and 0 < needed <= WORKSPACE
        algo = results[0].algo
        assert gemm.matmul(algo=algo, workspace_size=needed - 1) == INVALID_VALUE
        assert gemm.matmul(algo=algo, workspace_size=needed, null=True) == INVALID_VALUE
        assert gemm.matmul(algo=algo, workspace_size=needed) == SUCCESS
        gemm.set_pref(PREF_MAX_WORKSPACE_BYTES, ctypes.c_uint64, 0)
        status, results = gemm.heuristic()  # no workspace allowed: an algorithm that needs none
        assert status == SUCCESS and results[0].workspaceSize == 0
        assert gemm.matmul(algo=results[0].algo, workspace_size=0) == SUCCESS


def test_stand_in_uses_the_workspace_as_scratch(lib):
    """A workspace that overlaps live data shows in the numbers, as it can on a GPU."""
    a, b, c, d = matrix(4, 3), matrix(3, 2), matrix(4, 2), matrix(4, 2)
    workspace = torch.zeros(WORKSPACE, dtype=torch.uint8)
    with Gemm(lib, a, b, c, d) as gemm:
        assert gemm.matmul(workspace=workspace.data_ptr(), workspace_size=WORKSPACE) == SUCCESS
    assert workspace.any()


def test_stand_in_counts_the_matmuls_it_runs(lib):
    lib.mirai_host_cublaslt_matmuls.restype = ctypes.c_int64
    a, b, c, d = matrix(4, 3), matrix(3, 2), matrix(4, 2), matrix(4, 2)
    before = lib.mirai_host_cublaslt_matmuls()
    with Gemm(lib, a, b, c, d) as gemm:
        assert gemm.matmul() == SUCCESS
        assert gemm.matmul() == SUCCESS
        assert gemm.matmul(workspace_size=0) == INVALID_VALUE  # failed: not counted
    assert lib.mirai_host_cublaslt_matmuls() - before == 2


def test_stand_in_says_what_it_is(lib):
    assert lib.mirai_host_cublaslt_version() == 1
    assert lib.cublasLtGetVersion() == 130000
    said = lib.cublasLtGetStatusString(INVALID_VALUE)  # in cuBLASLt 13.1's words
    assert said == b"an unsupported value or parameter was passed to the function"
    assert (
        lib.cublasLtGetStatusString(NOT_SUPPORTED)
        == b"the requested functionality is not supported"
    )
    assert lib.cublasLtGetStatusString(4) == b"unrecognized status"


# ---- bad input -----------------------------------------------------------------------------------
def both_fail(gemm: Gemm, status: int) -> None:
    """The heuristic refuses the problem, and so does a matmul run without an algorithm."""
    found, results = gemm.heuristic()
    assert (found, results) == (status, [])
    assert gemm.matmul(algo=False, workspace_size=WORKSPACE) == status


def test_leading_dimension_below_rows(lib):
    a, b, c, d = matrix(4, 3), matrix(3, 2), matrix(4, 2), matrix(4, 2)
    with Gemm(lib, a, b, c, d) as gemm:
        gemm.set_layout(gemm.layouts[0], LAYOUT_LD, ctypes.c_int64, 3)
        both_fail(gemm, INVALID_VALUE)


def test_mismatched_inner_dimension(lib):
    a, b, c, d = matrix(4, 3), matrix(5, 2), matrix(4, 2), matrix(4, 2)
    with Gemm(lib, a, b, c, d) as gemm:
        both_fail(gemm, INVALID_VALUE)


def test_c_and_d_of_different_shapes(lib):
    a, b, c, d = matrix(4, 3), matrix(3, 2), matrix(4, 3), matrix(4, 2)
    with Gemm(lib, a, b, c, d) as gemm:
        both_fail(gemm, INVALID_VALUE)


def test_mismatched_batch_counts(lib):
    a, b = matrix(4, 3, batch=2), matrix(3, 2, batch=3)
    c, d = matrix(4, 2, batch=2), matrix(4, 2, batch=2)
    with Gemm(lib, a, b, c, d) as gemm:
        both_fail(gemm, INVALID_VALUE)


def test_stand_in_refuses_row_major_order(lib):
    a, b, c, d = matrix(4, 3), matrix(3, 2), matrix(4, 2), matrix(4, 2)
    with Gemm(lib, a, b, c, d) as gemm:
        gemm.set_layout(gemm.layouts[1], LAYOUT_ORDER, ctypes.c_int32, ORDER_ROW)
        both_fail(gemm, NOT_SUPPORTED)


def test_stand_in_refuses_modes_it_does_not_implement(lib):
    """cuBLASLt has these; the stand-in says it has not, rather than computing something else."""
    a, b, c, d = matrix(4, 3), matrix(3, 2), matrix(4, 2), matrix(4, 2)
    with Gemm(lib, a, b, c, d) as gemm:
        gemm.set_desc(DESC_EPILOGUE, ctypes.c_uint32, EPILOGUE_RELU)
        both_fail(gemm, NOT_SUPPORTED)
    with Gemm(lib, a, b, c, d) as gemm:
        gemm.set_desc(DESC_POINTER_MODE, ctypes.c_int32, POINTER_MODE_DEVICE)
        both_fail(gemm, NOT_SUPPORTED)


def typed(a, b, c, d=None):
    """Matrices for a 4 x 2 x 3 problem in these types."""
    return matrix(4, 3, a), matrix(3, 2, b), matrix(4, 2, c), matrix(4, 2, d or c)


@pytest.mark.parametrize(
    "operands,compute,status",
    [
        (typed(torch.float32, torch.float32, torch.float32), COMPUTE_64F, NOT_SUPPORTED),
        (typed(torch.float16, torch.float16, torch.bfloat16), COMPUTE_32F, NOT_SUPPORTED),
        (typed(torch.float32, torch.float32, torch.float16), COMPUTE_32F, NOT_SUPPORTED),
        (typed(torch.float16, torch.float32, torch.float32), COMPUTE_32F, INVALID_VALUE),
        (
            typed(torch.float16, torch.float16, torch.float32, torch.float16),
            COMPUTE_32F,
            INVALID_VALUE,
        ),
    ],
    ids=[
        "fp64-compute",
        "fp16-in-bf16-out",
        "fp32-in-fp16-out",
        "A-and-B-differ",
        "C-and-D-differ",
    ],
)
def test_unsupported_types(lib, operands, compute, status):
    with Gemm(lib, *operands, compute=compute) as gemm:
        both_fail(gemm, status)


@pytest.mark.parametrize(
    "dtype,out_dtype,bias_dtype",
    [
        (torch.float16, torch.float16, torch.float32),
        (torch.bfloat16, torch.bfloat16, torch.float32),
        (torch.float16, torch.float32, torch.float16),
    ],
)
def test_bias_not_in_the_output_type(lib, dtype, out_dtype, bias_dtype):
    with Gemm(lib, *typed(dtype, dtype, out_dtype)) as gemm:
        gemm.bias(torch.zeros(4, dtype=bias_dtype, device=DEVICE), bias_dtype)
        both_fail(gemm, INVALID_VALUE)


def test_attribute_of_the_wrong_size(lib):
    a, b, c, d = matrix(4, 3), matrix(3, 2), matrix(4, 2), matrix(4, 2)
    with Gemm(lib, a, b, c, d) as gemm:
        gemm.set_desc(DESC_TRANSA, ctypes.c_int64, OP_T, expect=INVALID_VALUE)
        gemm.set_layout(gemm.layouts[0], LAYOUT_LD, ctypes.c_int32, 4, expect=INVALID_VALUE)
        gemm.set_pref(PREF_MAX_WORKSPACE_BYTES, ctypes.c_uint32, 4, expect=INVALID_VALUE)
        assert gemm.matmul() == SUCCESS  # nothing was changed by the refused attributes


@pytest.mark.parametrize("beta", [1.0, 0.0])
def test_in_place_with_different_layouts(lib, beta):
    a, b = matrix(4, 3), matrix(3, 2)
    d = matrix(4, 2, ld=6)
    with Gemm(lib, a, b, Matrix(d.storage, 4, 2, 5), d) as gemm:  # C == D, ldc != ldd
        assert gemm.matmul(beta=beta) == INVALID_VALUE


@pytest.mark.parametrize("which", ["A", "B", "C", "D"])
def test_pointers_less_aligned_than_the_preference_promised(lib, which):
    """fp16 operands 2 bytes past an aligned address: refused under the default preference (256
    bytes), computed once the preference says so; C only counts when it is read. (cuBLASLt refuses
    these on an H200; for a problem so small or so laid out that it picks an algorithm without
    vector loads, it may not: the stand-in always holds the caller to the preference.)"""
    m, n, k = 64, 48, 32
    shapes = {"A": (m, k), "B": (k, n), "C": (m, n), "D": (m, n)}
    operands = {}
    for name, (rows, cols) in shapes.items():
        operand = matrix(rows, cols, torch.float16, ld=rows + 1)
        if name == which:
            operand = Matrix(operand.storage[1:], rows, cols, rows)
        else:
            operand = Matrix(operand.storage[: rows * cols], rows, cols, rows)
        operands[name] = operand
    with Gemm(lib, *operands.values()) as gemm:
        assert gemm.matmul(beta=1.0) == NOT_SUPPORTED
        if which == "C":
            assert gemm.matmul(beta=0.0) == SUCCESS
        gemm.set_pref(PREF_MIN_ALIGNMENT_A_BYTES + "ABCD".index(which), ctypes.c_uint32, 2)
        assert gemm.matmul(beta=1.0) == SUCCESS
    expected, magnitude = reference(operands["A"], operands["B"], operands["C"], beta=1.0)
    assert_close(operands["D"], expected, magnitude, k)


def test_bias_without_a_pointer(lib):
    a, b, c, d = matrix(4, 3), matrix(3, 2), matrix(4, 2), matrix(4, 2)
    with Gemm(lib, a, b, c, d) as gemm:
        gemm.set_desc(DESC_EPILOGUE, ctypes.c_uint32, EPILOGUE_BIAS)
        assert gemm.matmul() == INVALID_VALUE


def test_no_handle(lib):
    a, b, c, d = matrix(4, 3), matrix(3, 2), matrix(4, 2), matrix(4, 2)
    with Gemm(lib, a, b, c, d) as gemm:
        results, count = (HeuristicResult * 1)(), ctypes.c_int(-1)
        status = lib.cublasLtMatmulAlgoGetHeuristic(
            None, gemm.desc, *gemm.layouts, gemm.pref, 1, results, ctypes.byref(count)
        )
        assert status == NOT_INITIALIZED and count.value <= 0
        assert lib.cublasLtDestroy(None) == INVALID_VALUE


# ---- the CPU driver's process --------------------------------------------------------------------
HOST_PROCESS = """
import ctypes, json, os, torch
from mirai.export.hostdriver import driver
from tests.export import test_hostdriver_gemm as t

host = driver.get()
lib = t._declare(ctypes.CDLL("libcublasLt.so.13"))  # by soname, as the generated runtime opens it
a, b, c, d = t.matrix(5, 4), t.matrix(4, 3), t.matrix(5, 3), t.matrix(5, 3)
before = host.gemms()
with t.Gemm(lib, a, b, c, d) as gemm:
    status = gemm.matmul(alpha=2.0, beta=0.0)
expected, magnitude = t.reference(a, b, c, alpha=2.0)
t.assert_close(d, expected, magnitude, 4)
print(json.dumps({
    "status": status,
    "gemms": host.gemms() - before,
    "stand_in": hasattr(lib, "mirai_host_cublaslt_version"),
    "env": os.environ["MIRAI_CUBLASLT"] == str(driver.build_cublaslt()),
}))
"""


def test_stand_in_is_what_the_cpu_driver_process_opens():
    answer = interpreted(HOST_PROCESS, timeout=300, drop=("MIRAI_CUBLASLT",))
    assert answer == {"status": SUCCESS, "gemms": 1, "stand_in": True, "env": True}
