#include "nimble/vm/allocator.h"

#include <algorithm>
#include <bit>
#include <map>
#include <utility>

#include "nimble/vm/error.h"

namespace nimble {
namespace {

constexpr size_t kPageSize = 4096;
constexpr int kLog2PageSize = 12;
constexpr size_t kLineStep = PooledAllocator::kMinAlignment;
constexpr size_t kLineClassesEnd = 256;
constexpr int kLineClasses = kLineClassesEnd / kLineStep;
constexpr size_t kSmallStep = 256;
constexpr int kSmallClasses = kLineClasses + (kPageSize - kLineClassesEnd) / kSmallStep;
constexpr size_t kLargestClass = size_t{1} << 63;

// The inverse of PooledAllocator::ClassOf: the size of class `index`.
size_t ClassSizeOfIndex(int index) {
  if (index < kLineClasses) return (index + 1) * kLineStep;
  if (index < kSmallClasses) return (index - kLineClasses + 2) * kSmallStep;
  const size_t base = size_t{1} << (kLog2PageSize + (index - kSmallClasses) / 4);
  return base + ((index - kSmallClasses) % 4 + 1) * (base >> 2);
}

}  // namespace

PooledAllocator::SizeClass PooledAllocator::ClassOf(size_t bytes, size_t alignment) {
  if (!std::has_single_bit(alignment) || alignment > kMaxAlignment) {
    throw Error("unsupported alignment " + std::to_string(alignment) +
                " (expected a power of two up to " + std::to_string(kMaxAlignment) + ")");
  }
  if (bytes > kLargestClass) {
    throw Error("cannot allocate " + std::to_string(bytes) + " bytes: larger than any device");
  }
  // Zero bytes take the smallest class; a multiple of the alignment lands in
  // a class at least that aligned.
  bytes = std::max<size_t>(bytes, 1);
  if (alignment > kMinAlignment) bytes = (bytes + alignment - 1) / alignment * alignment;
  if (bytes <= kLineClassesEnd) {
    const size_t steps = (bytes + kLineStep - 1) / kLineStep;
    return {static_cast<int>(steps) - 1, steps * kLineStep};
  }
  if (bytes <= kPageSize) {
    const size_t steps = (bytes + kSmallStep - 1) / kSmallStep;
    return {kLineClasses + static_cast<int>(steps) - 2, steps * kSmallStep};
  }
  // 2^octave < bytes <= 2^(octave+1), split into four steps of 2^(octave-2).
  const int octave = std::bit_width(bytes - 1) - 1;
  const size_t base = size_t{1} << octave;
  const size_t step = base >> 2;
  const size_t steps = (bytes - 1 - base) / step + 1;
  return {kSmallClasses + 4 * (octave - kLog2PageSize) + static_cast<int>(steps) - 1,
          base + steps * step};
}

size_t PooledAllocator::ClassSize(size_t bytes, size_t alignment) {
  return ClassOf(bytes, alignment).size;
}

size_t PooledAllocator::ClassAlignment(size_t class_size) {
  return std::min(kMaxAlignment, class_size & (~class_size + 1));
}

PooledAllocator::PooledAllocator(Device device, size_t pool_limit)
    : PooledAllocator(device, DeviceAPI::Get(device), pool_limit) {}

PooledAllocator::PooledAllocator(Device device, DeviceAPI* api, size_t pool_limit)
    : device_(device), api_(api), pool_limit_(pool_limit) {}

PooledAllocator::~PooledAllocator() {
  ReleaseAll();
}

Buffer PooledAllocator::Alloc(size_t bytes, size_t alignment) {
  const SizeClass size_class = ClassOf(bytes, alignment);
  {
    std::lock_guard lock(mutex_);
    ClassPool& pool = classes_[size_class.index];
    if (!pool.free.empty()) {
      void* data = pool.free.back();
      pool.free.pop_back();
      Unlink(size_class.index);
      if (!pool.free.empty()) LinkNewest(size_class.index);
      ++stats_.requests;
      ++stats_.pool_hits;
      stats_.bytes_pooled -= size_class.size;
      AddLive(size_class.size);
      return {data, size_class.size, device_};
    }
  }
  void* data = AllocFromDevice(size_class.size);
  std::lock_guard lock(mutex_);
  ++stats_.requests;
  ++stats_.device_allocs;
  AddLive(size_class.size);
  return {data, size_class.size, device_};
}

void* PooledAllocator::AllocFromDevice(size_t bytes) {
  try {
    return api_->Alloc(bytes, ClassAlignment(bytes));
  } catch (const Error&) {
    // The device may be full of buffers this pool keeps for other classes.
    ReleaseAll();
    return api_->Alloc(bytes, ClassAlignment(bytes));
  }
}

void PooledAllocator::AddLive(size_t bytes) {
  stats_.bytes_live += bytes;
  stats_.peak_bytes_live = std::max(stats_.peak_bytes_live, stats_.bytes_live);
}

void PooledAllocator::Free(const Buffer& buffer) {
  const SizeClass size_class = ClassOf(buffer.size, kMinAlignment);
  std::vector<void*> evicted;
  {
    std::lock_guard lock(mutex_);
    ClassPool& pool = classes_[size_class.index];
    if (!pool.free.empty()) Unlink(size_class.index);
    pool.free.push_back(buffer.data);
    LinkNewest(size_class.index);
    stats_.bytes_live -= size_class.size;
    stats_.bytes_pooled += size_class.size;
    if (stats_.bytes_pooled > pool_limit_) evicted = EvictLocked(pool_limit_);
  }
  FreeToDevice(evicted);
}

AllocatorStats PooledAllocator::Stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void PooledAllocator::ResetPeak() {
  std::lock_guard lock(mutex_);
  stats_.peak_bytes_live = stats_.bytes_live;
}

void PooledAllocator::ReleaseAll() {
  std::vector<void*> evicted;
  {
    std::lock_guard lock(mutex_);
    evicted = EvictLocked(0);
  }
  FreeToDevice(evicted);
}

void PooledAllocator::SetPoolLimit(size_t bytes) {
  std::vector<void*> evicted;
  {
    std::lock_guard lock(mutex_);
    pool_limit_ = bytes;
    evicted = EvictLocked(pool_limit_);
  }
  FreeToDevice(evicted);
}

std::vector<void*> PooledAllocator::EvictLocked(size_t limit) {
  std::vector<void*> evicted;
  while (stats_.bytes_pooled > limit) {
    const int index = oldest_;
    ClassPool& pool = classes_[index];
    evicted.push_back(pool.free.back());
    pool.free.pop_back();
    if (pool.free.empty()) Unlink(index);
    stats_.bytes_pooled -= ClassSizeOfIndex(index);
    ++stats_.releases;
  }
  return evicted;
}

void PooledAllocator::FreeToDevice(const std::vector<void*>& buffers) {
  for (void* data : buffers) api_->Free(data);
}

void PooledAllocator::LinkNewest(int index) {
  ClassPool& pool = classes_[index];
  pool.older = newest_;
  pool.newer = -1;
  if (newest_ >= 0) classes_[newest_].newer = index;
  newest_ = index;
  if (oldest_ < 0) oldest_ = index;
}

void PooledAllocator::Unlink(int index) {
  ClassPool& pool = classes_[index];
  (pool.newer >= 0 ? classes_[pool.newer].older : newest_) = pool.older;
  (pool.older >= 0 ? classes_[pool.older].newer : oldest_) = pool.newer;
  pool.newer = pool.older = -1;
}

Allocator* GetAllocator(Device device) {
  static PooledAllocator* const cpu = new PooledAllocator(Device{});
  if (device == Device{}) return cpu;
  static std::mutex mutex;
  static auto* const others = new std::map<std::pair<DeviceType, int32_t>, PooledAllocator*>();
  std::lock_guard lock(mutex);
  PooledAllocator*& allocator = (*others)[{device.type, device.id}];
  if (!allocator) allocator = new PooledAllocator(device);
  return allocator;
}

}  // namespace nimble
