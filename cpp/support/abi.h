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
}
