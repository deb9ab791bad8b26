// A CPU stand-in for cuBLASLt (libcublasLt.so.13), for running the GEMMs of mirai's generated launch
// code on a machine without a GPU. It has the soname libcublasLt.so.13: loaded into the CPU driver's
// process (mirai.export.hostdriver.driver), it is what the generated runtime's
// dlopen("libcublasLt.so.13") finds, as native/libcuda_host.cc is for libcuda.so.1.
//
// It is a reference GEMM, not a mock: the subset of the C API the launch code uses, with the real
// signatures, enum values and statuses, and cuBLASLt's semantics, column-major:
//   D = alpha * op(A) @ op(B) + beta * C  (+ bias[i] on row i with CUBLASLT_EPILOGUE_BIAS)
// per batch, with each operand's leading dimension and strided batch offset. "Device" memory is host
// memory and every stream is synchronous, as in the driver stand-in. Products are accumulated in IEEE
// fp32 for both compute types the launch code uses (32F and 32F_FAST_TF32); fp16/bf16 values are
// widened exactly and rounded to nearest even on store. Anything outside that subset (another order,
// compute type, epilogue, attribute) is CUBLAS_STATUS_NOT_SUPPORTED rather than a silent answer.
//
// Where cuBLASLt 13.1 was measured (on an H200), the statuses are its statuses: dimensions, leading
// dimensions, batch counts, in-place layouts, type pairs and bias types are checked as it checks them.
//
// The heuristic offers one algorithm that needs a small workspace (never more than the preference
// allows), and a matmul given less than its algorithm needs fails as cuBLASLt does, so the caller's
// workspace handling runs on the CPU too. The workspace is scratch: the matmul overwrites it (with
// NaN bytes) before it reads its inputs, so a workspace that overlaps live data shows in the numbers.
// The algorithm also holds the caller to the alignment the preference promised (default 256 bytes,
// up to the 16 that vector loads need), for every type and shape. cuBLASLt refuses a matmul on fp16
// pointers only 2 or 8 bytes aligned under the default preference with CUBLAS_STATUS_NOT_SUPPORTED
// whenever the algorithm it picked relies on vector loads (not for every shape, nor for fp32 with
// CUBLAS_COMPUTE_32F on an H200): here the caller that breaks the promise fails every time.
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <vector>

