// Parses the text form written by printer.cc back into a Module.
#pragma once

#include <memory>
#include <string_view>

#include "ir/module.h"

namespace fj {

// Throws fj::Error(kInvalidArgument) with the line and column of the first problem. The
// result is not verified; call Verify() for that.
std::unique_ptr<Module> ParseModule(std::string_view text);

}  // namespace fj
