#include "nimble/vm/allocator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <thread>
#include <vector>

#include "nimble/vm/error.h"
#include "nimble/vm/tensor.h"

namespace nimble {
namespace {

using ::testing::HasSubstr;

constexpr Device kCpu{};

// A CPU device that counts its allocations and refuses to go over a budget,
// to observe what the pool asks of the device.
class CountingDeviceAPI final : public DeviceAPI {
 public:
  explicit CountingDeviceAPI(size_t budget = SIZE_MAX) : budget_(budget) {}

  void* Alloc(size_t bytes, size_t alignment) override {
    if (bytes > budget_ - in_use_) throw Error("out of memory");
    void* data = DeviceAPI::Get(kCpu)->Alloc(bytes, alignment);
    sizes_[data] = bytes;
    in_use_ += bytes;
    ++allocs_;
    return data;
  }
  void Free(void* data) override {
    in_use_ -= sizes_.at(data);
    sizes_.erase(data);
    ++frees_;
    DeviceAPI::Get(kCpu)->Free(data);
  }
  void Copy(void* dst, Device dst_device, const void* src, Device src_device,
            size_t bytes) override {
    DeviceAPI::Get(kCpu)->Copy(dst, dst_device, src, src_device, bytes);
  }
  void Synchronize() override {}

  int allocs_ = 0;
  int frees_ = 0;

