#include "nimble/vm/device.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <vector>

#include "nimble/vm/allocator.h"
#include "nimble/vm/error.h"
#include "nimble/vm/tensor.h"

namespace nimble {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;

constexpr Device kCpu{};
constexpr Device kCuda0{DeviceType::kCUDA, 0};

TEST(DeviceTest, NamesDevices) {
  EXPECT_EQ(kCpu.ToString(), "cpu(0)");
  EXPECT_EQ((Device{DeviceType::kCUDA, 1}.ToString()), "cuda(1)");
  const DLDevice dl = Device{DeviceType::kCUDA, 2}.ToDLDevice();
  EXPECT_EQ(dl.device_type, kDLCUDA);
  EXPECT_EQ(dl.device_id, 2);
}

TEST(DeviceTest, CpuAllocatesAlignedAndCopies) {
  DeviceAPI* cpu = DeviceAPI::Get(kCpu);
  EXPECT_EQ(DeviceAPI::Get(kCpu), cpu);
  void* src = cpu->Alloc(100, 128);
  void* dst = cpu->Alloc(0, 64);  // a valid, freeable pointer even for 0 bytes
  ASSERT_NE(dst, nullptr);
  cpu->Free(dst);
  dst = cpu->Alloc(100, 64);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(src) % 128, 0u);
  std::memset(src, 7, 100);
  cpu->Copy(dst, kCpu, src, kCpu, 100);
  cpu->Synchronize();
  EXPECT_EQ(std::memcmp(dst, src, 100), 0);
  cpu->Free(src);
  cpu->Free(dst);
}

TEST(DeviceTest, CpuRejectsBadRequests) {
  DeviceAPI* cpu = DeviceAPI::Get(kCpu);
  EXPECT_THAT([&] { cpu->Alloc(64, 24); },
              ::testing::ThrowsMessage<Error>(HasSubstr("not a power of two")));
  EXPECT_THAT([&] { cpu->Alloc(size_t{1} << 62, 64); },
              ::testing::ThrowsMessage<Error>(HasSubstr("out of memory")));
  char a = 0, b = 0;
  EXPECT_THAT([&] { cpu->Copy(&a, kCpu, &b, kCuda0, 1); },
              ::testing::ThrowsMessage<Error>(HasSubstr("cannot copy from cuda(0) to cpu(0)")));
  EXPECT_THAT(
      [] {
        DeviceAPI::Get(Device{DeviceType::kCPU, 1});
      },
      ::testing::ThrowsMessage<Error>(HasSubstr("no device cpu(1)")));
  EXPECT_THAT(
      [] {
        DeviceAPI::Get(Device{static_cast<DeviceType>(4), 0});
      },
      ::testing::ThrowsMessage<Error>(HasSubstr("unsupported device type 4")));
}

TEST(DeviceTest, TensorCopyToCpuIsADeepCopy) {
  Tensor tensor = TensorNode::FromVector<float>({2, 3}, DataType::Float32(), {1, 2, 3, 4, 5, 6});
  Tensor copy = tensor->SliceRows(1, 2)->CopyTo(kCpu);
  EXPECT_EQ(copy->device(), kCpu);
  EXPECT_EQ(copy->shape(), (Shape{1, 3}));
  EXPECT_NE(copy->storage(), tensor->storage());
  EXPECT_EQ(copy->GetAsDouble(2), 6.0);
  tensor->SetFromDouble(5, 60);
  EXPECT_EQ(copy->GetAsDouble(2), 6.0);
}

