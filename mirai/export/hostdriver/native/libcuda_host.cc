// A CPU stand-in for the CUDA driver (libcuda.so.1), for running mirai's generated launch code on a
// machine without a GPU. It has the soname libcuda.so.1: once loaded into a process, the generated
// runtime's dlopen("libcuda.so.1") finds it instead of a real driver.
//
// "Device" memory is host memory: allocations are aligned host allocations and copies are plain
// memcpy, run at once (every stream is synchronous). Module loads and kernel launches go to callbacks that the host side
// (mirai.export.hostdriver) registers: it identifies each loaded image and runs the launched kernel's
// Triton source in Triton's interpreter over the argument values the launch code passed.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

namespace {

typedef int CUresult;
constexpr CUresult kSuccess = 0;
constexpr CUresult kInvalidValue = 1;
constexpr CUresult kOutOfMemory = 2;
constexpr CUresult kNotInitialized = 3;
constexpr CUresult kInvalidImage = 200;
constexpr CUresult kNotFound = 500;

// Registered by the host side. load: an image pointer -> a module id (> 0), or 0 if unknown.
// launch: 0 on success; else an error code, with the message passed to mirai_host_set_error.
typedef int64_t (*LoadCallback)(const void* image);
typedef int (*LaunchCallback)(int64_t module, const char* name, unsigned gx, unsigned gy,
                              unsigned gz, unsigned block_x, unsigned shared, void** params);

struct Config {
  int cc_major = 9;
  int cc_minor = 0;
  int shared_optin = 232448;
  int sm_count = 132;
};

struct Module {
  int64_t id;
};

struct Function {
  int64_t module;
  std::string name;
};

struct Stream {
  static constexpr uint32_t kMagic = 0x5374726d;
  uint32_t magic = kMagic;
};

constexpr size_t kAllocationAlignment = 256;  // what cuMemAlloc guarantees

std::mutex g_mu;
Config g_config;
LoadCallback g_load = nullptr;
LaunchCallback g_launch = nullptr;
bool g_initialized = false;
std::string g_error;
int g_context_tag = 0;  // the one context: its address is the CUcontext handle
int g_launches = 0;
bool g_dry = false;  // count launches, run nothing (mirai_host_set_dry)

void* Context() { return &g_context_tag; }

}  // namespace

extern "C" {

// ---- the host side's interface -------------------------------------------------------------------
int mirai_host_driver_version() { return 1; }

void mirai_host_configure(int cc_major, int cc_minor, int shared_optin, int sm_count) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_config = Config{cc_major, cc_minor, shared_optin, sm_count};
}

void mirai_host_set_callbacks(LoadCallback load, LaunchCallback launch) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_load = load;
  g_launch = launch;
}

void mirai_host_set_error(const char* message) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_error = message != nullptr ? message : "";
}

int mirai_host_launch_count() { return g_launches; }

// Dry: launches are counted and checked, never run, so a harness times the launch code's own host
// work (bench/bench_host_time.py --cpu --dry). Outputs are then left as they were.
void mirai_host_set_dry(int on) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_dry = on != 0;
}

// ---- the driver API the generated runtime loads ----------------------------------------------------
CUresult cuInit(unsigned int flags) {
  if (flags != 0) return kInvalidValue;
  g_initialized = true;
  return kSuccess;
}

CUresult cuCtxGetCurrent(void** ctx) {
  if (!g_initialized) return kNotInitialized;
  *ctx = Context();
  return kSuccess;
}

CUresult cuCtxGetDevice(int* device) {
  *device = 0;
  return kSuccess;
}

CUresult cuDeviceGet(int* device, int ordinal) {
  if (!g_initialized) return kNotInitialized;
  if (device == nullptr || ordinal != 0) return kInvalidValue;  // one device
  *device = 0;
  return kSuccess;
}

CUresult cuDeviceGetName(char* name, int length, int device) {
  if (name == nullptr || length <= 0 || device != 0) return kInvalidValue;
  std::snprintf(name, static_cast<size_t>(length), "mirai CPU driver");
  return kSuccess;
}

// The one context is the device's primary context.
CUresult cuDevicePrimaryCtxRetain(void** ctx, int device) {
  if (!g_initialized) return kNotInitialized;
  if (ctx == nullptr || device != 0) return kInvalidValue;
  *ctx = Context();
  return kSuccess;
}

CUresult cuCtxSetCurrent(void* ctx) { return ctx == nullptr || ctx == Context() ? kSuccess : kInvalidValue; }

CUresult cuCtxPushCurrent_v2(void* ctx) { return ctx == Context() ? kSuccess : kInvalidValue; }

CUresult cuCtxPopCurrent_v2(void** ctx) {
  if (ctx != nullptr) *ctx = Context();
  return kSuccess;
}

CUresult cuStreamCreate(Stream** stream, unsigned flags) {
  if (stream == nullptr || flags > 1) return kInvalidValue;  // CU_STREAM_DEFAULT or NON_BLOCKING
  *stream = new Stream();
  return kSuccess;
}

CUresult cuStreamDestroy_v2(Stream* stream) {
  if (stream == nullptr || stream->magic != Stream::kMagic) return kInvalidValue;
  stream->magic = 0;
  delete stream;
  return kSuccess;
}

