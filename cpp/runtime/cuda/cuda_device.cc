// The CUDA device (see cuda_device.h).
#include "runtime/cuda/cuda_device.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "support/error.h"

namespace fj {
namespace {

using cuda::Check;

// Sizes the allocator rounds to: 512 bytes below 1 MiB, whole MiB above.
size_t Rounded(int64_t bytes) {
  size_t n = static_cast<size_t>(std::max<int64_t>(bytes, 1));
  size_t unit = n < (size_t{1} << 20) ? 512 : (size_t{1} << 20);
  return (n + unit - 1) / unit * unit;
}

class CudaModule final : public GpuModule {
 public:
  CudaModule(std::shared_ptr<CudaDevice> device, const GpuCode& code) : device_(std::move(device)), specs_(code.kernels) {
    const cuda::Driver& d = device_->driver();
    device_->Enter();
    std::string error_log(16384, '\0'), info_log(4096, '\0');
    int options[] = {cuda::CU_JIT_ERROR_LOG_BUFFER, cuda::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                     cuda::CU_JIT_INFO_LOG_BUFFER, cuda::CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES};
    void* values[] = {error_log.data(), reinterpret_cast<void*>(error_log.size()), info_log.data(),
                      reinterpret_cast<void*>(info_log.size())};
    cuda::CUresult r = d.cuModuleLoadDataEx(&module_, code.ptx.c_str(), 4, options, values);
    if (r != cuda::CUDA_SUCCESS) {
      error_log.resize(std::strlen(error_log.c_str()));
      Check(d, r, "cuModuleLoadDataEx", "loading the program's PTX (the driver's log: " + error_log + ")");
    }
    for (const GpuKernelSpec& k : specs_) {
      cuda::CUfunction f = nullptr;
      Check(d, d.cuModuleGetFunction(&f, module_, k.name.c_str()), "cuModuleGetFunction", "finding kernel " + k.name);
      functions_.push_back(f);
    }
  }
  ~CudaModule() override {
    if (module_) device_->driver().cuModuleUnload(module_);  // errors at exit are no matter
  }

  void Launch(int kernel, void* const* buffers, int64_t units) override {
    const GpuKernelSpec& spec = specs_.at(static_cast<size_t>(kernel));
    if (units <= 0) return;
    LaunchDims dims = ChooseLaunchDims(units * spec.threads_per_unit, device_->Multiprocessors());
    std::vector<void*> values(buffers, buffers + spec.num_buffers);
    std::vector<void*> params;
    for (void*& v : values) params.push_back(&v);
    device_->Enter();
    const cuda::Driver& d = device_->driver();
    Check(d,
          d.cuLaunchKernel(functions_[static_cast<size_t>(kernel)], static_cast<unsigned>(dims.blocks), 1, 1,
                           static_cast<unsigned>(dims.threads), 1, 1, 0, device_->stream(), params.data(), nullptr),
          "cuLaunchKernel", "launching kernel " + spec.name);
  }

