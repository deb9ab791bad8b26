// host_time: the host time per call of a generated op, measured in C++ through the op's C interface
// (<Op>_capi.so), with no Python in the loop, against the launch floor of the same GPU.
//
//   host_time --lib DIR/PffnFwd_capi.so --op PffnFwd
//             --inputs "float32:8,8,256;float32:8,256,1024;..." --outputs "float32:3;float32:1;..."
//             [--calls 2000] [--warmup 50] [--sync-calls 300] [--chunk N] [--floor 20000]
//             [--alloc arena|async] [--json FILE] [--label TEXT]
//
// bench/bench_host_time.py builds the C interface and this file, reads the shapes from the build's
// manifest and runs it. What it does, like a framework that calls the op:
//
// - opens the CUDA driver (libcuda.so.1) at run time, as the generated runtime does, so it builds
//   with g++ alone: the few driver functions it calls are declared here;
// - makes the device's primary context current (as PyTorch and TensorFlow use it), creates a
//   non-blocking stream, allocates the inputs (filled with small pseudo-random values; integers and
//   booleans 0, a valid index) and the outputs (filled with NaN bytes) with cuMemAlloc;
// - binds the input shapes once (mirai_<op>_bind), warms up, then times `calls` calls of
//   mirai_<op>_run on the host: steady_clock around a loop of `chunk` calls with no synchronization
//   inside, then one stream synchronization outside the timed part, until `calls` calls ran (the
//   chunks keep the launch queue from filling up, which would make the host wait for the GPU); and
//   the time per call with a synchronization after every call;
// - gives the op temporaries the way a framework's caching allocator does: `arena` (the default)
//   hands out pieces of one block, reused by every call (safe: all calls run in order on one
//   stream); `async` takes each from cuMemAllocAsync and frees it with cuMemFreeAsync after the
//   call, on the stream (the cost of a stream-ordered pool allocator, inside the timed loop);
// - measures the launch floor: `floor` launches of an empty kernel (its PTX is below; the driver
//   compiles it), timed the same way, chunk by chunk;
// - reports the op's launches per call (mirai_<op>_num_launches: kernels, cuBLASLt matmuls, copies),
//   the floor per launch and host / (launches x floor), as a Markdown table row and as JSON.
//
// Built as a shared library with -DMIRAI_HOST_TIME_LIBRARY it exports mirai_host_time_main(argc,
// argv) instead of main: bench_host_time.py --cpu calls it in a process that holds mirai's CPU
// stand-ins for the driver and cuBLASLt (mirai.export.hostdriver), which CI uses to check it end to
// end (the stand-in runs every kernel in Triton's interpreter: its times mean nothing).
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

// ---- the CUDA driver API, opened at run time ------------------------------------------------------
typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st* CUcontext;
typedef struct CUmod_st* CUmodule;
typedef struct CUfunc_st* CUfunction;
typedef struct CUstream_st* CUstream;
typedef unsigned long long CUdeviceptr;

constexpr unsigned kStreamNonBlocking = 1;  // CU_STREAM_NON_BLOCKING
constexpr int kAttributeCcMajor = 75;       // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
constexpr int kAttributeCcMinor = 76;

struct Driver {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuStreamCreate)(CUstream*, unsigned);
  CUresult (*cuStreamDestroy)(CUstream);
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void*, size_t);
  CUresult (*cuMemcpyDtoH)(void*, CUdeviceptr, size_t);
  CUresult (*cuModuleLoadData)(CUmodule*, const void*);
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             CUstream, void**, void**);
  CUresult (*cuGetErrorString)(CUresult, const char**);
  // optional: --alloc async, the device's name
  CUresult (*cuMemAllocAsync)(CUdeviceptr*, size_t, CUstream);
  CUresult (*cuMemFreeAsync)(CUdeviceptr, CUstream);
  CUresult (*cuDeviceGetName)(char*, int, CUdevice);
};

struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

Driver g_driver;

void Check(CUresult r, const char* what) {
  if (r == 0) return;
  const char* text = nullptr;
  std::string message = std::string(what) + " failed: CUDA error " + std::to_string(r);
  if (g_driver.cuGetErrorString != nullptr && g_driver.cuGetErrorString(r, &text) == 0 && text != nullptr) {
    message += std::string(" (") + text + ")";
  }
  throw Failure(message);
}

