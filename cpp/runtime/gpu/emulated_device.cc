// The host emulation of the GPU (see emulated_device.h).
#include "runtime/gpu/emulated_device.h"

#include <ucontext.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "runtime/buffer.h"
#include "support/error.h"

namespace fj {
namespace {

constexpr int kWarp = 32;
constexpr size_t kFiberStack = 256 << 10;

struct Warp;

// One emulated thread: its indices, and (in a warp of fibers) its context.
struct Thread {
  int32_t tid = 0, ntid = 1, ctaid = 0, nctaid = 1;
  int lane = 0;
  Warp* warp = nullptr;
  ucontext_t context;
  bool done = false;
  int64_t exchanges = 0;  // shuffles it has reached
};

// A warp whose threads run as fibers: each runs until it reaches a shuffle, where it
// leaves its value and yields; when all have arrived, each takes its partner's value.
struct Warp {
  Thread threads[kWarp];
  int32_t values[kWarp];
  ucontext_t scheduler;
  HostKernelFn kernel = nullptr;
  void* const* args = nullptr;
  std::vector<char> stacks = std::vector<char>(kWarp * kFiberStack);
};

thread_local Thread* t_thread = nullptr;

int32_t SpecialRegisterRead(int32_t which) {
  Thread* t = t_thread;
  if (!t) return 0;
  switch (static_cast<SpecialRegister>(which)) {
    case SpecialRegister::kTidX: return t->tid;
    case SpecialRegister::kNtidX: return t->ntid;
    case SpecialRegister::kCtaidX: return t->ctaid;
    case SpecialRegister::kNctaidX: return t->nctaid;
  }
  return 0;
}

// Back to the scheduler until every thread of the warp has reached this exchange.
void Yield(Thread* t) {
  swapcontext(&t->context, &t->warp->scheduler);
  t_thread = t;
}

int32_t ShuffleXor(int32_t value, int32_t mask) {
  Thread* t = t_thread;
  if (!t || !t->warp) return value;  // a kernel not marked warp_sync: its warp has one lane
  Warp* w = t->warp;
  ++t->exchanges;
  w->values[t->lane] = value;
  Yield(t);
  int32_t other = w->values[(t->lane ^ mask) & (kWarp - 1)];
  Yield(t);  // nobody overwrites a value before every lane has read its partner's
  return other;
}

void FiberMain(unsigned hi, unsigned lo) {
  auto* t = reinterpret_cast<Thread*>((static_cast<uintptr_t>(hi) << 32) | lo);
  t_thread = t;
  t->warp->kernel(t->warp->args);
  t->done = true;
}  // returns to uc_link: the scheduler

// Runs one warp's threads as fibers, round by round: in each, every unfinished thread runs
// to its next exchange point or its end. All of them must reach the same exchanges.
void RunWarpOfFibers(Warp& w, const std::string& kernel_name) {
  for (int l = 0; l < kWarp; ++l) {
    Thread& t = w.threads[l];
    t.done = false;
    t.exchanges = 0;
    getcontext(&t.context);
    t.context.uc_stack.ss_sp = w.stacks.data() + l * kFiberStack;
    t.context.uc_stack.ss_size = kFiberStack;
    t.context.uc_link = &w.scheduler;
    auto p = reinterpret_cast<uintptr_t>(&t);
    makecontext(&t.context, reinterpret_cast<void (*)()>(&FiberMain), 2, static_cast<unsigned>(p >> 32),
                static_cast<unsigned>(p & 0xffffffffu));
  }
  Thread* saved = t_thread;
  while (true) {
    int running = 0;
    for (int l = 0; l < kWarp; ++l) {
      Thread& t = w.threads[l];
      if (t.done) continue;
      swapcontext(&w.scheduler, &t.context);
      if (!t.done) ++running;
    }
    if (running == 0) break;
    // Every lane must be at the same exchange: one that finished or lags would make a GPU
    // hang or read garbage.
    int64_t at = -1;
    for (int l = 0; l < kWarp; ++l) {
      const Thread& t = w.threads[l];
      int64_t reached = t.done ? -2 : t.exchanges;
      if (at == -1) at = reached;
      if (reached != at) {
        t_thread = saved;
        ThrowInternal("GPU emulation: the lanes of a warp of kernel '", kernel_name,
                      "' diverged at a warp shuffle (lane 0 at exchange ", w.threads[0].done ? -1 : w.threads[0].exchanges,
                      ", lane ", l, " at ", t.done ? -1 : t.exchanges, ")");
      }
    }
  }
  t_thread = saved;
}

class EmulatedModule final : public GpuModule {
 public:
  EmulatedModule(const GpuCode& code, int multiprocessors) : code_(code), multiprocessors_(multiprocessors) {}

