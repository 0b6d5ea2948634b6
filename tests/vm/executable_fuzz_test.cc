// Seeded random mutations of valid executable files. Every Load must either
// succeed or throw nimble::Error naming the executable; this suite is built
// with AddressSanitizer and UBSan over the loader's own sources
// (tests/meson.build), so an out-of-bounds read, an absurd allocation or
// undefined behaviour while loading fails it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "nimble/vm/error.h"
#include "nimble/vm/executable.h"
#include "tests/vm/executable_test_util.h"

namespace nimble::vm::testing {
namespace {

using I = Instruction;

class Mutator {
 public:
  explicit Mutator(uint64_t seed) : random_(seed) {}

  size_t Below(size_t bound) {
    return std::uniform_int_distribution<size_t>(0, bound - 1)(random_);
  }

  // Applies one to four random edits to `bytes`.
  void Mutate(Bytes& bytes) {
    const size_t edits = 1 + Below(4);
    for (size_t i = 0; i < edits; ++i) Edit(bytes);
  }

 private:
  // Values that tend to break counts, lengths and varints.
  static constexpr uint64_t kInteresting[] = {0,
                                              1,
                                              2,
                                              0x7f,
                                              0x80,
                                              0xff,
                                              0x7fff,
                                              0xffff,
                                              0x7fffffff,
                                              0x80000000,
                                              0xffffffff,
                                              0xffffffffffffffff,
                                              0x8000000000000000,
                                              0x7fffffffffffffff};

  void Edit(Bytes& bytes) {
    if (bytes.empty()) {
      bytes.push_back(static_cast<std::byte>(Below(256)));
      return;
    }
    const size_t at = Below(bytes.size());
    switch (Below(7)) {
      case 0:  // flip a bit
        bytes[at] ^= static_cast<std::byte>(1u << Below(8));
        return;
      case 1:  // overwrite a byte
        bytes[at] = static_cast<std::byte>(Below(256));
        return;
      case 2: {  // overwrite 1, 2, 4 or 8 bytes with an interesting little-endian value
        const uint64_t value = kInteresting[Below(std::size(kInteresting))];
        const size_t width = std::min<size_t>(size_t{1} << Below(4), bytes.size() - at);
        WriteLE(bytes, at, width, value);
        return;
      }
      case 3:  // truncate
        bytes.resize(at);
        return;
      case 4: {  // insert random bytes
        Bytes inserted(1 + Below(16));
        for (std::byte& byte : inserted) byte = static_cast<std::byte>(Below(256));
        bytes.insert(bytes.begin() + static_cast<ptrdiff_t>(at), inserted.begin(), inserted.end());
        return;
      }
      case 5:  // delete a range
        bytes.erase(
            bytes.begin() + static_cast<ptrdiff_t>(at),
            bytes.begin() + static_cast<ptrdiff_t>(std::min(bytes.size(), at + 1 + Below(16))));
        return;
      default: {  // duplicate a range
        const Bytes copy(
            bytes.begin() + static_cast<ptrdiff_t>(at),
            bytes.begin() + static_cast<ptrdiff_t>(std::min(bytes.size(), at + 1 + Below(32))));
        bytes.insert(bytes.begin() + static_cast<ptrdiff_t>(Below(bytes.size())), copy.begin(),
                     copy.end());
        return;
      }
    }
  }

