// Buffers (see buffer.h). Host buffers come with a small cache of freed blocks: a program
// called in a loop gets its output buffers back without page faults (fresh large blocks
// come from mmap and fault on first touch, which can cost more than the kernel that fills
// them). Device buffers go back to their device's allocator.
#include "runtime/buffer.h"

#include <pthread.h>
#include <sys/mman.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <vector>

#include "support/error.h"

namespace fj {
namespace {

constexpr size_t kAlignment = Buffer::kAlignment;
constexpr size_t kMaxCachedBytes = size_t{256} << 20;  // per process
constexpr size_t kMinCachedBlock = 4096;                // smaller ones: malloc is fast

class BlockCache;
BlockCache& Cache();

class BlockCache {
 public:
  void Lock() { mu_.lock(); }
  void Unlock() { mu_.unlock(); }
  void* Take(size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.find(bytes);
    if (it == free_.end() || it->second.empty()) return nullptr;
    void* p = it->second.back();
    it->second.pop_back();
    cached_ -= bytes;
    return p;
  }
  // Returns false if the cache is full (the caller frees the block).
  bool Put(void* p, size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    if (cached_ + bytes > kMaxCachedBytes) return false;
    free_[bytes].push_back(p);
    cached_ += bytes;
    return true;
  }

 private:
  std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;
  size_t cached_ = 0;
};

BlockCache& Cache() {
  // Outlives every buffer. A fork waits for the cache's lock, so the child's copy is
  // consistent and unlocked.
  static BlockCache* cache = [] {
    pthread_atfork([] { Cache().Lock(); }, [] { Cache().Unlock(); }, [] { Cache().Unlock(); });
    return new BlockCache();
  }();
  return *cache;
}

size_t Rounded(int64_t bytes) {
  size_t n = (static_cast<size_t>(bytes) + kAlignment - 1) / kAlignment * kAlignment;
  return n == 0 ? kAlignment : n;
}

}  // namespace

void Buffer::InitializeCache() { Cache(); }

std::shared_ptr<Buffer> Buffer::Allocate(int64_t bytes) {
  if (bytes < 0) ThrowInvalidArgument("negative buffer size");
  size_t rounded = Rounded(bytes);
  void* p = rounded >= kMinCachedBlock ? Cache().Take(rounded) : nullptr;
  if (!p) {
    p = std::aligned_alloc(kAlignment, rounded);
    if (!p) ThrowResourceExhausted("out of memory allocating ", bytes, " bytes");
    if (rounded >= (size_t{2} << 20)) {
      // Huge pages for large buffers (as NumPy asks for its own): a single thread streaming
      // through 4 KiB pages is bound by TLB misses (a 17 MB copy took 1.2 ms instead of
      // 0.55). madvise takes whole pages: the block's page-aligned interior.
      const uintptr_t page = 4096;
      uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
      uintptr_t end = (reinterpret_cast<uintptr_t>(p) + rounded) / page * page;
      if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
    }
  }
  return std::shared_ptr<Buffer>(new Buffer(p, bytes, nullptr));
}

std::shared_ptr<Buffer> Buffer::AllocateOn(const std::shared_ptr<Device>& device, int64_t bytes) {
  if (!device) return Allocate(bytes);
  if (bytes < 0) ThrowInvalidArgument("negative buffer size");
  return std::shared_ptr<Buffer>(new Buffer(device->Allocate(bytes), bytes, device));
}

std::shared_ptr<Buffer> Buffer::Wrap(void* data, int64_t bytes, std::function<void()> release) {
  if (bytes < 0) ThrowInvalidArgument("negative buffer size");
  if (reinterpret_cast<uintptr_t>(data) % kAlignment != 0) ThrowInvalidArgument("wrapped memory is not 64-byte aligned");
  std::shared_ptr<Buffer> b(new Buffer(data, bytes, nullptr));
  b->release_ = std::move(release);
  return b;
}

void Buffer::DropCopies() {
  std::shared_ptr<Buffer> host, device;  // freed outside the lock
  std::lock_guard<std::mutex> lock(copies_mu_);
  host = std::move(host_copy_);
  device = std::move(device_copy_);
}

Buffer::~Buffer() {
  if (release_) {
    release_();
    return;
  }
  if (device_) {
    device_->Free(data_, size_);
    return;
  }
  size_t rounded = Rounded(size_);
  if (rounded >= kMinCachedBlock && Cache().Put(data_, rounded)) return;
  std::free(data_);
}

const void* Buffer::HostData() const {
  if (!device_) return data_;
  std::lock_guard<std::mutex> lock(copies_mu_);
  if (!host_copy_) {
    std::shared_ptr<Buffer> copy = Allocate(size_);
    if (size_ > 0) device_->CopyToHost(copy->data(), data_, size_);
    host_copy_ = std::move(copy);
  }
  return host_copy_->data();
}

std::shared_ptr<Buffer> Buffer::On(const std::shared_ptr<Device>& device) const {
  if (device == device_) return std::const_pointer_cast<Buffer>(shared_from_this());
  if (!device) {
    HostData();
    std::lock_guard<std::mutex> lock(copies_mu_);
    return host_copy_;
  }
  const void* host = HostData();
  std::lock_guard<std::mutex> lock(copies_mu_);
  if (!device_copy_ || device_copy_->device_ != device) {
    std::shared_ptr<Buffer> copy = AllocateOn(device, size_);
    if (size_ > 0) device->CopyToDevice(copy->data(), host, size_);
    device_copy_ = std::move(copy);
  }
  return device_copy_;
}

}  // namespace fj
