// Unique names: "add", "add.1", "add.2", ... within one scope.
#pragma once

#include <string>
#include <unordered_map>
#include <unordered_set>

namespace fj {

class NameSet {
 public:
  // Returns `hint` if it is free, else `hint.N` for the first free N (a hint that already
  // ends in ".N" counts as its base name). The result is marked used.
  std::string Uniquify(const std::string& hint);
  bool Contains(const std::string& name) const { return used_.count(name) != 0; }
  void Release(const std::string& name) { used_.erase(name); }

 private:
  std::unordered_set<std::string> used_;
  std::unordered_map<std::string, int> next_suffix_;
};

}  // namespace fj
