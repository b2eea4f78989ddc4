// The process's cache of generated code (see code_cache.h).
#include "compiler/code_cache.h"

#include <pthread.h>

namespace fj {

CodeCache& CodeCache::Get() {
  // Outlives every executable's last user. A fork waits until no thread is in the cache, so
  // the child's copy is unlocked (as the JIT engine's).
  static CodeCache* cache = [] {
    auto* c = new CodeCache();
    pthread_atfork([] { Get().mu_.lock(); }, [] { Get().mu_.unlock(); }, [] { Get().mu_.unlock(); });
    return c;
  }();
  return *cache;
}

std::optional<CodeCache::Entry> CodeCache::Find(const std::string& key,
                                               const std::vector<std::shared_ptr<const Literal>>& literals) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return std::nullopt;
  const std::vector<std::shared_ptr<const Literal>>& kept = it->second->second.literals;
  if (kept.size() != literals.size()) return std::nullopt;
  for (size_t i = 0; i < kept.size(); ++i) {
    if (kept[i] != literals[i] && !(*kept[i] == *literals[i])) return std::nullopt;  // a hash collision
  }
  entries_.splice(entries_.begin(), entries_, it->second);
  return it->second->second;
}

void CodeCache::Insert(const std::string& key, Entry entry) {
  if (key.size() > kMaxKeyBytes) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (index_.count(key)) return;  // another thread generated the same code meanwhile
  entries_.emplace_front(key, std::move(entry));
  index_.emplace(entries_.front().first, entries_.begin());
  while (entries_.size() > kCapacity) {
    index_.erase(entries_.back().first);
    entries_.pop_back();
  }
}

void CodeCache::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  index_.clear();
  entries_.clear();
}

size_t CodeCache::size() {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

}  // namespace fj