void* Symbol(void* lib, const char* name, const char* v2, bool required) {
  void* f = v2 != nullptr ? dlsym(lib, v2) : nullptr;
  if (f == nullptr) f = dlsym(lib, name);
  if (f == nullptr && required) throw Failure(std::string("the CUDA driver lacks ") + name);
  return f;
}

void OpenDriver() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) throw Failure(std::string("cannot open the CUDA driver (libcuda.so.1): ") + dlerror());
  Driver& d = g_driver;
#define LOAD(field, v2, required) d.field = reinterpret_cast<decltype(d.field)>(Symbol(lib, #field, v2, required))
  LOAD(cuGetErrorString, nullptr, true);
  LOAD(cuInit, nullptr, true);
  LOAD(cuDeviceGet, nullptr, true);
  LOAD(cuDeviceGetAttribute, nullptr, true);
  LOAD(cuDevicePrimaryCtxRetain, nullptr, true);
  LOAD(cuCtxSetCurrent, nullptr, true);
  LOAD(cuStreamCreate, nullptr, true);
  LOAD(cuStreamDestroy, "cuStreamDestroy_v2", true);
  LOAD(cuStreamSynchronize, nullptr, true);
  LOAD(cuMemAlloc, "cuMemAlloc_v2", true);
  LOAD(cuMemFree, "cuMemFree_v2", true);
  LOAD(cuMemcpyHtoD, "cuMemcpyHtoD_v2", true);
  LOAD(cuMemcpyDtoH, "cuMemcpyDtoH_v2", true);
  LOAD(cuModuleLoadData, nullptr, true);
  LOAD(cuModuleGetFunction, nullptr, true);
  LOAD(cuLaunchKernel, nullptr, true);
  LOAD(cuMemAllocAsync, nullptr, false);
  LOAD(cuMemFreeAsync, nullptr, false);
  LOAD(cuDeviceGetName, nullptr, false);
#undef LOAD
  Check(d.cuInit(0), "cuInit");
}

// ---- the op's C interface (capi.cc.j2) -------------------------------------------------------------
typedef void* (*AllocateFn)(void*, size_t);

struct Op {
  int (*num_symbols)();
  int (*num_launches)(const int64_t*, int*, int*, int*);
  int (*bind)(const int64_t*, const int*, int64_t*, char*, size_t);
  void (*output_shape)(int, const int64_t*, int64_t*);
  int (*run)(void*, const int64_t*, const void* const*, void* const*, AllocateFn, void*, char*, size_t);
};

Op OpenOp(const std::string& path, const std::string& name) {
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) throw Failure("cannot open " + path + ": " + dlerror());
  auto get = [&](const char* what) {
    const std::string symbol = "mirai_" + name + "_" + what;
    void* f = dlsym(lib, symbol.c_str());
    if (f == nullptr) {
      throw Failure(path + " has no " + symbol + ": build the op's folder again with this mirai");
    }
    return f;
  };
  Op op;
  op.num_symbols = reinterpret_cast<decltype(op.num_symbols)>(get("num_symbols"));
  op.num_launches = reinterpret_cast<decltype(op.num_launches)>(get("num_launches"));
  op.bind = reinterpret_cast<decltype(op.bind)>(get("bind"));
  op.output_shape = reinterpret_cast<decltype(op.output_shape)>(get("output_shape"));
  op.run = reinterpret_cast<decltype(op.run)>(get("run"));
  return op;
}

// ---- tensors -------------------------------------------------------------------------------------
struct TensorSpec {
  std::string dtype;
  std::vector<int64_t> dims;
};

size_t ElementSize(const std::string& dtype) {
  static const std::map<std::string, size_t> sizes = {
      {"float32", 4}, {"float16", 2}, {"bfloat16", 2}, {"float64", 8}, {"int64", 8},
      {"int32", 4},   {"int16", 2},   {"int8", 1},     {"uint8", 1},   {"bool", 1}};
  auto it = sizes.find(dtype);
  if (it == sizes.end()) throw Failure("unknown dtype " + dtype);
  return it->second;
}

std::vector<std::string> Split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, sep)) parts.push_back(part);
  return parts;
}