 private:
  std::shared_ptr<CudaDevice> device_;
  std::vector<GpuKernelSpec> specs_;
  cuda::CUmodule module_ = nullptr;
  std::vector<cuda::CUfunction> functions_;
};

struct Opened {
  std::shared_ptr<CudaDevice> device;
  std::string why;
};

Opened OpenOnce() {
  Opened o;
  std::string why;
  const cuda::Driver* d = cuda::LoadDriver(&why);
  if (!d) {
    o.why = why;
    return o;
  }
  int count = 0;
  if (d->cuDeviceGetCount(&count) != cuda::CUDA_SUCCESS || count == 0) {
    o.why = "the CUDA driver found no GPU";
    return o;
  }
  try {
    o.device = std::make_shared<CudaDevice>(*d, 0);
  } catch (const Error& e) {
    o.why = e.what();
  }
  return o;
}

const Opened& Open() {
  // Never destroyed: CUDA tears itself down at exit, and nothing should run after that.
  static const Opened* opened = new Opened(OpenOnce());
  return *opened;
}

}  // namespace

CudaDevice::CudaDevice(const cuda::Driver& driver, int ordinal) : d_(driver) {
  Check(d_, d_.cuDeviceGet(&device_, ordinal), "cuDeviceGet", "opening GPU 0");
  char name[256] = {};
  Check(d_, d_.cuDeviceGetName(name, sizeof(name), device_), "cuDeviceGetName", "opening GPU 0");
  name_ = name;
  int major = 0, minor = 0;
  Check(d_, d_.cuDeviceGetAttribute(&major, cuda::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device_),
        "cuDeviceGetAttribute", "opening GPU 0");
  Check(d_, d_.cuDeviceGetAttribute(&minor, cuda::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device_),
        "cuDeviceGetAttribute", "opening GPU 0");
  compute_capability_ = major * 10 + minor;
  Check(d_, d_.cuDeviceGetAttribute(&multiprocessors_, cuda::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device_),
        "cuDeviceGetAttribute", "opening GPU 0");
  Check(d_, d_.cuDeviceTotalMem(&total_bytes_, device_), "cuDeviceTotalMem", "opening GPU 0");
  Check(d_, d_.cuDriverGetVersion(&driver_version_), "cuDriverGetVersion", "opening GPU 0");
  Check(d_, d_.cuDevicePrimaryCtxRetain(&context_, device_), "cuDevicePrimaryCtxRetain", "opening GPU 0");
  Enter();
  Check(d_, d_.cuStreamCreate(&stream_, 0), "cuStreamCreate", "opening GPU 0");
}

std::shared_ptr<CudaDevice> CudaDevice::Get() {
  const Opened& o = Open();
  if (!o.device) ThrowUnavailable("no GPU: ", o.why, "; backend='cpu' runs everywhere");
  return o.device;
}

std::string CudaDevice::UnavailableReason() { return Open().device ? "" : Open().why; }

void CudaDevice::Enter() const { Check(d_, d_.cuCtxSetCurrent(context_), "cuCtxSetCurrent", "using GPU 0"); }

std::string CudaDevice::Describe() const {
  char gib[32];
  std::snprintf(gib, sizeof(gib), "%.1f", static_cast<double>(total_bytes_) / (1 << 30));
  return StrCat("gpu:0 (", name_, ", ", Arch(), ", ", multiprocessors_, " SMs, ", gib, " GiB, CUDA driver ",
                driver_version_ / 1000, ".", driver_version_ % 1000 / 10, ")");
}

int CudaDevice::MaxPtxVersion() const {
  int major = driver_version_ / 1000, minor = driver_version_ % 1000 / 10;
  if (major >= 13) return 90;
  if (major == 12) return minor <= 5 ? 80 + minor : minor == 6 ? 85 : 80 + minor - 1;
  if (major == 11) return 70 + minor;
  return 60;
}

void* CudaDevice::Allocate(int64_t bytes) {
  size_t n = Rounded(bytes);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.find(n);
    if (it != free_.end() && !it->second.empty()) {
      cuda::CUdeviceptr p = it->second.back();
      it->second.pop_back();
      cached_bytes_ -= n;
      used_bytes_ += n;
      return reinterpret_cast<void*>(p);
    }
  }
  Enter();
  cuda::CUdeviceptr p = 0;
  cuda::CUresult r = d_.cuMemAlloc(&p, n);
  if (r == cuda::CUDA_ERROR_OUT_OF_MEMORY) {
    ReleaseCached();  // blocks of other sizes back to the driver, then once more
    r = d_.cuMemAlloc(&p, n);
  }
  if (r == cuda::CUDA_ERROR_OUT_OF_MEMORY) {
    ThrowResourceExhausted("GPU out of memory allocating ", bytes, " bytes (", used_bytes_ >> 20,
                           " MiB in use by fusionjit on ", name_, ")");
  }
  Check(d_, r, "cuMemAlloc", StrCat("allocating ", bytes, " bytes"));
  std::lock_guard<std::mutex> lock(mu_);
  used_bytes_ += n;
  return reinterpret_cast<void*>(p);
}

void CudaDevice::Free(void* ptr, int64_t bytes) {
  size_t n = Rounded(bytes);
  std::lock_guard<std::mutex> lock(mu_);
  free_[n].push_back(reinterpret_cast<cuda::CUdeviceptr>(ptr));
  cached_bytes_ += n;
  used_bytes_ -= std::min(used_bytes_, n);
}

void CudaDevice::ReleaseCached() {
  Synchronize();  // nothing queued may still use a block given back
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [size, blocks] : free_) {
    for (cuda::CUdeviceptr p : blocks) d_.cuMemFree(p);
  }
  free_.clear();
  cached_bytes_ = 0;
}

void CudaDevice::CopyToDevice(void* dst, const void* src, int64_t bytes) {
  Enter();
  Check(d_, d_.cuMemcpyHtoDAsync(reinterpret_cast<cuda::CUdeviceptr>(dst), src, static_cast<size_t>(bytes), stream_),
        "cuMemcpyHtoDAsync", "copying an array to the GPU");
}

void CudaDevice::CopyToHost(void* dst, const void* src, int64_t bytes) {
  Enter();
  Check(d_, d_.cuMemcpyDtoHAsync(dst, reinterpret_cast<cuda::CUdeviceptr>(src), static_cast<size_t>(bytes), stream_),
        "cuMemcpyDtoHAsync", "copying an array from the GPU");
  Synchronize();
}

void CudaDevice::CopyOnDevice(void* dst, const void* src, int64_t bytes) {
  Enter();
  Check(d_,
        d_.cuMemcpyDtoDAsync(reinterpret_cast<cuda::CUdeviceptr>(dst), reinterpret_cast<cuda::CUdeviceptr>(src),
                             static_cast<size_t>(bytes), stream_),
        "cuMemcpyDtoDAsync", "copying on the GPU");
}

void CudaDevice::Synchronize() {
  Enter();
  Check(d_, d_.cuStreamSynchronize(stream_), "cuStreamSynchronize", "waiting for the GPU");
}

std::unique_ptr<GpuModule> CudaDevice::Load(const GpuCode& code) {
  return std::make_unique<CudaModule>(Get(), code);
}

}  // namespace fj