CUresult cuStreamSynchronize(void* stream) {
  (void)stream;  // every stream is synchronous: all its work is done
  return kSuccess;
}

CUresult cuMemAlloc_v2(uint64_t* ptr, size_t bytes) {
  if (ptr == nullptr || bytes == 0) return kInvalidValue;
  const size_t rounded = (bytes + kAllocationAlignment - 1) / kAllocationAlignment * kAllocationAlignment;
  void* p = std::aligned_alloc(kAllocationAlignment, rounded);
  if (p == nullptr) return kOutOfMemory;
  *ptr = reinterpret_cast<uint64_t>(p);
  return kSuccess;
}

CUresult cuMemFree_v2(uint64_t ptr) {
  std::free(reinterpret_cast<void*>(ptr));
  return kSuccess;
}

// Stream-ordered allocation: every stream is synchronous, so it is allocation at once.
CUresult cuMemAllocAsync(uint64_t* ptr, size_t bytes, void* stream) {
  (void)stream;
  return cuMemAlloc_v2(ptr, bytes);
}

CUresult cuMemFreeAsync(uint64_t ptr, void* stream) {
  (void)stream;
  return cuMemFree_v2(ptr);
}

CUresult cuMemcpyHtoD_v2(uint64_t dst, const void* src, size_t bytes) {
  if (bytes != 0 && (dst == 0 || src == nullptr)) return kInvalidValue;
  std::memcpy(reinterpret_cast<void*>(dst), src, bytes);
  return kSuccess;
}

CUresult cuMemcpyDtoH_v2(void* dst, uint64_t src, size_t bytes) {
  if (bytes != 0 && (dst == nullptr || src == 0)) return kInvalidValue;
  std::memcpy(dst, reinterpret_cast<const void*>(src), bytes);
  return kSuccess;
}

CUresult cuStreamGetCtx(void* stream, void** ctx) {
  (void)stream;
  *ctx = Context();
  return kSuccess;
}

CUresult cuDeviceGetAttribute(int* value, int attribute, int device) {
  if (device != 0) return kInvalidValue;
  std::lock_guard<std::mutex> lock(g_mu);
  switch (attribute) {
    case 75: *value = g_config.cc_major; return kSuccess;   // compute capability major
    case 76: *value = g_config.cc_minor; return kSuccess;   // compute capability minor
    case 97: *value = g_config.shared_optin; return kSuccess;  // max shared memory per block, opt-in
    case 16: *value = g_config.sm_count; return kSuccess;   // multiprocessor count
    default: return kInvalidValue;
  }
}

CUresult cuModuleLoadData(Module** module, const void* image) {
  LoadCallback load;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    load = g_load;
  }
  if (load == nullptr) {
    mirai_host_set_error("the CPU driver has no host side registered");
    return kNotInitialized;
  }
  const int64_t id = load(image);
  if (id <= 0) return kInvalidImage;
  *module = new Module{id};  // modules live for the process, as the runtime's kernel cache does
  return kSuccess;
}

CUresult cuModuleGetFunction(Function** fn, Module* module, const char* name) {
  if (module == nullptr || name == nullptr) return kNotFound;
  *fn = new Function{module->id, name};
  return kSuccess;
}

CUresult cuFuncGetAttribute(int* value, int attribute, Function* fn) {
  (void)fn;
  if (attribute == 1) {  // static shared memory: Triton kernels use dynamic shared memory only
    *value = 0;
    return kSuccess;
  }
  return kInvalidValue;
}

CUresult cuFuncSetAttribute(Function* fn, int attribute, int value) {
  (void)fn;
  (void)attribute;
  return value >= 0 ? kSuccess : kInvalidValue;
}

CUresult cuLaunchKernel(Function* fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned shared, void* stream, void** params,
                        void** extra) {
  (void)stream;
  if (fn == nullptr || extra != nullptr || by != 1 || bz != 1) return kInvalidValue;
  LaunchCallback launch;
  bool dry;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    launch = g_launch;
    dry = g_dry;
    ++g_launches;
  }
  if (dry) return kSuccess;
  if (launch == nullptr) return kNotInitialized;
  return launch(fn->module, fn->name.c_str(), gx, gy, gz, bx, shared, params);
}

CUresult cuMemcpyDtoDAsync_v2(uint64_t dst, uint64_t src, size_t bytes, void* stream) {
  (void)stream;
  if (bytes != 0 && (dst == 0 || src == 0)) return kInvalidValue;
  std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes);
  return kSuccess;
}

CUresult cuGetErrorString(CUresult result, const char** text) {
  static thread_local std::string message;
  std::lock_guard<std::mutex> lock(g_mu);
  switch (result) {
    case kSuccess: message = "no error"; break;
    case kInvalidValue: message = "invalid argument"; break;
    case kOutOfMemory: message = "out of memory"; break;
    case kNotInitialized: message = "the CPU driver is not initialized"; break;
    default: message = g_error.empty() ? "CPU driver error" : g_error; break;
  }
  *text = message.c_str();
  return kSuccess;
}

}  // extern "C"