// Inputs: dtype and sizes, "float32:8,8,256;float32:8,256,1024" (a scalar: "float32:").
std::vector<TensorSpec> ParseInputs(const std::string& text) {
  std::vector<TensorSpec> specs;
  for (const std::string& item : Split(text, ';')) {
    if (item.empty()) continue;
    TensorSpec spec;
    const size_t colon = item.find(':');
    spec.dtype = item.substr(0, colon);
    ElementSize(spec.dtype);
    if (colon != std::string::npos) {
      for (const std::string& d : Split(item.substr(colon + 1), ',')) {
        if (!d.empty()) spec.dims.push_back(std::stoll(d));
      }
    }
    specs.push_back(spec);
  }
  return specs;
}

// Outputs: dtype and rank, "float32:3;float32:1" (their sizes come from mirai_<op>_output_shape).
std::vector<TensorSpec> ParseOutputs(const std::string& text) {
  std::vector<TensorSpec> specs;
  for (const std::string& item : Split(text, ';')) {
    if (item.empty()) continue;
    const size_t colon = item.find(':');
    if (colon == std::string::npos) throw Failure("an output is dtype:rank, not " + item);
    TensorSpec spec;
    spec.dtype = item.substr(0, colon);
    ElementSize(spec.dtype);
    spec.dims.assign(static_cast<size_t>(std::stoi(item.substr(colon + 1))), 0);
    specs.push_back(spec);
  }
  return specs;
}

int64_t Numel(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

uint16_t ToHalf(float v) {  // small normal values only: the inputs here are in [-0.5, 0.5)
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  const uint32_t sign = (bits >> 16) & 0x8000;
  const int32_t exponent = static_cast<int32_t>((bits >> 23) & 0xff) - 127 + 15;
  if (exponent <= 0) return static_cast<uint16_t>(sign);
  return static_cast<uint16_t>(sign | (exponent << 10) | ((bits >> 13) & 0x3ff));
}

enum class Float { kNone, kF32, kF64, kF16, kBF16 };

Float FloatKind(const std::string& dtype) {
  if (dtype == "float32") return Float::kF32;
  if (dtype == "float64") return Float::kF64;
  if (dtype == "float16") return Float::kF16;
  if (dtype == "bfloat16") return Float::kBF16;
  return Float::kNone;
}

// Small pseudo-random values in [-0.5, 0.5) for floating inputs, 0 for the others.
std::vector<unsigned char> InputBytes(const TensorSpec& spec, uint64_t seed) {
  const size_t size = ElementSize(spec.dtype);
  const Float kind = FloatKind(spec.dtype);
  const int64_t n = Numel(spec.dims);
  std::vector<unsigned char> bytes(static_cast<size_t>(n) * size, 0);
  uint64_t state = seed * 0x9e3779b97f4a7c15ULL + 1;
  for (int64_t i = 0; i < n && kind != Float::kNone; ++i) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    const float v = static_cast<float>((state >> 40) & 0xffffff) / 16777216.0f - 0.5f;
    unsigned char* at = bytes.data() + i * size;
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    const double w = v;
    const uint16_t h = ToHalf(v), b = static_cast<uint16_t>(bits >> 16);
    switch (kind) {
      case Float::kF32: std::memcpy(at, &v, 4); break;
      case Float::kF64: std::memcpy(at, &w, 8); break;
      case Float::kF16: std::memcpy(at, &h, 2); break;
      case Float::kBF16: std::memcpy(at, &b, 2); break;
      case Float::kNone: break;
    }
  }
  return bytes;
}

// Non-finite values among the elements of `bytes` (dtype `dtype`): none for integer types.
int64_t NonFinite(const std::string& dtype, const std::vector<unsigned char>& bytes) {
  int64_t bad = 0;
  const Float kind = FloatKind(dtype);
  const size_t size = ElementSize(dtype);
  for (size_t at = 0; at + size <= bytes.size() && kind != Float::kNone; at += size) {
    float f;
    double w;
    uint16_t h;
    switch (kind) {
      case Float::kF32: std::memcpy(&f, &bytes[at], 4); bad += !std::isfinite(f); break;
      case Float::kF64: std::memcpy(&w, &bytes[at], 8); bad += !std::isfinite(w); break;
      case Float::kF16: std::memcpy(&h, &bytes[at], 2); bad += (h & 0x7c00) == 0x7c00; break;
      case Float::kBF16: std::memcpy(&h, &bytes[at], 2); bad += (h & 0x7f80) == 0x7f80; break;
      case Float::kNone: break;
    }
  }
  return bad;
}

