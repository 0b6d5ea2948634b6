// Device memory allocators. Every Storage the runtime creates comes from the
// pooled allocator of its device, so a model that allocates the same shapes on
// every run reaches a steady state with no device allocation at all (on a GPU
// cudaMalloc/cudaFree cost far more than the kernels of a small model).
//
// Pooling policy (PooledAllocator):
// * Size classes, so that dynamic shapes that differ by a few elements share
//   buffers: up to 256 bytes requests round up to a multiple of 64 (a cache
//   line), so that the scalars, shapes and short rows that a deep recursion
//   keeps alive cost a line each (with 256-byte classes, a 200,000-row list
//   program peaked at 398 MiB of resident memory instead of 289); up to a
//   page (4 KiB) to a multiple of 256 bytes (waste < 256 bytes); above a
//   page, to a quarter-power-of-two step, i.e. (2^k, 2^(k+1)] splits into
//   1.25, 1.5, 1.75 and 2 x 2^k (waste < 25% of the request, < 20% of the
//   buffer). TVM's exact-size buckets made every new shape a new buffer.
// * LIFO reuse within a class (the buffer freed last is warm in the cache).
// * Release policy: bytes held in the pool but unused are capped
//   (pool_limit). A Free that goes over the cap gives buffers back to the
//   device from the least recently used classes first, so inputs of ever
//   changing shapes cannot grow memory without bound. ReleaseAll empties the
//   pool, and a device allocation that fails empties it and retries once.
// * A buffer is aligned to the largest power of two that divides its class
//   size, at most kMaxAlignment (256, the cudaMalloc alignment): 64 bytes at
//   least, 256 above 256 bytes. A request for a larger alignment than its
//   size class has first rounds its size up to a multiple of that alignment,
//   so that one class never holds buffers of two alignments.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "nimble/vm/device.h"

namespace nimble {

// A block of device memory. `size` is the capacity actually reserved (the
// size class), at least the bytes requested.
struct Buffer {
  void* data = nullptr;
  size_t size = 0;
  Device device;
};

// Counters of one allocator; all byte counts are in buffer (class) sizes.
struct AllocatorStats {
  uint64_t requests = 0;       // Alloc calls that returned a buffer
  uint64_t pool_hits = 0;      // ... served from the pool
  uint64_t device_allocs = 0;  // ... that allocated fresh device memory
  uint64_t releases = 0;       // pooled buffers given back to the device
  size_t bytes_live = 0;       // handed out and not yet freed
  size_t peak_bytes_live = 0;  // the maximum of bytes_live so far
  size_t bytes_pooled = 0;     // freed and kept for reuse
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  // At least `bytes` bytes aligned to `alignment` (a power of two). Throws
  // nimble::Error when the device has no memory left or the request is invalid.
  virtual Buffer Alloc(size_t bytes, size_t alignment) = 0;
  // Returns a buffer obtained from Alloc of this allocator.
  virtual void Free(const Buffer& buffer) = 0;
  virtual AllocatorStats Stats() const = 0;
  // Gives every pooled (unused) buffer back to the device.
  virtual void ReleaseAll() = 0;
  // Starts peak_bytes_live afresh from bytes_live, to measure one phase.
  virtual void ResetPeak() = 0;
};

class PooledAllocator final : public Allocator {
 public:
  static constexpr size_t kMaxAlignment = 256;
  // The smallest class, and the alignment every buffer has.
  static constexpr size_t kMinAlignment = 64;
  static constexpr size_t kDefaultPoolLimit = size_t{1} << 30;

  // The pool of `device`, allocating through DeviceAPI::Get(device) (throws
  // when the device is not available).
  explicit PooledAllocator(Device device, size_t pool_limit = kDefaultPoolLimit);
  // The pool of `device`, allocating through `api` (not owned).
  PooledAllocator(Device device, DeviceAPI* api, size_t pool_limit);
  // Releases the pooled buffers; buffers still live must not be freed later.
  ~PooledAllocator() override;

  Buffer Alloc(size_t bytes, size_t alignment) override;
  void Free(const Buffer& buffer) override;
  AllocatorStats Stats() const override;
  void ReleaseAll() override;
  void ResetPeak() override;

  // Changes the cap on pooled bytes, releasing buffers now if it is exceeded.
  void SetPoolLimit(size_t bytes);
  Device device() const { return device_; }

  // The capacity of the buffer that serves a request of `bytes` bytes aligned
  // to `alignment`.
  static size_t ClassSize(size_t bytes, size_t alignment = kMinAlignment);
  // The alignment of every buffer of a class of `class_size` bytes.
  static size_t ClassAlignment(size_t class_size);

 private:
  // 4 classes up to 256 bytes and 15 more up to a page, then 4 per power of
  // two up to 2^63 bytes.
  static constexpr int kNumClasses = 19 + 4 * 51;

  struct SizeClass {
    int index;
    size_t size;
  };
  // Throws nimble::Error for an alignment that is not a power of two up to
  // kMaxAlignment, and for requests above the largest class.
  static SizeClass ClassOf(size_t bytes, size_t alignment);

  // The free buffers of one class, and its links in the list of non-empty
  // classes ordered by last use (indices into classes_, -1 for none).
  struct ClassPool {
    std::vector<void*> free;
    int newer = -1;
    int older = -1;
  };

  void* AllocFromDevice(size_t bytes);
  void AddLive(size_t bytes);
  void LinkNewest(int index);
  void Unlink(int index);
  // Pops buffers, least recently used classes first, until at most `limit`
  // bytes stay pooled; the caller frees the returned buffers after unlocking.
  std::vector<void*> EvictLocked(size_t limit);
  void FreeToDevice(const std::vector<void*>& buffers);

  const Device device_;
  DeviceAPI* const api_;
  mutable std::mutex mutex_;
  size_t pool_limit_;
  AllocatorStats stats_;
  std::array<ClassPool, kNumClasses> classes_;
  int newest_ = -1;
  int oldest_ = -1;
};

// The process-wide pooled allocator of `device` (created on first use and
// never destroyed, so tensors held by static objects can still be freed at
// exit). Throws nimble::Error when the device is not available.
Allocator* GetAllocator(Device device);

}  // namespace nimble