namespace {

typedef int Status;  // cublasStatus_t
constexpr Status kSuccess = 0;
constexpr Status kNotInitialized = 1;
constexpr Status kAllocFailed = 3;
constexpr Status kInvalidValue = 7;
constexpr Status kExecutionFailed = 13;
constexpr Status kNotSupported = 15;

// cudaDataType_t
constexpr int32_t kR32F = 0;
constexpr int32_t kR16F = 2;
constexpr int32_t kR16BF = 14;
constexpr int32_t kUnsetType = -1;  // CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE's default: D's type
// cublasComputeType_t
constexpr int32_t kCompute32F = 68;
constexpr int32_t kCompute32FFastTF32 = 77;
// cublasOperation_t: for real types CUBLAS_OP_C is CUBLAS_OP_T
constexpr int32_t kOpN = 0;
constexpr int32_t kOpT = 1;
constexpr int32_t kOpC = 2;
constexpr int32_t kPointerModeHost = 0;  // cublasLtPointerMode_t
constexpr uint32_t kEpilogueDefault = 1;  // cublasLtEpilogue_t
constexpr uint32_t kEpilogueBias = 4;
constexpr int32_t kOrderCol = 0;  // cublasLtOrder_t

// cublasLtMatmulDescAttributes_t
constexpr int kDescComputeType = 0;
constexpr int kDescScaleType = 1;
constexpr int kDescPointerMode = 2;
constexpr int kDescTransA = 3;
constexpr int kDescTransB = 4;
constexpr int kDescEpilogue = 7;
constexpr int kDescBiasPointer = 8;
constexpr int kDescBiasBatchStride = 10;
constexpr int kDescBiasDataType = 26;
// cublasLtMatrixLayoutAttribute_t
constexpr int kLayoutType = 0;
constexpr int kLayoutOrder = 1;
constexpr int kLayoutRows = 2;
constexpr int kLayoutCols = 3;
constexpr int kLayoutLd = 4;
constexpr int kLayoutBatchCount = 5;
constexpr int kLayoutBatchOffset = 6;
// cublasLtMatmulPreferenceAttributes_t
constexpr int kPrefSearchMode = 0;
constexpr int kPrefMaxWorkspace = 1;
constexpr int kPrefReductionSchemeMask = 3;
constexpr int kPrefMinAlignmentA = 5;  // then B = 6, C = 7, D = 8
constexpr int kPrefMinAlignmentD = 8;
constexpr int kPrefMaxWavesCount = 9;
constexpr int kPrefImplMask = 12;

constexpr uint64_t kAlgoTag = 0x6d6972616967656dULL;  // marks the algorithms this library hands out
constexpr uint64_t kWorkspaceBytes = 1024;            // what the one algorithm asks for
constexpr uint32_t kDefaultAlignment = 256;           // CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*'s default
constexpr uint32_t kVectorAlignment = 16;             // the most an algorithm relies on

struct Handle {
  static constexpr uint32_t kMagic = 0x4c74486e;
  uint32_t magic = kMagic;
};

struct MatmulDesc {
  static constexpr uint32_t kMagic = 0x4c74446d;
  uint32_t magic = kMagic;
  int32_t compute_type = 0;
  int32_t scale_type = 0;
  int32_t pointer_mode = kPointerModeHost;
  int32_t trans_a = kOpN;
  int32_t trans_b = kOpN;
  uint32_t epilogue = kEpilogueDefault;
  const void* bias = nullptr;
  int64_t bias_batch_stride = 0;  // in elements, between the bias vectors of consecutive batches
  int32_t bias_type = kUnsetType;
};

struct Layout {
  static constexpr uint32_t kMagic = 0x4c744c79;
  uint32_t magic = kMagic;
  uint32_t type = 0;
  int32_t order = kOrderCol;
  uint64_t rows = 0;
  uint64_t cols = 0;
  int64_t ld = 0;
  int32_t batch_count = 1;
  int64_t batch_offset = 0;  // in elements
};

struct Preference {
  static constexpr uint32_t kMagic = 0x4c745072;
  uint32_t magic = kMagic;
  uint64_t max_workspace = 0;  // cuBLASLt's default: no workspace
  uint32_t min_alignment[4] = {kDefaultAlignment, kDefaultAlignment, kDefaultAlignment,
                               kDefaultAlignment};  // of A, B, C, D in bytes
};

// data[0]: kAlgoTag; data[1]: the workspace it needs; data[2..5]: the alignment it relies on for
// A, B, C, D.
struct Algo {
  uint64_t data[8];
};

struct HeuristicResult {
  Algo algo;
  size_t workspaceSize;
  Status state;
  float wavesCount;
  int reserved[4];
};

std::atomic<int64_t> g_matmuls{0};
std::atomic<bool> g_dry{false};  // check and count matmuls, compute nothing

template <class T>
bool Live(const T* object) {
  return object != nullptr && object->magic == T::kMagic;
}

template <class T>
Status Create(T** out) {
  if (out == nullptr) return kInvalidValue;
  *out = new (std::nothrow) T();
  return *out == nullptr ? kAllocFailed : kSuccess;
}

template <class T>
Status Destroy(T* object) {
  if (object == nullptr) return kSuccess;
  if (!Live(object)) return kInvalidValue;
  object->magic = 0;
  delete object;
  return kSuccess;
}

// An attribute value: exactly its own size, as cuBLASLt requires.
template <class T>
Status Read(const void* buf, size_t size, T* out) {
  if (buf == nullptr || size != sizeof(T)) return kInvalidValue;
  std::memcpy(out, buf, sizeof(T));
  return kSuccess;
}

// ---- numbers -------------------------------------------------------------------------------------
uint32_t Bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

float FromBits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exponent = (h >> 10) & 0x1f;
  const uint32_t mantissa = h & 0x3ff;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, exact in fp32
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign != 0 ? -magnitude : magnitude;
  }
  if (exponent == 31) return FromBits(sign | 0x7f800000 | (mantissa << 13));  // inf, NaN
  return FromBits(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

uint16_t FloatToHalf(float value) {
  const uint32_t bits = Bits(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  const uint32_t magnitude = bits & 0x7fffffff;
  if (magnitude > 0x7f800000) return sign | 0x7e00 | ((magnitude >> 13) & 0x3ff);  // NaN stays NaN
  if (magnitude >= 0x477ff000) return sign | 0x7c00;  // >= 65520 (half-way past 65504): inf
  if (magnitude < 0x38800000) {
    // Below 2^-14, the half is subnormal: round(|value| * 2^24), scaled exactly, in the default
    // (nearest-even) rounding mode; 1024 is the smallest normal half, which has that encoding too.
    const float scaled = FromBits(magnitude) * 16777216.0f;
    return sign | static_cast<uint16_t>(std::nearbyint(scaled));
  }
  uint32_t half = (magnitude - 0x38000000) >> 13;  // rebias the exponent, keep 10 mantissa bits
  const uint32_t rest = magnitude & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (half & 1) != 0)) ++half;  // a carry may raise the exponent
  return sign | static_cast<uint16_t>(half);
}