// ---- the allocator the op's temporaries come from ------------------------------------------------
struct Allocator {
  bool async = false;
  CUstream stream = nullptr;
  // arena: one block, handed out from its start again by every call
  CUdeviceptr arena = 0;
  size_t arena_bytes = 0;
  size_t used = 0;
  bool sizing = true;                 // before the arena exists: cuMemAlloc, to size it
  std::vector<CUdeviceptr> blocks;    // what cuMemAlloc/cuMemAllocAsync gave in this call
  size_t needed = 0;                  // the arena bytes one call needs
  int64_t allocations = 0;            // requests, since the last Reset
  int64_t requested = 0;              // bytes requested, since the last Reset
  std::string error;

  static size_t Aligned(size_t bytes) { return (bytes + 255) / 256 * 256; }

  static void* Allocate(void* self_ptr, size_t bytes) {
    auto* self = static_cast<Allocator*>(self_ptr);
    ++self->allocations;
    self->requested += static_cast<int64_t>(bytes);
    CUdeviceptr p = 0;
    CUresult r = 0;
    if (self->async) {
      r = g_driver.cuMemAllocAsync(&p, bytes, self->stream);
    } else if (self->sizing) {
      self->needed += Aligned(bytes);
      r = g_driver.cuMemAlloc(&p, bytes);
    } else {
      if (self->used + Aligned(bytes) > self->arena_bytes) {
        self->error = "a call asked for more temporary memory than the first one";
        return nullptr;
      }
      p = self->arena + self->used;
      self->used += Aligned(bytes);
      return reinterpret_cast<void*>(p);
    }
    if (r != 0) {
      self->error = "allocating " + std::to_string(bytes) + " bytes failed: CUDA error " + std::to_string(r);
      return nullptr;
    }
    self->blocks.push_back(p);
    return reinterpret_cast<void*>(p);
  }

  // After a call: what a framework does when the op returns (async: free its temporaries on the stream).
  void EndCall() {
    if (async) {
      for (CUdeviceptr p : blocks) Check(g_driver.cuMemFreeAsync(p, stream), "cuMemFreeAsync");
      blocks.clear();
    }
    used = 0;
  }

  // After the first (synchronized) call: the arena, sized to what that call took.
  void Settle() {
    if (async || !sizing) return;
    for (CUdeviceptr p : blocks) Check(g_driver.cuMemFree(p), "cuMemFree");
    blocks.clear();
    sizing = false;
    arena_bytes = needed;
    if (arena_bytes > 0) Check(g_driver.cuMemAlloc(&arena, arena_bytes), "cuMemAlloc (the arena)");
  }

  void Reset() {
    allocations = 0;
    requested = 0;
  }
};

// ---- the launch floor: an empty kernel -----------------------------------------------------------
std::string EmptyKernelPtx(int cc) {
  // PTX ISA 7.8 (CUDA 11.8) knows every target up to sm_90; the driver compiles it for newer GPUs.
  const int target = std::min(cc, 90);
  return ".version 7.8\n.target sm_" + std::to_string(target) +
         "\n.address_size 64\n\n.visible .entry mirai_empty()\n{\n\tret;\n}\n";
}

using Clock = std::chrono::steady_clock;

