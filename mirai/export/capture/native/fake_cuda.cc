// GPU-less capture for CPU-only torch builds: a no-op CUDA device guard and CUDA hooks reporting one
// (fake) device, so that autograd and Inductor can trace graphs over fake CUDA tensors. Loaded only in
// the capture worker process, before torch is imported. Nothing here touches a GPU.
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/core/impl/FakeGuardImpl.h>

C10_REGISTER_GUARD_IMPL(CUDA, c10::impl::FakeGuardImpl<c10::DeviceType::CUDA>);

namespace mirai_gpuless {
struct CUDAHooks : at::CUDAHooksInterface {
  explicit CUDAHooks(at::CUDAHooksArgs) {}
  void init() const override {}
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return true; }
  bool hasCUDA() const override { return true; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  c10::DeviceIndex deviceCount() const override { return 1; }
  int getNumGPUs() const override { return 1; }
  void setCurrentDevice(c10::DeviceIndex) const override {}
  c10::DeviceIndex getCurrentDevice() const override { return 0; }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex) const override { return 0; }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex) const override { return 0; }
};
}  // namespace mirai_gpuless

namespace at {
using CUDAHooks = mirai_gpuless::CUDAHooks;
REGISTER_CUDA_HOOKS(CUDAHooks);
}  // namespace at
