// Machine code already generated in this process, by the kernel module it was generated
// from. Two compilations whose passes and kernel formation end in the same module (the
// same function jitted again, `jit(f)` rebuilt in a loop, two fusion profiles that form the
// same kernels) share one executable instead of running LLVM twice. CPU code only.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ir/literal.h"
#include "runtime/executable.h"

namespace fj {

class CodeCache {
 public:
  struct Entry {
    std::shared_ptr<Executable> executable;
    std::string llvm_ir, assembly;
    // The large constants the key names by hash only, in the key's order: a hit compares
    // them element by element with the new module's.
    std::vector<std::shared_ptr<const Literal>> literals;
  };

  // The process's cache.
  static CodeCache& Get();

  // `key` is the kernel module's text and the code generation options (compiler.cc's
  // CodeKey), with constants larger than kInlineLiteralBytes written as a hash and passed in
  // `literals`: equal keys and equal literals generate the same code, so a hit is exact,
  // never a near match.
  std::optional<Entry> Find(const std::string& key, const std::vector<std::shared_ptr<const Literal>>& literals);
  void Insert(const std::string& key, Entry entry);
  void Clear();
  size_t size();

  // At most this many entries (least recently used go first); keys longer than
  // kMaxKeyBytes are not kept (their text would cost more memory than the code).
  static constexpr size_t kCapacity = 64;
  static constexpr size_t kMaxKeyBytes = size_t{1} << 20;
  static constexpr int64_t kInlineLiteralBytes = 256;

 private:
  using List = std::list<std::pair<std::string, Entry>>;
  std::mutex mu_;
  List entries_;  // most recently used first
  std::unordered_map<std::string_view, List::iterator> index_;  // views of the list's keys
};

}  // namespace fj