double Microseconds(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

// ---- options -------------------------------------------------------------------------------------
struct Options {
  std::string lib, op, inputs, outputs = "", alloc = "arena", json, label;
  int64_t calls = 2000, warmup = 50, sync_calls = 300, chunk = 0, floor = 20000;
};

Options Parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string key = argv[i];
    if (i + 1 >= argc) throw Failure("option " + key + " needs a value");
    const std::string value = argv[++i];
    if (key == "--lib") o.lib = value;
    else if (key == "--op") o.op = value;
    else if (key == "--inputs") o.inputs = value;
    else if (key == "--outputs") o.outputs = value;
    else if (key == "--alloc") o.alloc = value;
    else if (key == "--json") o.json = value;
    else if (key == "--label") o.label = value;
    else if (key == "--calls") o.calls = std::stoll(value);
    else if (key == "--warmup") o.warmup = std::stoll(value);
    else if (key == "--sync-calls") o.sync_calls = std::stoll(value);
    else if (key == "--chunk") o.chunk = std::stoll(value);
    else if (key == "--floor") o.floor = std::stoll(value);
    else throw Failure("unknown option " + key);
  }
  if (o.lib.empty() || o.op.empty()) throw Failure("usage: host_time --lib LIB --op OP --inputs SPECS --outputs DTYPES ...");
  if (o.alloc != "arena" && o.alloc != "async") throw Failure("--alloc is arena or async, not " + o.alloc);
  if (o.calls < 1 || o.warmup < 1 || o.sync_calls < 0 || o.chunk < 0 || o.floor < 0) {
    throw Failure("--calls and --warmup must be at least 1; --sync-calls, --chunk and --floor at least 0");
  }
  return o;
}

std::string Number(double v) {
  if (!std::isfinite(v)) return "null";
  char text[64];
  std::snprintf(text, sizeof text, "%.4f", v);
  return text;
}

std::string Quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

