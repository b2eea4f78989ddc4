// Custom calls: opaque kernels implemented in C++ (XLA's custom calls, e.g. the RNG kernel
// cuda_threefry2x32 the paper found as a fusion barrier). Each has the kernel ABI: a
// buffer table (outputs, then operands) and a range of elements of output 0.
#pragma once

#include <string>
#include <vector>

#include "support/abi.h"

namespace fj {

struct CustomCall {
  std::string target;
  FjKernelFn fn;
  std::string description;
  bool parallel = true;  // whether the element range may be split across threads
};

// The registered custom call for `target`, or null.
const CustomCall* FindCustomCall(const std::string& target);
std::vector<std::string> CustomCallTargets();

}  // namespace fj