  void Launch(int kernel, void* const* buffers, int64_t units) override {
    std::lock_guard<std::mutex> lock(mu_);  // one launch at a time: the device is "in order"
    const GpuKernelSpec& spec = code_.kernels.at(static_cast<size_t>(kernel));
    HostKernelFn fn = code_.host_kernels.at(static_cast<size_t>(kernel));
    if (units <= 0) return;
    LaunchDims dims = ChooseLaunchDims(units * spec.threads_per_unit, multiprocessors_);
    // As cuLaunchKernel's kernelParams: a pointer to each argument.
    std::vector<void*> values(buffers, buffers + spec.num_buffers);
    std::vector<void*> args;
    for (void*& v : values) args.push_back(&v);
    Thread* saved = t_thread;
    for (int64_t block = 0; block < dims.blocks; ++block) {
      for (int warp = 0; warp < dims.threads / kWarp; ++warp) {
        if (spec.warp_sync) {
          if (!warp_) warp_ = std::make_unique<Warp>();
          Warp& w = *warp_;
          w.kernel = fn;
          w.args = args.data();
          for (int l = 0; l < kWarp; ++l) {
            w.threads[l] = Thread{};
            SetIndices(w.threads[l], block, warp * kWarp + l, dims);
            w.threads[l].lane = l;
            w.threads[l].warp = &w;
          }
          RunWarpOfFibers(w, spec.name);
        } else {
          for (int l = 0; l < kWarp; ++l) {
            Thread t;
            SetIndices(t, block, warp * kWarp + l, dims);
            t_thread = &t;
            fn(args.data());
          }
        }
      }
    }
    t_thread = saved;
  }

 private:
  static void SetIndices(Thread& t, int64_t block, int thread, const LaunchDims& dims) {
    t.tid = thread;
    t.ntid = dims.threads;
    t.ctaid = static_cast<int32_t>(block);
    t.nctaid = static_cast<int32_t>(dims.blocks);
    t.lane = thread % kWarp;
  }
  GpuCode code_;
  int multiprocessors_;
  std::unique_ptr<Warp> warp_;
  std::mutex mu_;
};

}  // namespace

const EmulatorEntryPoints& GetEmulatorEntryPoints() {
  static const EmulatorEntryPoints points{&SpecialRegisterRead, &ShuffleXor};
  return points;
}

std::shared_ptr<EmulatedDevice> EmulatedDevice::Get() {
  static std::shared_ptr<EmulatedDevice> device = std::make_shared<EmulatedDevice>();
  return device;
}

std::string EmulatedDevice::Describe() const {
  return "gpu_emulated:0 (the GPU's kernels run on the host CPU, warp by warp)";
}

void* EmulatedDevice::Allocate(int64_t bytes) {
  size_t n = (static_cast<size_t>(bytes) + 255) / 256 * 256;
  void* p = std::aligned_alloc(256, n == 0 ? 256 : n);
  if (!p) ThrowResourceExhausted("emulated GPU out of memory allocating ", bytes, " bytes");
  return p;
}

void EmulatedDevice::Free(void* ptr, int64_t) { std::free(ptr); }

void EmulatedDevice::CopyToDevice(void* dst, const void* src, int64_t bytes) {
  std::memcpy(dst, src, static_cast<size_t>(bytes));
}

void EmulatedDevice::CopyToHost(void* dst, const void* src, int64_t bytes) {
  std::memcpy(dst, src, static_cast<size_t>(bytes));
}

void EmulatedDevice::CopyOnDevice(void* dst, const void* src, int64_t bytes) {
  std::memmove(dst, src, static_cast<size_t>(bytes));
}

std::unique_ptr<GpuModule> EmulatedDevice::Load(const GpuCode& code) {
  if (code.host_kernels.size() != code.kernels.size()) {
    ThrowInternal("GPU emulation: the program has no host code for its kernels");
  }
  return std::make_unique<EmulatedModule>(code, Multiprocessors());
}

}  // namespace fj
