// Unique names (see names.h).
#include "ir/names.h"

#include <algorithm>
#include <cctype>

namespace fj {

std::string NameSet::Uniquify(const std::string& hint) {
  std::string base = hint.empty() ? std::string("x") : hint;
  if (used_.insert(base).second) return base;
  size_t dot = base.rfind('.');
  if (dot != std::string::npos && dot + 1 < base.size() &&
      std::all_of(base.begin() + dot + 1, base.end(), [](unsigned char c) { return std::isdigit(c); })) {
    base = base.substr(0, dot);
  }
  int& next = next_suffix_[base];
  while (true) {
    std::string candidate = base + "." + std::to_string(++next);
    if (used_.insert(candidate).second) return candidate;
  }
}

}  // namespace fj
