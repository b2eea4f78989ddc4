// The host-callback registry (see host_callback.h).
#include "runtime/host_callback.h"

#include <pthread.h>

#include <cstdlib>
#include <mutex>
#include <unordered_map>

#include "ir/instruction.h"
#include "runtime/run_status.h"
#include "support/error.h"

namespace fj {
namespace {

struct Registry {
  std::mutex mu;
  int64_t next_id = 0;
  std::unordered_map<int64_t, std::weak_ptr<const HostCallback>> callbacks;
};

Registry& GetRegistry() {
  // Never destroyed: callbacks may outlive exit. A fork waits until no thread is in the
  // registry, so the child's copy is unlocked.
  static Registry* registry = [] {
    auto* r = new Registry;
    pthread_atfork([] { GetRegistry().mu.lock(); }, [] { GetRegistry().mu.unlock(); },
                   [] { GetRegistry().mu.unlock(); });
    return r;
  }();
  return *registry;
}

}  // namespace

void InitializeHostCallbacks() { GetRegistry(); }

std::shared_ptr<const HostCallback> RegisterHostCallback(HostCallback callback, int64_t* id) {
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  const int64_t mine = r.next_id++;
  std::shared_ptr<const HostCallback> held(new HostCallback(std::move(callback)), [mine](const HostCallback* c) {
    Registry& reg = GetRegistry();
    {
      std::lock_guard<std::mutex> guard(reg.mu);
      reg.callbacks.erase(mine);
    }
    delete c;
  });
  r.callbacks[mine] = held;
  *id = mine;
  return held;
}

std::shared_ptr<const HostCallback> FindHostCallback(int64_t id) {
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.callbacks.find(id);
  return it == r.callbacks.end() ? nullptr : it->second.lock();
}

int64_t HostCallbackId(const std::string& target) {
  const std::string prefix = kHostCallbackPrefix;
  if (target.compare(0, prefix.size(), prefix) != 0 || target.size() == prefix.size()) return -1;
  char* end = nullptr;
  long long id = std::strtoll(target.c_str() + prefix.size(), &end, 10);
  return *end == '\0' && id >= 0 ? id : -1;
}

extern "C" void FjRunHostCallback(int64_t id, void** table) {
  RunStatus* status = RunStatus::Current();
  if (status && status->failed()) return;  // the run stops at its end: no more calls meanwhile
  RunGuarded("host callback", [&] {
    std::shared_ptr<const HostCallback> callback = FindHostCallback(id);
    if (!callback) ThrowInternal("host callback ", id, " was called after its program was freed");
    callback->fn(table + callback->num_results, table);
  });
}

}  // namespace fj
