#include <dirent.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "nimble/vm/dlpack.h"
#include "nimble/vm/error.h"
#include "nimble/vm/kernel.h"
#include "nimble/vm/kernel_library.h"
#include "nimble/vm/tensor.h"
#include "tests/error_of.h"

namespace nimble::vm {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::vector<std::byte> ReadBytes(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  EXPECT_TRUE(file) << path;
  const std::vector<char> chars((std::istreambuf_iterator<char>(file)),
                                std::istreambuf_iterator<char>());
  const auto* begin = reinterpret_cast<const std::byte*>(chars.data());
  return std::vector<std::byte>(begin, begin + chars.size());
}

std::vector<std::byte> TestLibraryBytes() {
  return ReadBytes(NIMBLE_TEST_KERNELS);
}

int CountOpenFds() {
  int count = 0;
  DIR* dir = opendir("/proc/self/fd");
  while (dirent* entry = readdir(dir)) count += entry->d_name[0] != '.';
  closedir(dir);
  return count;
}

int Succeed(void*, DLTensor* const*, int32_t) {
  return 0;
}

int FailWithMessage(void*, DLTensor* const*, int32_t) {
  NimbleKernelSetError("shapes (2,) and (3,) differ");
  return 1;
}

int FailSilently(void*, DLTensor* const*, int32_t num_args) {
  return 40 + num_args;
}

// Writes its bound float into the first element of its only tensor.
int WriteState(void* state, DLTensor* const* args, int32_t) {
  static_cast<float*>(args[0]->data)[0] = *static_cast<float*>(state);
  return 0;
}

KernelFactory FactoryOf(NimbleKernelFunc func) {
  return [func](const Attrs&) { return Kernel{"", func, nullptr}; };
}

TEST(KernelTest, SuccessfulCallReturns) {
  const Kernel kernel{"ok", Succeed, nullptr};
  EXPECT_NO_THROW(kernel(nullptr, 0));
}

TEST(KernelTest, FailureThrowsWithTheKernelsMessage) {
  const Kernel kernel{"add", FailWithMessage, nullptr};
  EXPECT_EQ(ErrorOf([&] { kernel(nullptr, 0); }), "kernel add: shapes (2,) and (3,) differ");
  EXPECT_THAT(TakeKernelError(), IsEmpty()) << "the message is consumed by the error";
}

TEST(KernelTest, FailureWithoutMessageReportsTheStatus) {
  const Kernel kernel{"quiet", FailSilently, nullptr};
  EXPECT_EQ(ErrorOf([&] { kernel(nullptr, 2); }), "kernel quiet: failed with status 42");
}

TEST(KernelTest, TakeKernelErrorClearsTheMessage) {
  NimbleKernelSetError("first");
  EXPECT_EQ(TakeKernelError(), "first");
  EXPECT_EQ(TakeKernelError(), "");
  NimbleKernelSetError(nullptr);
  EXPECT_EQ(TakeKernelError(), "");
}

TEST(KernelTest, ErrorMessagesArePerThread) {
  NimbleKernelSetError("main thread");
  std::string seen_by_other = "unset";
  std::thread other([&] {
    seen_by_other = TakeKernelError();
    NimbleKernelSetError("other thread");
  });
  other.join();
  EXPECT_EQ(seen_by_other, "");
  EXPECT_EQ(TakeKernelError(), "main thread");
}

TEST(KernelRegistryTest, RegisterBindAndList) {
  KernelRegistry registry;
  registry.Register("b_ok", FactoryOf(Succeed));
  registry.Register("a_fail", FactoryOf(FailSilently));
  EXPECT_TRUE(registry.Contains("b_ok"));
  EXPECT_FALSE(registry.Contains("c"));
  EXPECT_THAT(registry.Names(), ElementsAre("a_fail", "b_ok"));
  const Kernel kernel = registry.Bind("b_ok", Attrs());
  EXPECT_EQ(kernel.name, "b_ok") << "an unnamed kernel takes its registered name";
  EXPECT_EQ(kernel.func, &Succeed);
}

TEST(KernelRegistryTest, FactoryBindsAttributesIntoState) {
  KernelRegistry registry;
  registry.Register("fill", [](const Attrs& attrs) {
    auto value = std::make_shared<float>(static_cast<float>(attrs.GetFloat("value")));
    return Kernel{"fill", WriteState, value};
  });
  Attrs attrs;
  attrs.Set("value", 2.5);
  const Kernel kernel = registry.Bind("fill", attrs);
  const Tensor out = TensorNode::Empty({1}, DataType::Float32());
  DLTensor dl = AsDLTensor(out);
  DLTensor* args[] = {&dl};
  kernel(args, 1);
  EXPECT_EQ(out->data<float>()[0], 2.5f);
}

TEST(KernelRegistryTest, Errors) {
  KernelRegistry registry;
  registry.Register("k", FactoryOf(Succeed));
  EXPECT_THAT(ErrorOf([&] { registry.Register("k", FactoryOf(Succeed)); }),
              HasSubstr("kernel 'k' registered twice"));
  EXPECT_THAT(ErrorOf([&] { registry.Register("empty", KernelFactory()); }),
              HasSubstr("kernel 'empty' registered without a factory"));
  EXPECT_THAT(ErrorOf([&] { registry.Bind("missing", Attrs()); }),
              HasSubstr("unknown kernel 'missing'"));
  registry.Register("null", [](const Attrs&) { return Kernel{}; });
  EXPECT_THAT(ErrorOf([&] { registry.Bind("null", Attrs()); }),
              HasSubstr("kernel 'null': its factory returned no function"));
}

TEST(KernelRegistryTest, GlobalHoldsTheBuiltInKernels) {
  const KernelRegistry& global = KernelRegistry::Global();
  EXPECT_EQ(&global, &KernelRegistry::Global());
  EXPECT_FALSE(global.Names().empty());
}

TEST(KernelLibraryTest, LoadsFromBytesAndFindsKernels) {
  const KernelLibrary library(TestLibraryBytes());
  std::string reason;
  const NimbleKernelFunc add_one = library.Find("nimble_test_add_one", &reason);
  ASSERT_NE(add_one, nullptr) << reason;

  const Tensor in = TensorNode::FromVector<float>({3}, DataType::Float32(), {1, 2, 3});
  const Tensor out = TensorNode::Empty({3}, DataType::Float32());
  DLTensor dl_in = AsDLTensor(in);
  DLTensor dl_out = AsDLTensor(out);
  DLTensor* args[] = {&dl_in, &dl_out};
  Kernel{"nimble_test_add_one", add_one, nullptr}(args, 2);
  EXPECT_THAT(std::vector<float>(out->data<float>(), out->data<float>() + 3), ElementsAre(2, 3, 4));
}

TEST(KernelLibraryTest, LibraryKernelsReportErrorsThroughTheRuntime) {
  const KernelLibrary library(TestLibraryBytes());
  std::string reason;
  const Kernel kernel{"nimble_test_fail", library.Find("nimble_test_fail", &reason), nullptr};
  ASSERT_NE(kernel.func, nullptr) << reason;
  EXPECT_EQ(ErrorOf([&] { kernel(nullptr, 0); }),
            "kernel nimble_test_fail: the library kernel refuses");
}

TEST(KernelLibraryTest, MissingSymbolGivesTheLoadersReason) {
  const KernelLibrary library(TestLibraryBytes());
  std::string reason;
  EXPECT_EQ(library.Find("fused_add_multiply", &reason), nullptr);
  EXPECT_THAT(reason, HasSubstr("fused_add_multiply"));
}

TEST(KernelLibraryTest, RejectsBytesThatAreNotALibrary) {
  const std::vector<std::byte> garbage(100, std::byte{0x42});
  EXPECT_THAT(ErrorOf([&] { KernelLibrary library(garbage); }),
              HasSubstr("cannot load the executable's kernel library (100 bytes)"));
  EXPECT_THAT(ErrorOf([] { KernelLibrary library{std::vector<std::byte>()}; }),
              HasSubstr("(0 bytes): it is empty"));
}

TEST(KernelLibraryTest, LibrariesLoadSideBySideAndUnloadCleanly) {
  const std::vector<std::byte> bytes = TestLibraryBytes();
  const int fds_before = CountOpenFds();
  for (int round = 0; round < 20; ++round) {
    const KernelLibrary first(bytes);
    const KernelLibrary second(bytes);
    std::string reason;
    const NimbleKernelFunc a = first.Find("nimble_test_add_one", &reason);
    const NimbleKernelFunc b = second.Find("nimble_test_add_one", &reason);
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    EXPECT_NE(a, b) << "each library is its own copy";
  }
  EXPECT_EQ(CountOpenFds(), fds_before);
}

}  // namespace
}  // namespace nimble::vm