int Main(int argc, char** argv) {
  const Options o = Parse(argc, argv);
  OpenDriver();
  const Driver& d = g_driver;
  CUdevice device = 0;
  CUcontext ctx = nullptr;
  Check(d.cuDeviceGet(&device, 0), "cuDeviceGet");
  Check(d.cuDevicePrimaryCtxRetain(&ctx, device), "cuDevicePrimaryCtxRetain");
  Check(d.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  int major = 0, minor = 0;
  Check(d.cuDeviceGetAttribute(&major, kAttributeCcMajor, device), "cuDeviceGetAttribute");
  Check(d.cuDeviceGetAttribute(&minor, kAttributeCcMinor, device), "cuDeviceGetAttribute");
  char name[256] = "unknown";
  if (d.cuDeviceGetName != nullptr) d.cuDeviceGetName(name, sizeof name, device);
  CUstream stream = nullptr;
  Check(d.cuStreamCreate(&stream, kStreamNonBlocking), "cuStreamCreate");
  if (o.alloc == "async" && (d.cuMemAllocAsync == nullptr || d.cuMemFreeAsync == nullptr)) {
    throw Failure("--alloc async needs cuMemAllocAsync and cuMemFreeAsync (CUDA 11.2 or newer)");
  }

  const Op op = OpenOp(o.lib, o.op);
  const std::vector<TensorSpec> inputs = ParseInputs(o.inputs);
  std::vector<TensorSpec> outputs = ParseOutputs(o.outputs);

  // bind once: the symbols from the input shapes, in rows of the op's largest rank (kMaxRank)
  size_t max_rank = 1;
  for (const TensorSpec& t : inputs) max_rank = std::max(max_rank, t.dims.size());
  for (const TensorSpec& t : outputs) max_rank = std::max(max_rank, t.dims.size());
  std::vector<int64_t> dims(std::max<size_t>(inputs.size(), 1) * max_rank, 0);
  std::vector<int> ranks(std::max<size_t>(inputs.size(), 1), 0);
  for (size_t i = 0; i < inputs.size(); ++i) {
    ranks[i] = static_cast<int>(inputs[i].dims.size());
    for (size_t k = 0; k < inputs[i].dims.size(); ++k) dims[i * max_rank + k] = inputs[i].dims[k];
  }
  std::vector<int64_t> symbols(std::max(op.num_symbols(), 1), 0);
  char err[4096] = "";
  if (op.bind(dims.data(), ranks.data(), symbols.data(), err, sizeof err) != 0) {
    throw Failure(std::string("bind: ") + err);
  }
  int kernels = 0, gemms = 0, copies = 0;  // of the variant these symbols pick
  const int launches = op.num_launches(symbols.data(), &kernels, &gemms, &copies);
  const auto bind_start = Clock::now();
  const int bind_calls = 1000;
  for (int i = 0; i < bind_calls; ++i) op.bind(dims.data(), ranks.data(), symbols.data(), err, sizeof err);
  const double bind_us = Microseconds(Clock::now() - bind_start) / bind_calls;

  std::vector<CUdeviceptr> in_ptrs(std::max<size_t>(inputs.size(), 1), 0);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::vector<unsigned char> bytes = InputBytes(inputs[i], i + 1);
    Check(d.cuMemAlloc(&in_ptrs[i], std::max<size_t>(bytes.size(), 1)), "cuMemAlloc (an input)");
    if (!bytes.empty()) Check(d.cuMemcpyHtoD(in_ptrs[i], bytes.data(), bytes.size()), "cuMemcpyHtoD");
  }
  std::vector<CUdeviceptr> out_ptrs(std::max<size_t>(outputs.size(), 1), 0);
  for (size_t j = 0; j < outputs.size(); ++j) {
    std::vector<int64_t> shape(max_rank, 0);
    op.output_shape(static_cast<int>(j), symbols.data(), shape.data());
    std::copy(shape.begin(), shape.begin() + outputs[j].dims.size(), outputs[j].dims.begin());
    const size_t bytes = static_cast<size_t>(Numel(outputs[j].dims)) * ElementSize(outputs[j].dtype);
    Check(d.cuMemAlloc(&out_ptrs[j], std::max<size_t>(bytes, 1)), "cuMemAlloc (an output)");
    const std::vector<unsigned char> poison(bytes, 0xff);  // NaN in every float type
    if (bytes > 0) Check(d.cuMemcpyHtoD(out_ptrs[j], poison.data(), bytes), "cuMemcpyHtoD");
  }
  std::vector<const void*> in_args(in_ptrs.size());
  for (size_t i = 0; i < in_ptrs.size(); ++i) in_args[i] = reinterpret_cast<const void*>(in_ptrs[i]);
  std::vector<void*> out_args(out_ptrs.size());
  for (size_t j = 0; j < out_ptrs.size(); ++j) out_args[j] = reinterpret_cast<void*>(out_ptrs[j]);

  Allocator alloc;
  alloc.async = o.alloc == "async";
  alloc.stream = stream;
  auto call = [&]() {
    const int code = op.run(stream, symbols.data(), in_args.data(), out_args.data(), &Allocator::Allocate,
                            &alloc, err, sizeof err);
    if (code != 0) {
      throw Failure(o.op + " failed (code " + std::to_string(code) + "): " + err +
                    (alloc.error.empty() ? "" : " [" + alloc.error + "]"));
    }
    alloc.EndCall();
  };
  auto sync = [&]() { Check(d.cuStreamSynchronize(stream), "cuStreamSynchronize"); };

  // warm up: the first call loads the kernels and plans the GEMMs, and sizes the arena
  alloc.Reset();
  call();
  sync();
  const int64_t allocations = alloc.allocations;
  const int64_t allocated = alloc.requested;
  alloc.Settle();
  for (int64_t i = 1; i < o.warmup; ++i) call();
  sync();

  // host time: chunks of calls, no synchronization inside the timed part
  const int64_t chunk = o.chunk > 0 ? o.chunk : std::max<int64_t>(1, 384 / std::max(launches, 1));
  Clock::duration host{};
  for (int64_t done = 0; done < o.calls;) {
    const int64_t n = std::min(chunk, o.calls - done);
    const auto start = Clock::now();
    for (int64_t i = 0; i < n; ++i) call();
    host += Clock::now() - start;
    sync();
    done += n;
  }
  const double host_us = Microseconds(host) / static_cast<double>(o.calls);

  // latency: a synchronization after every call
  double sync_us = NAN;
  if (o.sync_calls > 0) {
    const auto start = Clock::now();
    for (int64_t i = 0; i < o.sync_calls; ++i) {
      call();
      sync();
    }
    sync_us = Microseconds(Clock::now() - start) / static_cast<double>(o.sync_calls);
  }

  int64_t nonfinite = 0;
  for (size_t j = 0; j < outputs.size(); ++j) {
    std::vector<unsigned char> bytes(static_cast<size_t>(Numel(outputs[j].dims)) * ElementSize(outputs[j].dtype));
    if (!bytes.empty()) Check(d.cuMemcpyDtoH(bytes.data(), out_ptrs[j], bytes.size()), "cuMemcpyDtoH");
    nonfinite += NonFinite(outputs[j].dtype, bytes);
  }

  // the launch floor: an empty kernel, launched the same way
  double floor_us = NAN;
  if (o.floor > 0) {
    const std::string ptx = EmptyKernelPtx(major * 10 + minor);
    CUmodule module = nullptr;
    CUfunction empty = nullptr;
    Check(d.cuModuleLoadData(&module, ptx.c_str()), "cuModuleLoadData (the empty kernel's PTX)");
    Check(d.cuModuleGetFunction(&empty, module, "mirai_empty"), "cuModuleGetFunction");
    auto launch = [&]() {
      Check(d.cuLaunchKernel(empty, 1, 1, 1, 32, 1, 1, 0, stream, nullptr, nullptr), "cuLaunchKernel");
    };
    for (int i = 0; i < 100; ++i) launch();
    sync();
    Clock::duration total{};
    const int64_t floor_chunk = 384;
    for (int64_t done = 0; done < o.floor;) {
      const int64_t n = std::min(floor_chunk, o.floor - done);
      const auto start = Clock::now();
      for (int64_t i = 0; i < n; ++i) launch();
      total += Clock::now() - start;
      sync();
      done += n;
    }
    floor_us = Microseconds(total) / static_cast<double>(o.floor);
  }

  const double budget_us = launches * floor_us;
  const double ratio = host_us / budget_us;
  std::string shapes;
  for (size_t i = 0; i < inputs.size(); ++i) {
    shapes += i ? ", " : "";
    shapes += "[";
    for (size_t k = 0; k < inputs[i].dims.size(); ++k) shapes += (k ? "," : "") + std::to_string(inputs[i].dims[k]);
    shapes += "]";
  }
  const std::string label = o.label.empty() ? o.op : o.label;
  std::printf("| %s | %d (%d kernels, %d GEMMs, %d copies) | %s | %s | %s | %s | %s |\n", label.c_str(), launches,
              kernels, gemms, copies, Number(host_us).c_str(), Number(sync_us).c_str(), Number(floor_us).c_str(),
              Number(budget_us).c_str(), Number(ratio).c_str());
  std::ostringstream json;
  json << "{\"op\": " << Quoted(o.op) << ", \"label\": " << Quoted(label) << ", \"device\": " << Quoted(name)
       << ", \"compute_capability\": " << major * 10 + minor << ", \"inputs\": " << Quoted(shapes)
       << ", \"alloc\": " << Quoted(o.alloc) << ", \"calls\": " << o.calls << ", \"warmup\": " << o.warmup
       << ", \"chunk\": " << chunk << ", \"sync_calls\": " << o.sync_calls << ", \"launches\": " << launches
       << ", \"kernels\": " << kernels << ", \"gemms\": " << gemms << ", \"copies\": " << copies
       << ", \"allocations_per_call\": " << allocations << ", \"allocated_bytes_per_call\": " << allocated
       << ", \"bind_us\": " << Number(bind_us) << ", \"host_us\": " << Number(host_us)
       << ", \"sync_us\": " << Number(sync_us) << ", \"floor_launches\": " << o.floor
       << ", \"floor_us\": " << Number(floor_us) << ", \"budget_us\": " << Number(budget_us)
       << ", \"ratio\": " << Number(ratio) << ", \"nonfinite_outputs\": " << nonfinite << "}";
  std::printf("%s\n", json.str().c_str());
  std::fflush(stdout);
  if (!o.json.empty()) {
    std::ofstream out(o.json);
    out << json.str() << "\n";
    if (!out) throw Failure("cannot write " + o.json);
  }

  alloc.Settle();
  if (alloc.arena != 0) d.cuMemFree(alloc.arena);
  for (CUdeviceptr p : in_ptrs) if (p != 0) d.cuMemFree(p);
  for (CUdeviceptr p : out_ptrs) if (p != 0) d.cuMemFree(p);
  d.cuStreamDestroy(stream);
  return 0;
}

int Guarded(int argc, char** argv) {
  try {
    return Main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "host_time: %s\n", e.what());
    std::fflush(stderr);
    return 1;
  }
}

}  // namespace

#ifdef MIRAI_HOST_TIME_LIBRARY
extern "C" int mirai_host_time_main(int argc, char** argv) { return Guarded(argc, argv); }
#else
int main(int argc, char** argv) { return Guarded(argc, argv); }
#endif