  std::mt19937_64 random_;
};

struct Outcome {
  int loaded = 0;
  int rejected = 0;
  int unchanged = 0;  // mutations that left the file as it was (FuzzFile)
};

// Loads `bytes`; a file that loads must save to bytes that load and save
// back identically (compared as bytes, so NaN attributes compare too), and
// must print. Anything but success or nimble::Error fails the test. The loader
// reads an exact-size heap copy, so a read one byte past the end lands in
// ASan's redzone rather than in a vector's spare capacity.
void Check(const Bytes& bytes, uint64_t seed, Outcome& outcome) {
  const std::unique_ptr<std::byte[]> exact(new std::byte[bytes.size()]);
  std::copy(bytes.begin(), bytes.end(), exact.get());
  try {
    const Executable exe = Executable::Load(std::span(exact.get(), bytes.size()));
    ++outcome.loaded;
    const Bytes saved = exe.Save();
    EXPECT_EQ(Executable::Load(saved).Save(), saved) << "seed " << seed;
    EXPECT_FALSE(ExecutableToString(exe, true).empty());
  } catch (const Error& error) {
    ++outcome.rejected;
    EXPECT_THAT(error.what(), ::testing::StartsWith("executable: ")) << "seed " << seed;
  } catch (const std::exception& error) {
    ADD_FAILURE() << "seed " << seed << ": Load threw a non-nimble exception: " << error.what();
  }
}

// Mutates the whole file.
Outcome FuzzFile(const Bytes& seed_file, uint64_t first_seed, int cases) {
  Outcome outcome;
  for (int i = 0; i < cases; ++i) {
    const uint64_t seed = first_seed + static_cast<uint64_t>(i);
    Mutator mutator(seed);
    Bytes bytes = seed_file;
    mutator.Mutate(bytes);
    if (bytes == seed_file) ++outcome.unchanged;
    Check(bytes, seed, outcome);
  }
  return outcome;
}

// Mutates one section's payload and fixes its length and checksum, so that
// the edits reach the section's decoder and Validate instead of failing at
// the framing.
Outcome FuzzSections(const Bytes& seed_file, uint64_t first_seed, int cases) {
  Outcome outcome;
  for (int i = 0; i < cases; ++i) {
    const uint64_t seed = first_seed + static_cast<uint64_t>(i);
    Mutator mutator(seed);
    const uint32_t tag = static_cast<uint32_t>(kTarget + mutator.Below(kSourceMap));
    const size_t begin = PayloadOffset(seed_file, tag);
    Bytes payload(
        seed_file.begin() + static_cast<ptrdiff_t>(begin),
        seed_file.begin() + static_cast<ptrdiff_t>(begin + ReadLE(seed_file, begin - 8, 8)));
    mutator.Mutate(payload);
    Check(WithPayload(seed_file, tag, payload), seed, outcome);
  }
  return outcome;
}

Bytes SmallSeedFile() {
  Executable exe;
  exe.target = "nvidia";
  exe.devices = {Device{DeviceType::kCPU, 0}, Device{DeviceType::kCUDA, 0}};
  exe.constants = {{TensorNode::FromVector<int>({2}, DataType::Int32(), {3, 4}), 1}};
  Attrs attrs;
  attrs.Set("axis", std::vector<int64_t>{0});
  exe.primitives = {{"sum", attrs}};
  exe.messages = {"boom"};
  exe.functions = {VMFunction{
      "main",
      1,
      5,
      {I::LoadConst(0, 1), I::AllocStorage(kNoRegister, 8, 64, DataType::Int32(), 1, 2),
       I::AllocTensor(2, kNoRegister, 0, {2}, DataType::Int32(), 3), I::InvokePacked(0, {1}, {3}),
       I::If(0, kNoRegister, 1, 1, 2), I::Ret(3), I::Fatal(0)}}};
  return exe.Save();
}

TEST(ExecutableFuzzTest, MutatedSampleFilesLoadOrThrow) {
  const Bytes seed_file = MakeSampleExecutable().Save();
  const Outcome outcome = FuzzFile(seed_file, 1, 15000);
  // Every edit is caught, those of constant data and of the kernel library
  // too (they loaded, and damaged machine code then ran: SIGSEGV or SIGILL
  // in 71 of 1,500 mutated files of a compiled program).
  EXPECT_EQ(outcome.loaded, outcome.unchanged);
  EXPECT_GT(outcome.rejected, 14000);
}

TEST(ExecutableFuzzTest, MutatedSectionsLoadOrThrow) {
  const Bytes seed_file = MakeSampleExecutable().Save();
  const Outcome outcome = FuzzSections(seed_file, 100000, 20000);
  EXPECT_GT(outcome.rejected, 0);
  EXPECT_GT(outcome.loaded, 0);
}

TEST(ExecutableFuzzTest, MutatedSmallFilesLoadOrThrow) {
  const Bytes seed_file = SmallSeedFile();
  ASSERT_NO_THROW(Executable::Load(seed_file));
  const Outcome whole = FuzzFile(seed_file, 200000, 15000);
  const Outcome sections = FuzzSections(seed_file, 300000, 15000);
  EXPECT_GT(whole.rejected + sections.rejected, 0);
  EXPECT_GT(whole.loaded + sections.loaded, 0);
}

TEST(ExecutableFuzzTest, RandomBytesAfterAValidHeaderAreRejected) {
  const Bytes seed_file = SmallSeedFile();
  Outcome outcome;
  std::mt19937_64 random(42);
  for (int i = 0; i < 2000; ++i) {
    Bytes bytes(seed_file.begin(), seed_file.begin() + static_cast<ptrdiff_t>(kFileHeaderBytes));
    const size_t length = std::uniform_int_distribution<size_t>(0, 256)(random);
    for (size_t j = 0; j < length; ++j) bytes.push_back(static_cast<std::byte>(random()));
    Check(bytes, static_cast<uint64_t>(i), outcome);
  }
  EXPECT_EQ(outcome.rejected, 2000);
}

}  // namespace
}  // namespace nimble::vm::testing