float Bfloat16ToFloat(uint16_t b) { return FromBits(static_cast<uint32_t>(b) << 16); }

uint16_t FloatToBfloat16(float value) {
  const uint32_t bits = Bits(value);
  if ((bits & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((bits >> 16) | 0x40);
  return static_cast<uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
}

size_t ElementSize(int32_t type) { return type == kR32F ? 4 : 2; }

float Load(int32_t type, const void* base, int64_t index) {
  if (type == kR32F) return static_cast<const float*>(base)[index];
  const uint16_t raw = static_cast<const uint16_t*>(base)[index];
  return type == kR16F ? HalfToFloat(raw) : Bfloat16ToFloat(raw);
}

void Store(int32_t type, void* base, int64_t index, float value) {
  if (type == kR32F) {
    static_cast<float*>(base)[index] = value;
  } else {
    static_cast<uint16_t*>(base)[index] =
        type == kR16F ? FloatToHalf(value) : FloatToBfloat16(value);
  }
}

bool KnownType(int32_t type) { return type == kR32F || type == kR16F || type == kR16BF; }

// ---- validation ----------------------------------------------------------------------------------
// The checked shape of one matmul: op(A) is m x k, op(B) k x n, C and D m x n.
struct Problem {
  uint64_t m = 0;
  uint64_t n = 0;
  uint64_t k = 0;
  bool trans_a = false;
  bool trans_b = false;
  bool bias = false;
  int64_t bias_batch_stride = 0;
  int32_t bias_type = kUnsetType;
};

// A column-major layout the reference can address: every element offset fits in int64.
Status CheckLayout(const Layout* layout) {
  if (!Live(layout)) return kInvalidValue;
  if (layout->order != kOrderCol) return kNotSupported;
  if (!KnownType(static_cast<int32_t>(layout->type))) return kNotSupported;
  const uint64_t min_ld = layout->rows > 1 ? layout->rows : 1;
  if (layout->ld < 0 || static_cast<uint64_t>(layout->ld) < min_ld) return kInvalidValue;
  if (layout->batch_count < 1) return kInvalidValue;
  // The last element of the last batch, |offset| * (batch - 1) + ld * cols, must fit in int64.
  __int128 extent = static_cast<__int128>(layout->ld) * layout->cols;
  const __int128 offset = layout->batch_offset < 0 ? -static_cast<__int128>(layout->batch_offset)
                                                   : static_cast<__int128>(layout->batch_offset);
  extent += offset * (layout->batch_count - 1);
  if (layout->rows > static_cast<uint64_t>(INT64_MAX) || extent > INT64_MAX) return kInvalidValue;
  return kSuccess;
}

Status CheckProblem(const MatmulDesc* desc, const Layout* a, const Layout* b, const Layout* c,
                    const Layout* d, Problem* problem) {
  if (!Live(desc)) return kInvalidValue;
  for (const Layout* layout : {a, b, c, d}) {
    const Status status = CheckLayout(layout);
    if (status != kSuccess) return status;
  }
  for (int32_t trans : {desc->trans_a, desc->trans_b}) {
    if (trans != kOpN && trans != kOpT && trans != kOpC) return kInvalidValue;
  }
  if (desc->compute_type != kCompute32F && desc->compute_type != kCompute32FFastTF32) {
    return kNotSupported;
  }
  if (desc->scale_type != kR32F || desc->pointer_mode != kPointerModeHost) return kNotSupported;
  if (desc->epilogue != kEpilogueDefault && desc->epilogue != kEpilogueBias) return kNotSupported;
  // The type combinations cuBLASLt takes for these compute types: A and B alike, C and D alike
  // (else INVALID_VALUE), D in A's type or fp32 (else NOT_SUPPORTED).
  const int32_t ab = static_cast<int32_t>(a->type);
  const int32_t cd = static_cast<int32_t>(d->type);
  if (b->type != a->type || c->type != d->type) return kInvalidValue;
  if (cd != ab && cd != kR32F) return kNotSupported;

  problem->trans_a = desc->trans_a != kOpN;
  problem->trans_b = desc->trans_b != kOpN;
  problem->m = d->rows;
  problem->n = d->cols;
  problem->k = problem->trans_a ? a->rows : a->cols;
  const uint64_t a_m = problem->trans_a ? a->cols : a->rows;
  const uint64_t b_k = problem->trans_b ? b->cols : b->rows;
  const uint64_t b_n = problem->trans_b ? b->rows : b->cols;
  if (a_m != problem->m || b_k != problem->k || b_n != problem->n) return kInvalidValue;
  if (c->rows != d->rows || c->cols != d->cols) return kInvalidValue;
  const int32_t batch = d->batch_count;
  if (a->batch_count != batch || b->batch_count != batch || c->batch_count != batch) {
    return kInvalidValue;
  }
  problem->bias = desc->epilogue == kEpilogueBias;
  if (problem->bias) {
    // In D's type only: cuBLASLt refuses an fp32 bias for a 16-bit D and a 16-bit one for fp32.
    problem->bias_type = desc->bias_type == kUnsetType ? cd : desc->bias_type;
    if (problem->bias_type != cd) return kInvalidValue;
    problem->bias_batch_stride = desc->bias_batch_stride;
  }
  return kSuccess;
}

// ---- the reference GEMM --------------------------------------------------------------------------
const char* At(const void* base, const Layout* layout, int64_t batch) {
  if (base == nullptr) return nullptr;  // an operand that is not read (k == 0, beta == 0)
  return static_cast<const char*>(base) +
         batch * layout->batch_offset * static_cast<int64_t>(ElementSize(layout->type));
}

// op(X) for one batch, widened to fp32, as `outer` rows of `inner` contiguous values:
// row r, column p of the result is op(X)(r, p) when `rows_first`, else op(X)(p, r).
void Widen(const Layout* layout, const char* base, bool trans, bool rows_first, uint64_t outer,
           uint64_t inner, std::vector<float>* out) {
  const int32_t type = static_cast<int32_t>(layout->type);
  out->resize(outer * inner);
  for (uint64_t r = 0; r < outer; ++r) {
    for (uint64_t p = 0; p < inner; ++p) {
      // The logical element (i, j) of op(X); X itself holds it at (i, j), or (j, i) if transposed.
      const uint64_t i = rows_first ? r : p;
      const uint64_t j = rows_first ? p : r;
      const uint64_t row = trans ? j : i;
      const uint64_t col = trans ? i : j;
      (*out)[r * inner + p] = Load(type, base, static_cast<int64_t>(row + col * layout->ld));
    }
  }
}

void Run(const Problem& problem, float alpha, float beta, const void* bias, const void* a,
         const Layout* a_layout, const void* b, const Layout* b_layout, const void* c,
         const Layout* c_layout, void* d, const Layout* d_layout) {
  const uint64_t m = problem.m, n = problem.n, k = problem.k;
  const int32_t c_type = static_cast<int32_t>(c_layout->type);
  const int32_t d_type = static_cast<int32_t>(d_layout->type);
  std::vector<float> op_a;   // m rows of k: op(A)(i, p)
  std::vector<float> op_bt;  // n rows of k: op(B)(p, j)
  std::vector<float> out(m * n);
  for (int64_t batch = 0; batch < d_layout->batch_count; ++batch) {
    Widen(a_layout, At(a, a_layout, batch), problem.trans_a, true, m, k, &op_a);
    Widen(b_layout, At(b, b_layout, batch), problem.trans_b, false, n, k, &op_bt);
    const char* c_base = beta != 0.0f ? At(c, c_layout, batch) : nullptr;
    for (uint64_t j = 0; j < n; ++j) {
      for (uint64_t i = 0; i < m; ++i) {
        const float* row = op_a.data() + i * k;
        const float* col = op_bt.data() + j * k;
        float sum = 0.0f;
        for (uint64_t p = 0; p < k; ++p) sum += row[p] * col[p];
        float value = alpha * sum;
        // beta == 0: C is not read, so NaN or garbage there does not reach D.
        if (c_base != nullptr) {
          value += beta * Load(c_type, c_base, static_cast<int64_t>(i + j * c_layout->ld));
        }
        if (problem.bias) {
          value += Load(problem.bias_type, bias, batch * problem.bias_batch_stride + static_cast<int64_t>(i));
        }
        out[i + j * m] = value;
      }
    }
    // Stored once the batch is computed, so every value is computed from the inputs as they were,
    // even where D overlaps them other than as C itself (which cuBLASLt leaves undefined).
    char* d_base = const_cast<char*>(At(d, d_layout, batch));
    for (uint64_t j = 0; j < n; ++j) {
      for (uint64_t i = 0; i < m; ++i) {
        Store(d_type, d_base, static_cast<int64_t>(i + j * d_layout->ld), out[i + j * m]);
      }
    }
  }
}

bool SameLayout(const Layout* x, const Layout* y) {
  return x->type == y->type && x->rows == y->rows && x->cols == y->cols && x->ld == y->ld &&
         x->batch_count == y->batch_count && x->batch_offset == y->batch_offset;
}

}  // namespace

extern "C" {

// ---- the host side's interface -------------------------------------------------------------------
int mirai_host_cublaslt_version() { return 1; }

int64_t mirai_host_cublaslt_matmuls() { return g_matmuls.load(); }

void mirai_host_cublaslt_set_dry(int on) { g_dry.store(on != 0); }

// ---- the cuBLASLt API the generated runtime loads ------------------------------------------------
size_t cublasLtGetVersion() { return 130000; }

// cuBLASLt 13.1's own words.
const char* cublasLtGetStatusString(Status status) {
  switch (status) {
    case 0: return "success";
    case 1: return "the library was not initialized";
    case 3: return "the resource allocation failed";
    case 7: return "an unsupported value or parameter was passed to the function";
    case 8: return "the function requires an architectural feature absent from the device";
    case 11: return "an access to GPU memory space failed";
    case 13: return "the function failed to launch on the GPU";
    case 14: return "an internal operation failed";
    case 15: return "the requested functionality is not supported";
    case 16: return "the license check failed";
    default: return "unrecognized status";
  }
}

Status cublasLtCreate(Handle** handle) { return Create(handle); }

Status cublasLtDestroy(Handle* handle) {
  if (handle == nullptr) return kInvalidValue;
  if (!Live(handle)) return kNotInitialized;
  return Destroy(handle);
}

Status cublasLtMatmulDescCreate(MatmulDesc** desc, int32_t compute_type, int32_t scale_type) {
  const Status status = Create(desc);
  if (status == kSuccess) {
    (*desc)->compute_type = compute_type;
    (*desc)->scale_type = scale_type;
  }
  return status;
}

Status cublasLtMatmulDescDestroy(MatmulDesc* desc) { return Destroy(desc); }

Status cublasLtMatmulDescSetAttribute(MatmulDesc* desc, int attr, const void* buf, size_t size) {
  if (!Live(desc)) return kInvalidValue;
  switch (attr) {
    case kDescComputeType: return Read(buf, size, &desc->compute_type);
    case kDescScaleType: return Read(buf, size, &desc->scale_type);
    case kDescPointerMode: return Read(buf, size, &desc->pointer_mode);
    case kDescTransA: return Read(buf, size, &desc->trans_a);
    case kDescTransB: return Read(buf, size, &desc->trans_b);
    case kDescEpilogue: return Read(buf, size, &desc->epilogue);
    case kDescBiasPointer: return Read(buf, size, &desc->bias);
    case kDescBiasBatchStride: return Read(buf, size, &desc->bias_batch_stride);
    case kDescBiasDataType: return Read(buf, size, &desc->bias_type);
    default: return kNotSupported;  // real attributes this stand-in does not implement included
  }
}

Status cublasLtMatrixLayoutCreate(Layout** layout, int32_t type, uint64_t rows, uint64_t cols,
                                  int64_t ld) {
  const Status status = Create(layout);
  if (status == kSuccess) {
    (*layout)->type = static_cast<uint32_t>(type);
    (*layout)->rows = rows;
    (*layout)->cols = cols;
    (*layout)->ld = ld;
  }
  return status;
}

Status cublasLtMatrixLayoutDestroy(Layout* layout) { return Destroy(layout); }

Status cublasLtMatrixLayoutSetAttribute(Layout* layout, int attr, const void* buf, size_t size) {
  if (!Live(layout)) return kInvalidValue;
  switch (attr) {
    case kLayoutType: return Read(buf, size, &layout->type);
    case kLayoutOrder: return Read(buf, size, &layout->order);
    case kLayoutRows: return Read(buf, size, &layout->rows);
    case kLayoutCols: return Read(buf, size, &layout->cols);
    case kLayoutLd: return Read(buf, size, &layout->ld);
    case kLayoutBatchCount: return Read(buf, size, &layout->batch_count);
    case kLayoutBatchOffset: return Read(buf, size, &layout->batch_offset);
    default: return kNotSupported;
  }
}

Status cublasLtMatmulPreferenceCreate(Preference** pref) { return Create(pref); }

Status cublasLtMatmulPreferenceDestroy(Preference* pref) { return Destroy(pref); }

Status cublasLtMatmulPreferenceSetAttribute(Preference* pref, int attr, const void* buf,
                                            size_t size) {
  if (!Live(pref)) return kInvalidValue;
  // The other attributes only narrow the search; the one algorithm here meets any value of them
  // (no reduction scheme, no waves, one implementation), so they are checked for size only.
  uint32_t u32;
  uint64_t u64;
  float f32;
  switch (attr) {
    case kPrefMaxWorkspace: return Read(buf, size, &pref->max_workspace);
    case kPrefSearchMode:
    case kPrefReductionSchemeMask: return Read(buf, size, &u32);
    case kPrefImplMask: return Read(buf, size, &u64);
    case kPrefMaxWavesCount: return Read(buf, size, &f32);
    default:
      if (attr >= kPrefMinAlignmentA && attr <= kPrefMinAlignmentD) {
        return Read(buf, size, &pref->min_alignment[attr - kPrefMinAlignmentA]);
      }
      return kNotSupported;
  }
}

Status cublasLtMatmulAlgoGetHeuristic(Handle* handle, MatmulDesc* desc, Layout* a, Layout* b,
                                      Layout* c, Layout* d, Preference* pref, int requested,
                                      HeuristicResult* results, int* returned) {
  if (returned == nullptr) return kInvalidValue;
  *returned = 0;
  if (!Live(handle)) return kNotInitialized;
  if (requested <= 0 || results == nullptr || !Live(pref)) return kInvalidValue;
  Problem problem;
  const Status status = CheckProblem(desc, a, b, c, d, &problem);
  if (status != kSuccess) return status;
  const uint64_t workspace =
      pref->max_workspace < kWorkspaceBytes ? pref->max_workspace : kWorkspaceBytes;
  std::memset(&results[0], 0, sizeof(HeuristicResult));
  results[0].algo.data[0] = kAlgoTag;
  results[0].algo.data[1] = workspace;
  for (int i = 0; i < 4; ++i) {
    const uint32_t promised = pref->min_alignment[i];
    results[0].algo.data[2 + i] = promised < kVectorAlignment ? promised : kVectorAlignment;
  }
  results[0].workspaceSize = workspace;
  results[0].state = kSuccess;
  results[0].wavesCount = 1.0f;
  *returned = 1;
  return kSuccess;
}

Status cublasLtMatmul(Handle* handle, MatmulDesc* desc, const void* alpha, const void* a,
                      Layout* a_layout, const void* b, Layout* b_layout, const void* beta,
                      const void* c, Layout* c_layout, void* d, Layout* d_layout, const Algo* algo,
                      void* workspace, size_t workspace_bytes, void* stream) {
  (void)stream;  // every stream is synchronous here
  if (!Live(handle)) return kNotInitialized;
  Problem problem;
  Status status = CheckProblem(desc, a_layout, b_layout, c_layout, d_layout, &problem);
  if (status != kSuccess) return status;
  if (alpha == nullptr || beta == nullptr) return kInvalidValue;
  float alpha_value, beta_value;
  std::memcpy(&alpha_value, alpha, sizeof alpha_value);
  std::memcpy(&beta_value, beta, sizeof beta_value);
  const bool some_output = problem.m != 0 && problem.n != 0;
  if (some_output && d == nullptr) return kInvalidValue;
  if (some_output && problem.k != 0 && (a == nullptr || b == nullptr)) return kInvalidValue;
  if (some_output && beta_value != 0.0f && c == nullptr) return kInvalidValue;
  if (some_output && problem.bias && desc->bias == nullptr) return kInvalidValue;
  // In place (C == D) only with one layout for both, as cuBLASLt requires (whatever beta is).
  if (c == d && !SameLayout(c_layout, d_layout)) return kInvalidValue;
  // Without an algorithm cuBLASLt runs its own heuristic, within the workspace it is given and for
  // the pointers it is given.
  uint64_t needed = workspace_bytes < kWorkspaceBytes ? workspace_bytes : kWorkspaceBytes;
  if (algo != nullptr) {
    if (algo->data[0] != kAlgoTag) return kInvalidValue;
    needed = algo->data[1];
    const void* operands[4] = {a, b, beta_value != 0.0f ? c : nullptr, d};
    for (int i = 0; i < 4; ++i) {
      const uint64_t alignment = algo->data[2 + i];
      if (alignment > 1 && reinterpret_cast<uintptr_t>(operands[i]) % alignment != 0) {
        return kNotSupported;
      }
    }
  }
  if (workspace_bytes < needed || (workspace == nullptr && workspace_bytes != 0)) {
    return kInvalidValue;
  }
  if (g_dry.load()) {  // every check above made, nothing computed
    ++g_matmuls;
    return kSuccess;
  }
  if (needed != 0) std::memset(workspace, 0xff, needed);
  try {
    if (some_output) {
      Run(problem, alpha_value, beta_value, desc->bias, a, a_layout, b, b_layout, c, c_layout, d,
          d_layout);
    }
  } catch (const std::bad_alloc&) {
    return kAllocFailed;
  } catch (...) {
    return kExecutionFailed;
  }
  ++g_matmuls;
  return kSuccess;
}

}  // extern "C"