// The CUDA device either works (machines with a GPU and a driver) or fails with
// an Error saying why; never a crash or a silent fallback to the CPU.
TEST(DeviceTest, CudaRoundTripsOrSaysWhyItIsMissing) {
  DeviceAPI* cuda = nullptr;
  try {
    cuda = DeviceAPI::Get(kCuda0);
  } catch (const Error& e) {
    std::printf("CUDA unavailable: %s\n", e.what());
    EXPECT_THAT(e.what(), HasSubstr("no CUDA device: "));
    EXPECT_THAT(
        e.what(),
        AnyOf(HasSubstr("built without CUDA support"), HasSubstr("cannot load the CUDA module"),
              HasSubstr("cudaGetDeviceCount failed"), HasSubstr("reports 0 GPUs")));
    // The answer is remembered and reaches every way in.
    EXPECT_THAT([] { DeviceAPI::Get(kCuda0); },
                ::testing::ThrowsMessage<Error>(HasSubstr("no CUDA device")));
    EXPECT_THAT([] { GetAllocator(kCuda0); },
                ::testing::ThrowsMessage<Error>(HasSubstr("no CUDA device")));
    Tensor tensor = TensorNode::Empty({4}, DataType::Float32());
    EXPECT_THAT([&] { tensor->CopyTo(kCuda0); },
                ::testing::ThrowsMessage<Error>(HasSubstr("no CUDA device")));
    return;
  }
  EXPECT_THAT(
      [] {
        DeviceAPI::Get(Device{DeviceType::kCUDA, 1000});
      },
      ::testing::ThrowsMessage<Error>(HasSubstr("cuda(1000) does not exist")));

  // Raw API: host -> device -> device -> host.
  std::vector<int32_t> host(1000), back(1000);
  for (int i = 0; i < 1000; ++i) host[i] = i * 3;
  void* a = cuda->Alloc(4000, 256);
  void* b = cuda->Alloc(4000, 256);
  cuda->Copy(a, kCuda0, host.data(), kCpu, 4000);
  cuda->Copy(b, kCuda0, a, kCuda0, 4000);
  cuda->Synchronize();
  cuda->Copy(back.data(), kCpu, b, kCuda0, 4000);
  EXPECT_EQ(back, host);
  cuda->Free(a);
  cuda->Free(b);

  // A copy from pageable host memory does not wait for the GPU, yet the host
  // may overwrite its buffer at once: the device still receives the old bytes,
  // also behind 256 MiB of queued work and for a copy staged in pieces.
  constexpr size_t kBusyBytes = size_t{256} << 20;
  void* busy_from = cuda->Alloc(kBusyBytes, 256);
  void* busy_to = cuda->Alloc(kBusyBytes, 256);
  for (const size_t count : {size_t{1}, size_t{1000}, size_t{16} << 20}) {
    std::vector<int32_t> source(count), expected(count), received(count);
    std::iota(expected.begin(), expected.end(), 7);
    source = expected;
    void* data = cuda->Alloc(count * sizeof(int32_t), 256);
    cuda->Copy(busy_to, kCuda0, busy_from, kCuda0, kBusyBytes);
    cuda->Copy(data, kCuda0, source.data(), kCpu, count * sizeof(int32_t));
    std::fill(source.begin(), source.end(), -1);
    cuda->Copy(received.data(), kCpu, data, kCuda0, count * sizeof(int32_t));
    EXPECT_EQ(received, expected) << count << " elements";
    cuda->Free(data);
  }
  cuda->Free(busy_from);
  cuda->Free(busy_to);

  // Tensors through the CUDA pool.
  Tensor tensor = TensorNode::FromVector<float>({2, 3}, DataType::Float32(), {1, 2, 3, 4, 5, 6});
  Tensor on_gpu = tensor->SliceRows(1, 2)->CopyTo(kCuda0);
  EXPECT_EQ(on_gpu->device(), kCuda0);
  Tensor gpu_copy = on_gpu->Copy();
  EXPECT_EQ(gpu_copy->device(), kCuda0);
  Tensor back_on_cpu = gpu_copy->CopyTo(kCpu);
  EXPECT_EQ(back_on_cpu->shape(), (Shape{1, 3}));
  EXPECT_EQ(back_on_cpu->GetAsDouble(0), 4.0);
  EXPECT_EQ(back_on_cpu->GetAsDouble(2), 6.0);
  // Two live tensors of three floats, each in the pool's smallest class.
  EXPECT_EQ(GetAllocator(kCuda0)->Stats().bytes_live,
            2 * PooledAllocator::ClassSize(3 * sizeof(float)));
}

// NIMBLE_CUDA_MODULE overrides where the module is loaded from. The loader
// runs once per process, so this runs in a fresh child process.
TEST(DeviceDeathTest, ModuleOverrideNamesTheFileThatFailed) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("NIMBLE_CUDA_MODULE", "/nonexistent/libnimble_cuda.so", 1);
        try {
          DeviceAPI::Get(kCuda0);
        } catch (const Error& e) {
          std::fprintf(stderr, "%s\n", e.what());
          std::exit(0);
        }
        std::exit(1);
      },
      ::testing::ExitedWithCode(0),
      "no CUDA device: (nimble was built without CUDA support|cannot load the CUDA module "
      "/nonexistent/libnimble_cuda.so)");
}

}  // namespace
}  // namespace nimble