 private:
  size_t budget_;
  size_t in_use_ = 0;
  std::map<void*, size_t> sizes_;
};

TEST(AllocatorTest, SizeClassesRoundToLinesThenQuarterPagesThenQuarterPowers) {
  EXPECT_EQ(PooledAllocator::ClassSize(0), 64u);
  EXPECT_EQ(PooledAllocator::ClassSize(1), 64u);
  EXPECT_EQ(PooledAllocator::ClassSize(64), 64u);
  EXPECT_EQ(PooledAllocator::ClassSize(65), 128u);
  EXPECT_EQ(PooledAllocator::ClassSize(129), 192u);
  EXPECT_EQ(PooledAllocator::ClassSize(256), 256u);
  EXPECT_EQ(PooledAllocator::ClassSize(257), 512u);
  EXPECT_EQ(PooledAllocator::ClassSize(3000), 3072u);
  EXPECT_EQ(PooledAllocator::ClassSize(4095), 4096u);
  EXPECT_EQ(PooledAllocator::ClassSize(4096), 4096u);
  EXPECT_EQ(PooledAllocator::ClassSize(4097), 5120u);
  EXPECT_EQ(PooledAllocator::ClassSize(6000), 6144u);
  EXPECT_EQ(PooledAllocator::ClassSize(8192), 8192u);
  EXPECT_EQ(PooledAllocator::ClassSize(8193), 10240u);
  EXPECT_EQ(PooledAllocator::ClassSize(1000000), 1048576u);
  EXPECT_EQ(PooledAllocator::ClassSize(1048577), 1310720u);
  // Above a page the waste stays under a quarter of the request.
  for (size_t bytes = 4097; bytes < (size_t{1} << 40); bytes = bytes * 5 / 3 + 7) {
    const size_t size = PooledAllocator::ClassSize(bytes);
    EXPECT_GE(size, bytes);
    EXPECT_LT(size - bytes, bytes / 4) << bytes;
    EXPECT_EQ(PooledAllocator::ClassSize(size), size) << bytes;
  }
}

TEST(AllocatorTest, ALargerAlignmentRoundsTheSizeToAMultipleOfIt) {
  EXPECT_EQ(PooledAllocator::ClassSize(100, 64), 128u);
  EXPECT_EQ(PooledAllocator::ClassSize(100, 128), 128u);
  EXPECT_EQ(PooledAllocator::ClassSize(100, 256), 256u);
  EXPECT_EQ(PooledAllocator::ClassSize(150, 128), 256u);
  EXPECT_EQ(PooledAllocator::ClassSize(300, 256), 512u);
  EXPECT_EQ(PooledAllocator::ClassSize(4097, 256), 5120u);
  EXPECT_EQ(PooledAllocator::ClassAlignment(64), 64u);
  EXPECT_EQ(PooledAllocator::ClassAlignment(192), 64u);
  EXPECT_EQ(PooledAllocator::ClassAlignment(128), 128u);
  EXPECT_EQ(PooledAllocator::ClassAlignment(256), 256u);
  EXPECT_EQ(PooledAllocator::ClassAlignment(768), 256u);
  EXPECT_EQ(PooledAllocator::ClassAlignment(4096), 256u);
  EXPECT_EQ(PooledAllocator::ClassAlignment(5120), 256u);
}

TEST(AllocatorTest, EveryBufferHasTheAlignmentItsRequestAskedFor) {
  CountingDeviceAPI device;
  PooledAllocator allocator(kCpu, &device, 1 << 20);
  std::vector<Buffer> held;
  for (size_t alignment = 1; alignment <= PooledAllocator::kMaxAlignment; alignment *= 2) {
    for (size_t bytes : {0, 1, 17, 64, 100, 192, 255, 300, 1000, 4096, 4097, 70000}) {
      const Buffer buffer = allocator.Alloc(bytes, alignment);
      EXPECT_GE(buffer.size, bytes);
      const uintptr_t address = reinterpret_cast<uintptr_t>(buffer.data);
      EXPECT_EQ(address % std::max(alignment, PooledAllocator::kMinAlignment), 0u)
          << bytes << " bytes aligned to " << alignment;
      EXPECT_EQ(address % PooledAllocator::ClassAlignment(buffer.size), 0u) << buffer.size;
      held.push_back(buffer);
    }
  }
  for (const Buffer& buffer : held) allocator.Free(buffer);
  // Releasing gives back exactly what every class held.
  allocator.ReleaseAll();
  EXPECT_EQ(allocator.Stats().bytes_pooled, 0u);
  EXPECT_EQ(device.frees_, device.allocs_);
}

TEST(AllocatorTest, FreedBufferOfSameClassIsReused) {
  CountingDeviceAPI device;
  PooledAllocator allocator(kCpu, &device, 1 << 20);
  Buffer first = allocator.Alloc(5000, 64);
  EXPECT_EQ(first.size, 5120u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(first.data) % PooledAllocator::kMaxAlignment, 0u);
  allocator.Free(first);
  Buffer second = allocator.Alloc(4500, 256);  // another size, same class
  EXPECT_EQ(second.data, first.data);
  EXPECT_EQ(device.allocs_, 1);
  allocator.Free(second);
}

TEST(AllocatorTest, ReuseIsLastInFirstOut) {
  CountingDeviceAPI device;
  PooledAllocator allocator(kCpu, &device, 1 << 20);
  Buffer a = allocator.Alloc(100, 64);
  Buffer b = allocator.Alloc(100, 64);
  allocator.Free(a);
  allocator.Free(b);
  EXPECT_EQ(allocator.Alloc(100, 64).data, b.data);
  EXPECT_EQ(allocator.Alloc(100, 64).data, a.data);
  allocator.Free(a);
  allocator.Free(b);
}

TEST(AllocatorTest, CountersFollowAScriptedSequence) {
  CountingDeviceAPI device;
  PooledAllocator allocator(kCpu, &device, 1 << 20);
  Buffer a = allocator.Alloc(1000, 64);   // fresh, 1024
  Buffer b = allocator.Alloc(10000, 64);  // fresh, 10240
  allocator.Free(a);
  Buffer c = allocator.Alloc(970, 64);  // pool hit, 1024
  Buffer d = allocator.Alloc(300, 64);  // fresh, 512
  allocator.Free(b);
  allocator.Free(c);
  allocator.Free(d);
  AllocatorStats stats = allocator.Stats();
  EXPECT_EQ(stats.requests, 4u);
  EXPECT_EQ(stats.pool_hits, 1u);
  EXPECT_EQ(stats.device_allocs, 3u);
  EXPECT_EQ(stats.releases, 0u);
  EXPECT_EQ(stats.bytes_live, 0u);
  EXPECT_EQ(stats.peak_bytes_live, 1024u + 10240u + 512u);
  EXPECT_EQ(stats.bytes_pooled, 1024u + 10240u + 512u);
  EXPECT_EQ(device.allocs_, 3);

  allocator.ReleaseAll();
  stats = allocator.Stats();
  EXPECT_EQ(stats.releases, 3u);
  EXPECT_EQ(stats.bytes_pooled, 0u);
  EXPECT_EQ(device.frees_, 3);
  Buffer e = allocator.Alloc(1000, 64);  // the pool is empty again
  EXPECT_EQ(allocator.Stats().device_allocs, 4u);
  EXPECT_EQ(allocator.Stats().bytes_live, 1024u);
  allocator.Free(e);
}

TEST(AllocatorTest, PeakCountsLiveBytesOnly) {
  CountingDeviceAPI device;
  PooledAllocator allocator(kCpu, &device, 1 << 20);
  Buffer a = allocator.Alloc(4096, 64);
  Buffer b = allocator.Alloc(4096, 64);
  allocator.Free(a);
  allocator.Free(b);
  Buffer c = allocator.Alloc(4096, 64);
  EXPECT_EQ(allocator.Stats().bytes_live, 4096u);
  EXPECT_EQ(allocator.Stats().peak_bytes_live, 8192u);
  // A new phase measures its own peak.
  allocator.ResetPeak();
  EXPECT_EQ(allocator.Stats().peak_bytes_live, 4096u);
  Buffer d = allocator.Alloc(100, 64);
  EXPECT_EQ(allocator.Stats().peak_bytes_live, 4096u + PooledAllocator::ClassSize(100));
  allocator.Free(c);
  allocator.Free(d);
}

TEST(AllocatorTest, PoolStaysUnderItsCapWithManyDistinctSizes) {
  CountingDeviceAPI device;
  constexpr size_t kLimit = 1 << 20;
  PooledAllocator allocator(kCpu, &device, kLimit);
  // Shapes that change on every run: each size is a new class for a while.
  for (size_t run = 0; run < 200; ++run) {
    const size_t bytes = 4096 + run * 9973;
    Buffer input = allocator.Alloc(bytes, 64);
    Buffer output = allocator.Alloc(2 * bytes, 64);
    allocator.Free(input);
    allocator.Free(output);
    ASSERT_LE(allocator.Stats().bytes_pooled, kLimit);
  }
  const AllocatorStats stats = allocator.Stats();
  EXPECT_GT(stats.releases, 0u);
  EXPECT_EQ(stats.device_allocs - stats.releases,
            static_cast<uint64_t>(device.allocs_ - device.frees_));
  EXPECT_GT(stats.pool_hits, 0u);  // neighbouring sizes still share classes
  allocator.ReleaseAll();
  EXPECT_EQ(device.frees_, device.allocs_);  // the pool lost track of no buffer
}

TEST(AllocatorTest, EvictsLeastRecentlyUsedClassFirst) {
  CountingDeviceAPI device;
  PooledAllocator allocator(kCpu, &device, 3 * 4096);
  Buffer old_small = allocator.Alloc(4096, 64);
  Buffer recent = allocator.Alloc(8192, 64);
  allocator.Free(old_small);
  allocator.Free(recent);
  // Pooled 12 KiB (at the cap); another 2 KiB buffer makes 14 KiB and evicts
  // the 4 KiB class (least recently used), not the 8 KiB one.
  Buffer third = allocator.Alloc(2048, 64);
  allocator.Free(third);
  EXPECT_EQ(allocator.Stats().releases, 1u);
  EXPECT_EQ(allocator.Stats().bytes_pooled, 8192u + 2048u);
  EXPECT_EQ(allocator.Alloc(8192, 64).data, recent.data);
  allocator.Free(recent);
}

TEST(AllocatorTest, SettingASmallerLimitReleasesAtOnce) {
  CountingDeviceAPI device;
  PooledAllocator allocator(kCpu, &device, 1 << 20);
  allocator.Free(allocator.Alloc(100000, 64));
  EXPECT_GT(allocator.Stats().bytes_pooled, 0u);
  allocator.SetPoolLimit(0);
  EXPECT_EQ(allocator.Stats().bytes_pooled, 0u);
  EXPECT_EQ(device.frees_, 1);
}

TEST(AllocatorTest, DeviceOutOfMemoryReleasesThePoolAndRetries) {
  CountingDeviceAPI device(/*budget=*/3 * 65536);
  PooledAllocator allocator(kCpu, &device, 1 << 30);
  allocator.Free(allocator.Alloc(65536, 64));
  allocator.Free(allocator.Alloc(2 * 65536, 64));
  // Both pooled buffers use the whole budget; a third class needs them back.
  Buffer buffer = allocator.Alloc(40000, 64);
  EXPECT_EQ(allocator.Stats().releases, 2u);
  allocator.Free(buffer);
  EXPECT_THAT([&] { allocator.Alloc(size_t{1} << 40, 64); },
              ::testing::ThrowsMessage<Error>(HasSubstr("out of memory")));
}

TEST(AllocatorTest, RejectsBadAlignment) {
  PooledAllocator allocator(kCpu);
  EXPECT_THAT([&] { allocator.Alloc(64, 48); },
              ::testing::ThrowsMessage<Error>(HasSubstr("unsupported alignment 48")));
  EXPECT_THAT([&] { allocator.Alloc(64, 4096); },
              ::testing::ThrowsMessage<Error>(HasSubstr("unsupported alignment 4096")));
}

TEST(AllocatorTest, TwoThreadsShareOnePool) {
  PooledAllocator allocator(kCpu);
  constexpr int kIterations = 20000;
  auto work = [&](size_t seed) {
    std::vector<Buffer> held;
    for (int i = 0; i < kIterations; ++i) {
      Buffer buffer = allocator.Alloc((seed * 7919 + i * 613) % 50000, 64);
      static_cast<unsigned char*>(buffer.data)[0] = static_cast<unsigned char>(i);
      held.push_back(buffer);
      if (held.size() > 4) {
        allocator.Free(held.front());
        held.erase(held.begin());
      }
    }
    for (const Buffer& buffer : held) allocator.Free(buffer);
  };
  std::thread first(work, 1);
  std::thread second(work, 2);
  first.join();
  second.join();
  const AllocatorStats stats = allocator.Stats();
  EXPECT_EQ(stats.requests, 2u * kIterations);
  EXPECT_EQ(stats.pool_hits + stats.device_allocs, stats.requests);
  EXPECT_EQ(stats.bytes_live, 0u);
  EXPECT_GT(stats.pool_hits, stats.device_allocs);
}

TEST(AllocatorTest, GlobalAllocatorIsPerDevice) {
  Allocator* cpu = GetAllocator(kCpu);
  EXPECT_EQ(GetAllocator(kCpu), cpu);
  EXPECT_THROW(GetAllocator(Device{DeviceType::kCPU, 3}), Error);
}

TEST(AllocatorTest, StoragesComeFromTheCpuPool) {
  const AllocatorStats before = GetAllocator(kCpu)->Stats();
  {
    Tensor tensor = TensorNode::Empty({123, 7}, DataType::Float32());
    EXPECT_EQ(tensor->device(), kCpu);
    EXPECT_EQ(tensor->storage()->size(), 123u * 7 * 4);
    EXPECT_GE(tensor->storage()->buffer().size, tensor->storage()->size());
    EXPECT_EQ(GetAllocator(kCpu)->Stats().requests, before.requests + 1);
    EXPECT_EQ(tensor->GetAsDouble(123 * 7 - 1), 0.0);
    tensor->SetFromDouble(0, 5);
  }
  // Reused through the pool, and still zero-filled for Empty.
  Tensor again = TensorNode::Empty({123, 7}, DataType::Float32());
  EXPECT_EQ(again->GetAsDouble(0), 0.0);
  EXPECT_GT(GetAllocator(kCpu)->Stats().pool_hits, before.pool_hits);
}

TEST(AllocatorTest, AllocateSkipsTheMemset) {
  Storage storage = StorageNode::Allocate(kCpu, 1000);
  EXPECT_EQ(storage->size(), 1000u);
  EXPECT_EQ(storage->device(), kCpu);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(storage->data()) % StorageNode::kAlignment, 0u);
  Tensor view = Make<TensorNode>(storage, 40, Shape{10, 24}, DataType::Float32());
  EXPECT_EQ(view->raw_data(), storage->data() + 40);
  EXPECT_THROW(Make<TensorNode>(storage, 41, Shape{10, 24}, DataType::Float32()), Error);
}

}  // namespace
}  // namespace nimble
