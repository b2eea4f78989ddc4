// GPU executables (see gpu_executable.h).
#include "runtime/gpu/gpu_executable.h"

#include <algorithm>
#include <cstring>

#include "runtime/cuda/cuda_device.h"
#include "runtime/gpu/emulated_device.h"
#include "runtime/run_status.h"

namespace fj {
namespace {

// One run: what the host side's calls into the runtime need.
struct RunContext {
  const GpuProgram* program;
  GpuDevice* device;
  GpuModule* module;
  RunStatus* status;
};

// Generated code must not be unwound by an exception: a failure is recorded, the rest of
// the run's work is skipped, and Run raises it.
template <typename F>
void Guarded(RunContext* run, F&& body) noexcept {
  if (run->status->failed()) return;
  try {
    body();
  } catch (const Error& e) {
    run->status->Fail(e.code(), e.what());
  } catch (const std::bad_alloc&) {
    run->status->Fail(ErrorCode::kResourceExhausted, "out of host memory in a GPU program");
  } catch (const std::exception& e) {
    run->status->Fail(ErrorCode::kInternal, e.what());
  }
}

void LaunchThunk(void* ctx, int64_t kernel, void* const* buffers, int64_t units) {
  auto* run = static_cast<RunContext*>(ctx);
  Guarded(run, [&] { run->module->Launch(static_cast<int>(kernel), buffers, units); });
}

void CopyThunk(void* ctx, void* dst, const void* src, int64_t bytes) {
  auto* run = static_cast<RunContext*>(ctx);
  Guarded(run, [&] { run->device->CopyOnDevice(dst, src, bytes); });
}

void ReadThunk(void* ctx, void* dst, const void* src, int64_t bytes) {
  auto* run = static_cast<RunContext*>(ctx);
  std::memset(dst, 0, static_cast<size_t>(bytes));  // a failed run reads false: loops end
  Guarded(run, [&] { run->device->CopyToHost(dst, src, bytes); });
}

void HostCallThunk(void* ctx, int64_t call, void* const* buffers, int64_t units) {
  auto* run = static_cast<RunContext*>(ctx);
  Guarded(run, [&] {
    const HostCustomCall& c = run->program->host_calls[static_cast<size_t>(call)];
    std::vector<std::shared_ptr<Buffer>> host;
    std::vector<void*> table;
    for (size_t i = 0; i < c.buffer_bytes.size(); ++i) {
      host.push_back(Buffer::Allocate(c.buffer_bytes[i]));
      table.push_back(host.back()->data());
      if (static_cast<int>(i) >= c.num_outputs && c.buffer_bytes[i] > 0) {
        run->device->CopyToHost(table.back(), buffers[i], c.buffer_bytes[i]);
      }
    }
    RunStatus::Scope scope(run->status);
    c.fn(table.data(), 0, units);
    run->status->RaiseIfFailed();
    for (int k = 0; k < c.num_outputs; ++k) {
      if (c.buffer_bytes[k] > 0) run->device->CopyToDevice(buffers[k], table[k], c.buffer_bytes[k]);
    }
  });
}

}  // namespace

LaunchDims ChooseLaunchDims(int64_t threads, int multiprocessors) {
  constexpr int64_t kWarp = 32, kMaxBlock = 256, kResidentThreadsPerSm = 2048;
  int64_t sms = std::max(multiprocessors, 1);
  // Few threads: spread them over the SMs (each warp then gets more of its SM's issue
  // slots); many: full blocks.
  int64_t per_sm = (threads + sms - 1) / sms;
  int64_t block = std::clamp((per_sm + kWarp - 1) / kWarp * kWarp, kWarp, kMaxBlock);
  int64_t blocks = std::max<int64_t>(1, (threads + block - 1) / block);
  blocks = std::min(blocks, sms * (kResidentThreadsPerSm / block));
  return {blocks, static_cast<int>(block)};
}

std::shared_ptr<GpuDevice> GetGpuDevice(Backend backend) {
  if (backend == Backend::kGpuEmulated) return EmulatedDevice::Get();
  if (backend == Backend::kGpu) return CudaDevice::Get();
  ThrowInvalidArgument("the CPU backend has no GPU device");
}

std::string GpuUnavailableReason() { return CudaDevice::UnavailableReason(); }

GpuExecutable::GpuExecutable(Backend backend, GpuProgram program, std::vector<Shape> parameters,
                             std::vector<Shape> outputs, int64_t temp_bytes, std::vector<KernelInfo> kernels,
                             std::vector<LoopInfo> loops)
    : Executable(backend, std::move(parameters), std::move(outputs), temp_bytes, std::move(kernels), std::move(loops)),
      program_(std::move(program)) {}

const GpuExecutable::Loaded& GpuExecutable::Load() const {
  std::lock_guard<std::mutex> lock(load_mu_);
  if (loaded_) return *loaded_;
  auto loaded = std::make_unique<Loaded>();
  loaded->device = GetGpuDevice(backend());
  loaded->module = loaded->device->Load(program_.code);
  std::shared_ptr<Device> device = loaded->device;
  for (const std::vector<uint8_t>& bytes : program_.constants) {
    std::shared_ptr<Buffer> b = Buffer::AllocateOn(device, static_cast<int64_t>(bytes.size()));
    if (!bytes.empty()) device->CopyToDevice(b->data(), bytes.data(), static_cast<int64_t>(bytes.size()));
    loaded->constant_ptrs.push_back(b->data());
    loaded->constants.push_back(std::move(b));
  }
  loaded_ = std::move(loaded);
  return *loaded_;
}

std::shared_ptr<Device> GpuExecutable::device() const { return Load().device; }

std::vector<std::shared_ptr<Buffer>> GpuExecutable::Run(const std::vector<Argument>& args) const {
  const Loaded& loaded = Load();
  std::shared_ptr<Device> device = loaded.device;
  // Inputs on the device: arrays already there as they are, others copied (and the copy
  // kept with a buffer, so that an input passed again is not copied again).
  std::vector<std::shared_ptr<Buffer>> inputs;
  std::vector<void*> params;
  for (size_t i = 0; i < args.size(); ++i) {
    const Argument& a = args[i];
    std::shared_ptr<Buffer> b;
    if (a.buffer) {
      b = a.buffer->On(device);
    } else {
      int64_t bytes = parameter_shapes()[i].ByteSize();
      b = Buffer::AllocateOn(device, bytes);
      if (bytes > 0) device->CopyToDevice(b->data(), a.host, bytes);
    }
    params.push_back(b->data());
    inputs.push_back(std::move(b));
  }
  std::vector<std::shared_ptr<Buffer>> outputs;
  std::vector<void*> out_ptrs;
  for (const Shape& s : output_shapes()) {
    outputs.push_back(Buffer::AllocateOn(device, s.ByteSize()));
    out_ptrs.push_back(outputs.back()->data());
  }
  // Scratch memory goes back to the device's allocator at the end of the call: the device
  // runs its work in order, so whatever reuses it later runs after this program.
  std::shared_ptr<Buffer> temp = temp_bytes() > 0 ? Buffer::AllocateOn(device, temp_bytes()) : nullptr;
  std::vector<int64_t> counters(loops().size() + 1, 0);
  RunStatus status;
  RunContext run{&program_, loaded.device.get(), loaded.module.get(), &status};
  FjGpuRuntimeApi api{&LaunchThunk, &CopyThunk, &ReadThunk, &HostCallThunk, &run,
                      temp ? static_cast<char*>(temp->data()) : nullptr, loaded.constant_ptrs.data()};
  {
    RunStatus::Scope scope(&status);
    program_.entry(params.data(), out_ptrs.data(), reinterpret_cast<char*>(counters.data()), &api);
  }
  status.RaiseIfFailed();
  RecordLoopCounts(reinterpret_cast<const char*>(counters.data()));
  return outputs;
}

}  // namespace fj
