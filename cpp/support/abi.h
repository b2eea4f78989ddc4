// The C ABI between generated code and the runtime: the program entry point generated for
// each module, the kernel signature, and the table of runtime services the program calls.
#pragma once

#include <cstdint>

extern "C" {

// A kernel: processes iteration units [begin, end) over the given buffer table.
typedef void (*FjKernelFn)(void** buffers, int64_t begin, int64_t end);

// Runtime services, passed to every program call. Field order is part of the ABI: the
// generated code loads field 0 and 1 by position.
struct FjRuntimeApi {
  // Runs kernel(buffers, b, e) over [0, units) in chunks that are whole multiples of
  // `grain` units (the last one excepted) on the thread pool `pool`; returns when all
  // chunks are done.
  void (*parallel_for)(void* pool, FjKernelFn kernel, void** buffers, int64_t units,
                       int64_t grain);
  void* pool;
};

// The generated program: reads parameters, writes outputs, uses `temp` as scratch.
typedef void (*FjEntryFn)(void* const* params, void* const* outputs, char* temp,
                          const FjRuntimeApi* runtime);

// A GPU program's host side calls the GPU runtime through this table (field order is part
// of the ABI). Device addresses are passed as pointers; the host never reads through them.
struct FjGpuRuntimeApi {
  // Launches kernel number `kernel` of the program over `units` iteration units; `buffers`
  // holds its device buffers (outputs, then operands), read before the call returns.
  void (*launch)(void* ctx, int64_t kernel, void* const* buffers, int64_t units);
  // Device-to-device copy, ordered with the launches.
  void (*copy)(void* ctx, void* dst, const void* src, int64_t bytes);
  // Device-to-host copy of a loop's condition or a branch's selector: waits for the work
  // before it.
  void (*read)(void* ctx, void* dst, const void* src, int64_t bytes);
  // Custom call number `call` with no GPU form, run on the host (its buffers copied there
  // and back).
  void (*host_call)(void* ctx, int64_t call, void* const* buffers, int64_t units);
  void* ctx;
  char* device_temp;          // the program's scratch memory on the device
  void* const* constants;     // device copies of the program's array constants
};

// The host side of a GPU program: params and outputs are device addresses; `counters` is
// host memory holding one int64 iteration counter per loop.
typedef void (*FjGpuEntryFn)(void* const* params, void* const* outputs, char* counters,
                             const FjGpuRuntimeApi* runtime);
}
