#include "nimble/vm/executable.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <initializer_list>
#include <string>
#include <vector>

#include "nimble/vm/error.h"
#include "tests/vm/executable_test_util.h"

namespace nimble::vm::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using I = Instruction;

std::string LoadError(const Bytes& bytes) {
  try {
    Executable::Load(bytes);
  } catch (const Error& error) {
    return error.what();
  }
  return "(loaded)";
}

// The error of saving and reloading `exe`, and checks that Validate says the same.
std::string SaveLoadError(const Executable& exe) {
  std::string validate_error = "(valid)";
  try {
    exe.Validate();
  } catch (const Error& error) {
    validate_error = error.what();
  }
  const std::string load_error = LoadError(exe.Save());
  EXPECT_EQ(load_error, validate_error);
  return load_error;
}

// One function @main(1 param, 1 register) that returns its parameter.
Executable MakeTinyExecutable() {
  Executable exe;
  exe.target = "arm";
  exe.functions = {VMFunction{"main", 1, 1, {I::Ret(0)}}};
  return exe;
}

TEST(ExecutableTest, RoundTripPreservesEverything) {
  const Executable exe = MakeSampleExecutable();
  EXPECT_NO_THROW(exe.Validate());
  const Bytes bytes = exe.Save();
  const Executable loaded = Executable::Load(bytes);
  ExpectSameExecutable(loaded, exe);
  EXPECT_EQ(loaded.Save(), bytes);
  EXPECT_EQ(MakeSampleExecutable().Save(), bytes);
}

TEST(ExecutableTest, EmptyExecutableRoundTrips) {
  const Executable exe;
  const Executable loaded = Executable::Load(exe.Save());
  ExpectSameExecutable(loaded, exe);
  EXPECT_EQ(loaded.devices, (std::vector<Device>{Device{DeviceType::kCPU, 0}}));
}

TEST(ExecutableTest, FileStartsWithMagicByteOrderMarkAndVersion) {
  const Bytes bytes = MakeTinyExecutable().Save();
  ASSERT_GE(bytes.size(), kFileHeaderBytes);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(bytes.data()), 8), "NIMBLEVM");
  EXPECT_EQ(Bytes(bytes.begin() + 8, bytes.begin() + 12), MakeBytes({4, 3, 2, 1}));
  EXPECT_EQ(ReadLE(bytes, 12, 4), Executable::kFormatVersion);
  EXPECT_EQ(ReadLE(bytes, kFileHeaderBytes, 4), uint32_t{kTarget});
}

// The bytes of a file do not depend on the host that wrote it: fixed-width
// little-endian integers, IEEE-754 floats, little-endian tensor elements.
TEST(ExecutableTest, LayoutIsLittleEndianOnEveryHost) {
  Executable exe = MakeTinyExecutable();
  exe.constants = {{TensorNode::FromVector<float>({2}, DataType::Float32(), {1.0f, -2.5f}), 0}};
  Attrs attrs;
  attrs.Set("scale", 0.5);
  attrs.Set("axis", int64_t{-2});
  exe.primitives = {{"k", attrs}};
  const Bytes bytes = exe.Save();
  const auto payload = [&](uint32_t tag) {
    const size_t begin = PayloadOffset(bytes, tag);
    return Bytes(bytes.begin() + begin, bytes.begin() + begin + ReadLE(bytes, begin - 8, 8));
  };
  const auto concat = [](std::initializer_list<Bytes> parts) {
    Bytes all;
    for (const Bytes& part : parts) all.insert(all.end(), part.begin(), part.end());
    return all;
  };
  EXPECT_EQ(payload(kConstants),
            concat({MakeBytes({1, 0, 0, 0}),                             // one constant
                    MakeBytes({2, 32}),                                  // float32
                    MakeBytes({1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0}),     // shape (2)
                    MakeBytes({0, 0, 0, 0}),                             // device 0
                    MakeBytes({8, 0, 0, 0, 0, 0, 0, 0}),                 // 8 bytes:
                    MakeBytes({0, 0, 0x80, 0x3f, 0, 0, 0x20, 0xc0})}));  // 1.0f, -2.5f
  EXPECT_EQ(payload(kPrimitives),
            concat({MakeBytes({1, 0, 0, 0, 1, 0, 0, 0, 'k'}),             // one primitive "k"
                    MakeBytes({2, 0, 0, 0}),                              // two attributes:
                    MakeBytes({5, 0, 0, 0, 's', 'c', 'a', 'l', 'e', 3}),  // scale, a float64
                    MakeBytes({0, 0, 0, 0, 0, 0, 0xe0, 0x3f}),            // 0.5
                    MakeBytes({4, 0, 0, 0, 'a', 'x', 'i', 's', 2}),       // axis, an int64
                    MakeBytes({0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})}));  // -2
}

// A flipped byte anywhere in a section, the kernel library's machine code
// among them, is refused by that section's checksum before anything in it is
// read; so is a damaged checksum.
TEST(ExecutableTest, EveryDamagedSectionIsRefusedByItsChecksum) {
  Executable exe = MakeSampleExecutable();
  for (int i = 0; i < 300; ++i) exe.kernel_library.push_back(static_cast<std::byte>(i * 7));
  const Bytes bytes = exe.Save();
  const std::vector<std::pair<Tag, std::string>> sections = {
      {kTarget, "target"},         {kDevices, "devices"},
      {kFunctions, "functions"},   {kConstants, "constants"},
      {kPrimitives, "primitives"}, {kMessages, "messages"},
      {kBytecode, "bytecode"},     {kKernelLibrary, "kernel library"},
      {kSourceMap, "source map"}};
  for (const auto& [tag, name] : sections) {
    const size_t begin = PayloadOffset(bytes, tag);
    const size_t length = ReadLE(bytes, begin - 8, 8);
    ASSERT_GT(length, 0u) << name;
    for (const size_t at : {begin, begin + length / 2, begin + length - 1}) {
      Bytes damaged = bytes;
      damaged[at] ^= std::byte{0x10};
      EXPECT_THAT(LoadError(damaged),
                  StartsWith("executable: section " + std::to_string(tag) + " (" + name +
                             ") checksum mismatch: the file is corrupt (stored 0x"))
          << name << ", byte " << at - begin;
    }
    Bytes damaged = bytes;
    damaged[begin - 16] ^= std::byte{1};
    EXPECT_THAT(LoadError(damaged), HasSubstr("(" + name + ") checksum mismatch")) << name;
  }
}

// Every single-bit flip of a payload changes its checksum, in the words and
// in the tail of bytes after them.
TEST(ExecutableTest, TheChecksumChangesWithEveryBitOfThePayload) {
  Bytes payload(203);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<std::byte>(i * 31 + 7);
  const uint64_t sum = SectionChecksum(payload);
  for (size_t i = 0; i < payload.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      payload[i] ^= static_cast<std::byte>(1 << bit);
      EXPECT_NE(SectionChecksum(payload), sum) << "byte " << i << ", bit " << bit;
      payload[i] ^= static_cast<std::byte>(1 << bit);
    }
  }
  EXPECT_NE(SectionChecksum(Bytes(payload.begin(), payload.end() - 1)), sum);
  EXPECT_NE(SectionChecksum({}), SectionChecksum(Bytes(1)));
}

TEST(ExecutableTest, RejectsAWrongByteOrderMark) {
  Bytes bytes = MakeTinyExecutable().Save();
  WriteLE(bytes, 8, 4, 0x04030201);
  EXPECT_EQ(LoadError(bytes),
            "executable: written big-endian (byte-order mark 0x04030201), but the format is "
            "little-endian on every host");
  // A file of format version 2 has its version where the mark now is.
  WriteLE(bytes, 8, 4, 2);
  EXPECT_EQ(LoadError(bytes),
            "executable: byte-order mark 0x00000002 is not 0x01020304 (format versions before 3 "
            "have none: recompile the program)");
  EXPECT_EQ(LoadError(Bytes(bytes.begin(), bytes.begin() + 10)), "executable: truncated header");
}

TEST(ExecutableTest, BytecodeIsVariableLength) {
  const Bytes bytes = MakeTinyExecutable().Save();
  const size_t bytecode = PayloadOffset(bytes, kBytecode);
  // Instruction count, then `ret $0` as the opcode byte and a one-byte varint.
  EXPECT_EQ(ReadLE(bytes, bytecode - 8, 8), 6u);
  EXPECT_EQ(Bytes(bytes.begin() + bytecode, bytes.begin() + bytecode + 6),
            MakeBytes({1, 0, 0, 0, static_cast<int>(Opcode::kRet), 0}));

  // kNoRegister and negative offsets are zigzag-encoded: one byte each.
  Executable exe = MakeTinyExecutable();
  exe.functions[0].instructions = {I::Ret(0), I::If(0, kNoRegister, -1, 1, -1), I::Ret(0)};
  const Bytes if_bytes = exe.Save();
  ExpectSameExecutable(Executable::Load(if_bytes), exe);
  const size_t if_code = PayloadOffset(if_bytes, kBytecode) + 6;
  EXPECT_EQ(Bytes(if_bytes.begin() + if_code, if_bytes.begin() + if_code + 6),
            MakeBytes({static_cast<int>(Opcode::kIf), 0, 1, 1, 2, 1}));
}

TEST(ExecutableTest, SaveToFileAndLoadFromFile) {
  const std::string path = ::testing::TempDir() + "/vmexec_sample.nvm";
  const Executable exe = MakeSampleExecutable();
  exe.SaveToFile(path);
  ExpectSameExecutable(Executable::LoadFromFile(path), exe);
  std::remove(path.c_str());
}

TEST(ExecutableTest, FileErrorsNameThePath) {
  const std::string missing = ::testing::TempDir() + "/vmexec_missing.nvm";
  try {
    Executable::LoadFromFile(missing);
    FAIL() << "loaded a missing file";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), HasSubstr("cannot open '" + missing + "'"));
  }
  const std::string bad_dir = ::testing::TempDir() + "/vmexec_no_such_dir/x.nvm";
  try {
    MakeTinyExecutable().SaveToFile(bad_dir);
    FAIL() << "saved into a missing directory";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), HasSubstr("cannot create '" + bad_dir + "'"));
  }

  const std::string corrupt = ::testing::TempDir() + "/vmexec_corrupt.nvm";
  FILE* file = std::fopen(corrupt.c_str(), "wb");
  ASSERT_NE(file, nullptr);
  std::fputs("NOTNIMBLE", file);
  std::fclose(file);
  try {
    Executable::LoadFromFile(corrupt);
    FAIL() << "loaded a corrupt file";
  } catch (const Error& error) {
    EXPECT_EQ(std::string(error.what()),
              "'" + corrupt + "': executable: not a Nimble executable (bad magic number)");
  }
  std::remove(corrupt.c_str());
}

TEST(ExecutableTest, RejectsBadMagic) {
  Bytes bytes = MakeTinyExecutable().Save();
  bytes[0] = std::byte{'X'};
  EXPECT_EQ(LoadError(bytes), "executable: not a Nimble executable (bad magic number)");
  EXPECT_EQ(LoadError(MakeBytes({'N', 'O'})),
            "executable: not a Nimble executable (bad magic number)");
  EXPECT_EQ(LoadError({}), "executable: truncated header");
}

TEST(ExecutableTest, RejectsAnotherFormatVersion) {
  Bytes bytes = MakeTinyExecutable().Save();
  WriteLE(bytes, 12, 4, Executable::kFormatVersion + 1);
  EXPECT_EQ(LoadError(bytes),
            "executable: format version " + std::to_string(Executable::kFormatVersion + 1) +
                ", but this runtime reads version " + std::to_string(Executable::kFormatVersion));
}

TEST(ExecutableTest, RejectsTruncationAtEveryOffset) {
  const Bytes bytes = MakeSampleExecutable().Save();
  for (size_t size = 0; size < bytes.size(); ++size) {
    const std::string error =
        LoadError(Bytes(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(size)));
    EXPECT_THAT(error, HasSubstr("executable: truncated")) << "at " << size << " bytes";
  }
  const size_t devices = PayloadOffset(bytes, kDevices) - kSectionHeaderBytes;
  EXPECT_EQ(LoadError(Bytes(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(devices))),
            "executable: truncated file: the devices section is missing");
  EXPECT_EQ(LoadError(Bytes(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(devices + 5))),
            "executable: truncated devices section header");
  EXPECT_EQ(LoadError(Bytes(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(devices + 21))),
            "executable: truncated devices section (32 bytes declared, 1 present)");
}

TEST(ExecutableTest, TruncatedSectionPayloadNamesTheEntry) {
  const Bytes bytes = MakeTinyExecutable().Save();
  const size_t functions = PayloadOffset(bytes, kFunctions);
  // The function table entry claims a name longer than the section.
  Bytes payload(
      bytes.begin() + functions,
      bytes.begin() + functions + static_cast<ptrdiff_t>(ReadLE(bytes, functions - 8, 8)));
  WriteLE(payload, 4, 4, 100);
  EXPECT_EQ(LoadError(WithPayload(bytes, kFunctions, payload)),
            "executable: truncated functions section (function 0)");
}

TEST(ExecutableTest, RejectsTrailingBytesAndSectionsOutOfOrder) {
  Bytes bytes = MakeTinyExecutable().Save();
  Bytes longer = bytes;
  longer.push_back(std::byte{0});
  EXPECT_EQ(LoadError(longer), "executable: 1 unexpected bytes after the last section");

  WriteLE(bytes, kFileHeaderBytes, 4, kDevices);
  EXPECT_EQ(LoadError(bytes), "executable: expected the target section (tag 1), found tag 2");

  const Bytes good = MakeTinyExecutable().Save();
  Bytes target = MakeBytes({3, 0, 0, 0, 'a', 'r', 'm', '!'});
  EXPECT_EQ(LoadError(WithPayload(good, kTarget, target)),
            "executable: target section: 1 unexpected bytes at the end");
  target = MakeBytes({3, 0, 0, 0, 'x', '8', '6'});
  EXPECT_EQ(Executable::Load(WithPayload(good, kTarget, target)).target, "x86");
}

TEST(ExecutableTest, RejectsCountsLargerThanTheBytesLeft) {
  const Bytes bytes = MakeSampleExecutable().Save();
  for (uint32_t tag : {kDevices, kFunctions, kConstants, kPrimitives, kMessages}) {
    Bytes patched = bytes;
    const size_t payload = PayloadOffset(patched, tag);
    WriteLE(patched, payload, 4, 0xffffffffu);
    EXPECT_THAT(LoadError(Resealed(patched)), HasSubstr(": count 4294967295 exceeds the "))
        << "section tag " << tag;
  }
  Bytes patched = bytes;
  WriteLE(patched, PayloadOffset(patched, kBytecode), 4, 0x7fffffffu);
  EXPECT_THAT(LoadError(Resealed(patched)),
              HasSubstr("executable: bytecode section, function @main: count 2147483647 exceeds"));
}

TEST(ExecutableTest, RejectsUnknownOpcodeAndBadVarints) {
  const Bytes bytes = MakeTinyExecutable().Save();
  const auto with_code = [&](std::initializer_list<int> code) {
    return LoadError(WithPayload(bytes, kBytecode, MakeBytes(code)));
  };
  EXPECT_EQ(with_code({1, 0, 0, 0, 200, 0}),
            "executable: bytecode section, function @main pc 0: unknown opcode 200");
  EXPECT_EQ(with_code({1, 0, 0, 0, kNumOpcodes, 0}),
            "executable: bytecode section, function @main pc 0: unknown opcode " +
                std::to_string(kNumOpcodes));
  EXPECT_EQ(with_code({1, 0, 0, 0, 1, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02}),
            "executable: bytecode section, function @main pc 0: varint longer than 64 bits");
  // Zigzag 2^40 is 2^41: a register number beyond 32 bits.
  EXPECT_EQ(with_code({1, 0, 0, 0, 1, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40}),
            "executable: bytecode section, function @main pc 0: value 1099511627776 does not fit "
            "in 32 bits");
  EXPECT_EQ(with_code({1, 0, 0, 0, 1, 0x80}),
            "executable: truncated bytecode section (function @main pc 0)");
  EXPECT_EQ(with_code({1, 0, 0, 0, 1, 0, 1, 0}),
            "executable: bytecode section: 2 unexpected bytes at the end");
  // A register list longer than the bytes left.
  EXPECT_THAT(with_code({1, 0, 0, 0, static_cast<int>(Opcode::kInvoke), 0, 0x7f}),
              HasSubstr("function @main pc 0: count 127 exceeds the 0 bytes left"));
}

TEST(ExecutableTest, RejectsBadConstants) {
  Executable exe = MakeTinyExecutable();
  exe.constants = {{TensorNode::FromVector<int>({2}, DataType::Bool(), {1, 0}), 0}};
  const Bytes bytes = exe.Save();
  const size_t constants = PayloadOffset(bytes, kConstants);
  // Layout: count, code, bits, ndim, dim, device, byte count, data.
  const size_t code = constants + 4, bits = code + 1, dim = bits + 5, byte_count = dim + 12;
  const size_t data = byte_count + 8;
  const std::string where = "executable: constants section, constant 0: ";

  Bytes patched = bytes;
  patched[code] = std::byte{9};
  EXPECT_EQ(LoadError(Resealed(patched)), where + "unknown dtype (code 9, bits 8)");
  patched = bytes;
  patched[bits] = std::byte{1};
  EXPECT_EQ(LoadError(Resealed(patched)), where + "unknown dtype (code 3, bits 1)");
  patched = bytes;
  WriteLE(patched, dim, 8, static_cast<uint64_t>(-2));
  EXPECT_EQ(LoadError(Resealed(patched)), where + "negative dimension in shape (-2,)");
  patched = bytes;
  WriteLE(patched, byte_count, 8, 3);
  EXPECT_EQ(LoadError(Resealed(patched)),
            where + "3 bytes for a tensor of shape (2,) and dtype bool");
  patched = bytes;
  patched[data + 1] = std::byte{2};
  EXPECT_EQ(LoadError(Resealed(patched)), where + "bool element 1 is not 0 or 1");

  // A huge zero-size shape is fine; a huge non-empty one never allocates.
  patched = bytes;
  WriteLE(patched, dim, 8, uint64_t{1} << 62);
  EXPECT_EQ(LoadError(Resealed(patched)),
            where +
                "2 bytes for a tensor of shape (4611686018427387904,) and "
                "dtype bool");
  WriteLE(patched, byte_count, 8, uint64_t{1} << 62);
  EXPECT_EQ(LoadError(Resealed(patched)), "executable: truncated constants section (constant 0)");
}

TEST(ExecutableTest, RejectsBadAttributesAndDevices) {
  Executable exe = MakeTinyExecutable();
  Attrs attrs;
  attrs.Set("axis", int64_t{1});
  exe.primitives = {{"sum", attrs}};
  exe.devices = {Device{DeviceType::kCPU, 0}, Device{DeviceType::kCUDA, 0}};
  const Bytes bytes = exe.Save();
  ExpectSameExecutable(Executable::Load(bytes), exe);

  // Layout: count, name "sum", attr count, name "axis", kind, int64.
  const size_t kind = PayloadOffset(bytes, kPrimitives) + 4 + 7 + 4 + 8;
  const std::string where = "executable: primitives section, primitive 0: ";
  Bytes patched = bytes;
  patched[kind] = std::byte{7};
  EXPECT_EQ(LoadError(Resealed(patched)), where + "unknown attribute kind 7");
  patched[kind] = std::byte{1};  // bool, whose byte is the int's low byte
  patched[kind + 1] = std::byte{2};
  EXPECT_THAT(LoadError(Resealed(patched)), HasSubstr(where + "bool byte 2 is not 0 or 1"));

  const Bytes duplicate =
      MakeBytes({1, 0, 0, 0, 1, 0, 0, 0, 'f', 2, 0, 0, 0, 1, 0, 0, 0, 'a', 0, 1, 0, 0, 0, 'a', 0});
  EXPECT_EQ(LoadError(WithPayload(bytes, kPrimitives, duplicate)),
            where + "duplicate attribute 'a'");

  patched = bytes;
  WriteLE(patched, PayloadOffset(bytes, kDevices) + 4 + 8, 4, 7);
  EXPECT_EQ(LoadError(Resealed(patched)),
            "executable: devices section, device 1: unknown device type 7");
}

TEST(ExecutableTest, RejectsBadRegister) {
  Executable exe = MakeSampleExecutable();
  exe.functions[0].instructions[7].dst = 16;
  EXPECT_EQ(SaveLoadError(exe),
            "executable: function @main pc 7: register $16 out of range (register file size 16)");
  exe = MakeSampleExecutable();
  exe.functions[0].instructions[21].src = kNoRegister;
  EXPECT_EQ(SaveLoadError(exe),
            "executable: function @main pc 21: register $-1 out of range (register file size 16)");
  exe = MakeSampleExecutable();
  exe.functions[0].instructions[12].args[2] = 99;
  EXPECT_EQ(SaveLoadError(exe),
            "executable: function @main pc 12: register $99 out of range (register file size 16)");
}

TEST(ExecutableTest, RejectsBadJumps) {
  Executable exe = MakeSampleExecutable();
  exe.functions[0].instructions[2].false_offset = 30;
  EXPECT_EQ(SaveLoadError(exe),
            "executable: function @main pc 2: jump target pc 32 outside the function (29 "
            "instructions)");
  exe = MakeSampleExecutable();
  exe.functions[1].instructions[2] = I::Goto(-3);
  EXPECT_EQ(SaveLoadError(exe),
            "executable: function @helper pc 2: jump target pc -1 outside the function (3 "
            "instructions)");
  exe = MakeSampleExecutable();
  exe.functions[0].instructions[4].true_offset = 0;
  EXPECT_EQ(SaveLoadError(exe),
            "executable: function @main pc 4: jump offset 0 would loop forever");
}

TEST(ExecutableTest, RejectsBadTableIndices) {
  Executable exe = MakeSampleExecutable();
  exe.functions[0].instructions[11].index = 5;
  EXPECT_EQ(SaveLoadError(exe),
            "executable: function @main pc 11: kernel index 5 out of range (2 kernels)");
  exe = MakeSampleExecutable();
  exe.functions[0].instructions[0].index = 8;
  EXPECT_EQ(SaveLoadError(exe),
            "executable: function @main pc 0: constant index 8 out of range (8 constants)");
  exe = MakeSampleExecutable();
  exe.functions[0].instructions[26].index = -1;
  EXPECT_EQ(SaveLoadError(exe),
            "executable: function @main pc 26: message index -1 out of range (3 messages)");
  exe = MakeSampleExecutable();
  exe.functions[0].instructions[14].device_index = 3;
  EXPECT_EQ(SaveLoadError(exe),
            "executable: function @main pc 14: device index 3 out of range (3 devices)");
  exe = MakeSampleExecutable();
  exe.functions[0].instructions[6].device_index = -1;
  EXPECT_EQ(SaveLoadError(exe),
            "executable: function @main pc 6: device index -1 out of range (3 devices)");
  exe = MakeSampleExecutable();
  exe.functions[0].instructions[20].index = 3;
  EXPECT_EQ(SaveLoadError(exe),
            "executable: function @main pc 20: function index 3 out of range (3 functions)");
}

TEST(ExecutableTest, RejectsBadOperandCounts) {
  Executable exe = MakeSampleExecutable();
  exe.functions[0].instructions[22].args = {13, 13};
  EXPECT_EQ(SaveLoadError(exe),
            "executable: function @main pc 22: invoke of @helper passes 2 arguments, it takes 1");
  exe = MakeSampleExecutable();
  exe.functions[0].instructions[20].args = {1, 2, 3};
  EXPECT_EQ(SaveLoadError(exe),
            "executable: function @main pc 20: closure of @closure_body captures 3 values, it "
            "takes 2 parameters");
  exe = MakeSampleExecutable();
  exe.functions[0].instructions[11].immediate = 0;
  EXPECT_EQ(SaveLoadError(exe),
            "executable: function @main pc 11: invoke_packed with 0 outputs among 3 arguments "
            "(needs 1 to 3)");
  exe.functions[0].instructions[11].immediate = 4;
  EXPECT_EQ(SaveLoadError(exe),
            "executable: function @main pc 11: invoke_packed with 4 outputs among 3 arguments "
            "(needs 1 to 3)");
}

TEST(ExecutableTest, RejectsBadImmediates) {
  Executable exe = MakeSampleExecutable();
  exe.functions[0].instructions[5].alignment = 48;
  EXPECT_EQ(SaveLoadError(exe),
            "executable: function @main pc 5: alignment 48 is not a power of two");
  exe.functions[0].instructions[5].alignment = 0;
  EXPECT_EQ(SaveLoadError(exe),
            "executable: function @main pc 5: alignment 0 is not a power of two");
  exe = MakeSampleExecutable();
  exe.functions[0].instructions[5].immediate = -1;
  EXPECT_EQ(SaveLoadError(exe), "executable: function @main pc 5: negative storage size -1");
  exe = MakeSampleExecutable();
  exe.functions[0].instructions[7].shape = {2, -3};
  EXPECT_EQ(SaveLoadError(exe),
            "executable: function @main pc 7: negative dimension in shape (2, -3)");
  exe = MakeSampleExecutable();
  exe.functions[0].instructions[7].immediate = -64;
  EXPECT_EQ(SaveLoadError(exe), "executable: function @main pc 7: negative tensor offset -64");
  exe = MakeSampleExecutable();
  exe.functions[0].instructions[16].index = -1;
  EXPECT_EQ(SaveLoadError(exe), "executable: function @main pc 16: negative field index -1");
}

// `in` with args[i] moved for each i of `moved`.
Instruction Moving(Instruction in, std::initializer_list<size_t> moved) {
  for (size_t i : moved) EXPECT_TRUE(in.SetMoves(i)) << InstructionToString(in);
  return in;
}

TEST(ExecutableTest, MovedArgumentsRoundTripAndAreChecked) {
  Executable exe;
  exe.target = "intel";
  const auto with_main = [&](std::vector<Instruction> code) {
    const int32_t registers = static_cast<int32_t>(code.size()) + 2;
    exe.functions = {VMFunction{"main", 2, registers, std::move(code)},
                     VMFunction{"body", 2, 2, {I::Ret(1)}}};
    return exe;
  };
  with_main({Moving(I::AllocADT(0, {0, 1}, 2), {1}), Moving(I::AllocClosure(1, {0}, 3), {0}),
             Moving(I::InvokeClosure(3, {2}, 4), {0}), Moving(I::Invoke(1, {3, 4}, 2), {0, 1}),
             I::Ret(2)});
  EXPECT_NO_THROW(exe.Validate());
  const Executable loaded = Executable::Load(exe.Save());
  EXPECT_EQ(loaded.functions[0].instructions, exe.functions[0].instructions);
  EXPECT_EQ(InstructionToString(loaded.functions[0].instructions[0]),
            "$2 = alloc_adt tag 0($0, move $1)");
  EXPECT_EQ(InstructionToString(loaded.functions[0].instructions[3]),
            "$2 = invoke func[1](move $3, move $4)");

  Instruction past_the_args = I::AllocADT(0, {0, 1}, 2);
  past_the_args.immediate = 0b100;
  with_main({past_the_args, I::Ret(2)});
  EXPECT_EQ(SaveLoadError(exe), "executable: function @main pc 0: moves argument 2 of 2");
  Instruction read_twice = I::AllocADT(0, {0, 0}, 2);
  read_twice.immediate = 0b1;
  with_main({read_twice, I::Ret(2)});
  EXPECT_EQ(SaveLoadError(exe),
            "executable: function @main pc 0: moves register $0, which it also reads elsewhere");
  Instruction the_closure = I::InvokeClosure(0, {0}, 2);
  the_closure.immediate = 0b1;
  with_main({the_closure, I::Ret(2)});
  EXPECT_EQ(SaveLoadError(exe),
            "executable: function @main pc 0: moves register $0, which it also reads elsewhere");
}

TEST(ExecutableTest, RejectsBadScalarInstructions) {
  Executable exe = MakeSampleExecutable();
  exe.functions[0].instructions[18].index = kNumScalarOperators;
  EXPECT_EQ(SaveLoadError(exe),
            "executable: function @main pc 18: scalar operator index 20 out of range (20 scalar "
            "operators)");
  exe = MakeSampleExecutable();
  exe.functions[0].instructions[19].dtype = DataType::Float32();
  EXPECT_EQ(SaveLoadError(exe),
            "executable: function @main pc 19: scalar less on float32 (scalar operands are int8, "
            "int32, int64 or bool)");
  exe = MakeSampleExecutable();
  exe.functions[0].instructions[19].operand = 16;
  EXPECT_EQ(SaveLoadError(exe),
            "executable: function @main pc 19: register $16 out of range (register file size 16)");
  exe = MakeSampleExecutable();
  exe.functions[0].instructions[9].dtype = DataType::Float32();
  EXPECT_EQ(SaveLoadError(exe),
            "executable: function @main pc 9: shape_of gives int32 or int64, not float32");
}

// TreeSchedule's layout is decoded at load, so that a damaged one is refused
// there, naming the instruction, rather than when the instruction runs.
TEST(ExecutableTest, RejectsBadTreeScheduleLayouts) {
  const auto with_layout = [](int64_t max_children, Shape layout) {
    Executable exe = MakeSampleExecutable();
    exe.functions[0].instructions[27].index = max_children;
    exe.functions[0].instructions[27].shape = std::move(layout);
    return SaveLoadError(exe);
  };
  EXPECT_EQ(with_layout(2, {0, 0, 0, 32}),
            "executable: function @main pc 27: tree_schedule: the layout ends before a payload's "
            "rank");
  EXPECT_EQ(with_layout(-3, {}),
            "executable: function @main pc 27: tree_schedule: max_children must be in [0, 2^31), "
            "got -3");
  EXPECT_EQ(with_layout(2, {0, 0, 7, 32, 0}),
            "executable: function @main pc 27: tree_schedule: a payload's dtype (code 7, 32 bits) "
            "is not one");
  EXPECT_EQ(with_layout(2, {0, 0, 0, 32, 2, 3}),
            "executable: function @main pc 27: tree_schedule: the layout ends before a payload's "
            "dimension");
  Executable exe = MakeSampleExecutable();
  // No children and no payloads: a tree of bare constructors.
  exe.functions[0].instructions[27].index = 0;
  exe.functions[0].instructions[27].shape = {};
  EXPECT_NO_THROW(Executable::Load(exe.Save()));
  exe.functions[0].instructions[27].src = 16;
  EXPECT_EQ(SaveLoadError(exe),
            "executable: function @main pc 27: register $16 out of range (register file size 16)");
}

TEST(ExecutableTest, RejectsFunctionsThatFallOffTheEnd) {
  Executable exe = MakeSampleExecutable();
  exe.functions[2].instructions = {I::Move(0, 1)};
  EXPECT_EQ(SaveLoadError(exe),
            "executable: function @closure_body: the last instruction (pc 0, move) is not ret, "
            "goto or fatal, so execution could fall off the end");
  exe.functions[2].instructions.clear();
  EXPECT_EQ(SaveLoadError(exe), "executable: function @closure_body: no instructions");
  exe = MakeSampleExecutable();
  exe.functions[0].instructions.resize(26);
  EXPECT_THAT(SaveLoadError(exe), HasSubstr("@main: the last instruction (pc 25, if)"));
}

TEST(ExecutableTest, RejectsBadFunctionTablesAndDevices) {
  Executable exe = MakeSampleExecutable();
  exe.functions[2].num_params = 3;
  EXPECT_EQ(SaveLoadError(exe),
            "executable: function @closure_body: 3 parameters do not fit in the register file of "
            "size 2");
  exe = MakeSampleExecutable();
  exe.functions[1].register_file_size = 5;
  EXPECT_EQ(SaveLoadError(exe),
            "executable: function @helper: register file size 5 exceeds its 1 parameters plus 3 "
            "instructions");
  exe.functions[1].register_file_size = 4;
  EXPECT_NO_THROW(exe.Validate());
  exe = MakeSampleExecutable();
  exe.functions[1].name = "main";
  EXPECT_EQ(SaveLoadError(exe), "executable: two functions are named @main");
  exe = MakeSampleExecutable();
  exe.host_device_index = 3;
  EXPECT_EQ(SaveLoadError(exe), "executable: host device index 3 out of range (3 devices)");
  exe = MakeSampleExecutable();
  exe.devices[2].id = -1;
  EXPECT_EQ(SaveLoadError(exe), "executable: device 2 has negative id -1");
  exe = MakeSampleExecutable();
  exe.constants[4].device_index = 5;
  EXPECT_EQ(SaveLoadError(exe), "executable: constant 4: device index 5 out of range (3 devices)");
}

TEST(ExecutableTest, SignaturesAndSourceMapsRoundTrip) {
  const Executable loaded = Executable::Load(MakeSampleExecutable().Save());
  const VMFunction& main = loaded.functions[0];
  ASSERT_EQ(main.params.size(), 2u);
  EXPECT_EQ(main.params[0].name, "x");
  EXPECT_EQ(main.params[0].type.kind, ParamType::Kind::kTensor);
  EXPECT_EQ(main.params[0].type.dims, (std::vector<int64_t>{ParamType::kAnyDim, 16}));
  EXPECT_EQ(main.params[1].type.ToString(), "(Tensor[(), int64], (List[float32],))");
  EXPECT_EQ(main.positions.size(), main.instructions.size());
  EXPECT_EQ(main.positions[26], (SourcePosition{12, 1}));
  EXPECT_FALSE(main.positions[1].valid());
  EXPECT_TRUE(loaded.functions[1].positions.empty());
  EXPECT_TRUE(loaded.functions[2].params.empty());
  EXPECT_EQ(loaded.source_name, "prog.relay");
  EXPECT_EQ(SignatureToString(main),
            "@main(%x: Tensor[(?, 16), float32], %pair: (Tensor[(), int64], (List[float32],)))");
  EXPECT_EQ(ParamType::Tensor(DataType::Bool(), {3}).ToString(), "Tensor[(3,), bool]");
  EXPECT_EQ(
      ParamType::Tensor(DataType::Int32(), {1, ParamType::kAnyDim}, {ParamType::kNoBound, 512})
          .ToString(),
      "Tensor[(1, ?<=512), int32]");
  EXPECT_EQ(ParamType::Tuple({}).ToString(), "()");
}

TEST(ExecutableTest, RejectsBadSignaturesAndSourceMaps) {
  Executable exe = MakeSampleExecutable();
  exe.functions[0].params.pop_back();
  EXPECT_EQ(SaveLoadError(exe),
            "executable: function @main: a signature of 1 parameters for 2 parameters");
  exe = MakeSampleExecutable();
  exe.functions[0].params[0].type.dims[1] = -2;
  EXPECT_EQ(SaveLoadError(exe), "executable: function @main: parameter type has dimension -2");
  // A bound only on a `?`, and not below -1 (none).
  exe = MakeSampleExecutable();
  exe.functions[0].params[0].type.bounds[1] = 4;
  EXPECT_EQ(SaveLoadError(exe),
            "executable: function @main: parameter type has bound 4 on dimension 16");
  exe = MakeSampleExecutable();
  exe.functions[0].params[0].type.bounds[0] = -3;
  EXPECT_EQ(SaveLoadError(exe),
            "executable: function @main: parameter type has bound -3 on dimension -1");
  exe = MakeSampleExecutable();
  exe.functions[1].positions = {{1, 1}};
  EXPECT_EQ(SaveLoadError(exe),
            "executable: function @helper: a source map of 1 positions for 3 instructions");
  exe = MakeSampleExecutable();
  exe.functions[2].positions = {{4, -1}};
  EXPECT_EQ(SaveLoadError(exe),
            "executable: function @closure_body: negative source position 4:-1 at pc 0");

  // Tuples nest at most ParamType::kMaxDepth deep, in memory and in a file.
  exe = MakeSampleExecutable();
  ParamType deep = ParamType::Tensor(DataType::Float32(), {});
  for (int i = 0; i < ParamType::kMaxDepth; ++i) deep = ParamType::Tuple({deep});
  exe.functions[1].params[0].type = deep;
  EXPECT_NO_THROW(Executable::Load(exe.Save()));
  exe.functions[1].params[0].type = ParamType::Tuple({deep});
  EXPECT_THAT([&] { exe.Validate(); },
              ::testing::ThrowsMessage<Error>(
                  "executable: function @helper: parameter type nested deeper than 32"));
  EXPECT_EQ(LoadError(exe.Save()),
            "executable: functions section, function 1: parameter type nested deeper than 32");

  const Bytes bytes = MakeSampleExecutable().Save();
  const size_t source_map = PayloadOffset(bytes, kSourceMap);
  const size_t device_code = PayloadOffset(bytes, kDeviceCode) - kSectionHeaderBytes;
  const Bytes payload(bytes.begin() + static_cast<ptrdiff_t>(source_map),
                      bytes.begin() + static_cast<ptrdiff_t>(device_code));
  EXPECT_EQ(LoadError(WithPayload(bytes, kSourceMap, Bytes(payload.begin(), payload.end() - 3))),
            "executable: truncated source map section (function @closure_body)");
  Bytes unknown_kind = bytes;
  // The functions section: count, then @main's name, num_params, register
  // file size, parameter count, the name "x" and the kind byte.
  const size_t kind = PayloadOffset(bytes, kFunctions) + 4 + 8 + 4 + 4 + 4 + 5;
  ASSERT_EQ(unknown_kind[kind], std::byte{1});
  unknown_kind[kind] = std::byte{7};
  EXPECT_EQ(LoadError(Resealed(unknown_kind)),
            "executable: functions section, function 0: unknown parameter type kind 7");
}

// PTX travels in its own section; it needs a CUDA device and a kernel
// library whose host code launches it.
TEST(ExecutableTest, DeviceCodeRoundTripsAndNeedsAGpuAndALibrary) {
  Executable exe = MakeTinyExecutable();
  exe.device_code = MakeBytes({'.', 'v', 'e', 'r'});
  EXPECT_THAT([&] { exe.Validate(); },
              ::testing::ThrowsMessage<Error>(
                  "executable: device code without a CUDA device and a kernel library to launch "
                  "it"));
  exe.devices.push_back(Device{DeviceType::kCUDA, 0});
  exe.kernel_library = MakeBytes({1, 2, 3});
  EXPECT_EQ(Executable::Load(exe.Save()).device_code, exe.device_code);
}

TEST(ExecutableTest, ConstantWithoutTensorIsRejected) {
  Executable exe = MakeSampleExecutable();
  exe.constants[1].tensor = nullptr;
  EXPECT_THAT([&] { exe.Validate(); },
              ::testing::ThrowsMessage<Error>("executable: constant 1: no tensor"));
  EXPECT_THAT([&] { exe.Save(); },
              ::testing::ThrowsMessage<Error>("executable: cannot save constant 1: no tensor"));
}

TEST(ExecutableTest, FunctionIndex) {
  const Executable exe = MakeSampleExecutable();
  EXPECT_EQ(exe.FunctionIndex("main"), 0);
  EXPECT_EQ(exe.FunctionIndex("closure_body"), 2);
  EXPECT_THAT([&] { exe.FunctionIndex("nope"); },
              ::testing::ThrowsMessage<Error>(
                  "executable: no function @nope (functions: @main, @helper, @closure_body)"));
}

TEST(ExecutableTest, ExecutableToStringListsTablesAndCode) {
  Executable exe = MakeSampleExecutable();
  const std::string text = ExecutableToString(exe, false);
  EXPECT_THAT(text, ::testing::StartsWith("target \"intel\", format version " +
                                          std::to_string(Executable::kFormatVersion) +
                                          "\n"
                                          "source \"prog.relay\"\ndevices:\n"
                                          "  device[0] cpu(0) (host)\n  device[1] cuda(0)\n"
                                          "  device[2] cuda(1)\nkernels:\n  kernel[0] add\n"));
  EXPECT_THAT(text, HasSubstr("  kernel[1] concatenate(none=None, flag=True, axis=-1, scale=0.5f, "
                              "mode=\"same\", newshape=[1, -1, 0], dtype=\"int64\")\n"));
  EXPECT_THAT(text, HasSubstr("constants:\n  const[0] Tensor[(2, 3), float32] on device[0]\n"));
  EXPECT_THAT(text, HasSubstr("  const[3] Tensor[(0, 3), float16] on device[1]\n"));
  EXPECT_THAT(text, HasSubstr("messages:\n  message[0] \"non-exhaustive match at 3:7\"\n"
                              "  message[1] \"\"\n  message[2] \"quote \\\" and\\nnewline\"\n"));
  EXPECT_THAT(
      text,
      HasSubstr(
          "kernel library: 300 bytes\ndevice code: 0 bytes\n\nfunc[0] def @main($0, $1) registers "
          "16:\n  signature @main(%x: Tensor[(?, 16), float32], %pair: "
          "(Tensor[(), int64], (List[float32],)))\n"
          "   0: $2 = load_const const[0]  ; 3:7\n"
          "   1: $3 = load_consti 1\n"));
  EXPECT_THAT(text, HasSubstr("   2: if $3 == 1 then +1 (pc 3) else +2 (pc 4)\n"));
  EXPECT_THAT(text, HasSubstr("  26: fatal message[0]  ; 12:1\n"
                              "  27: $15 = tree_schedule $12 children 2 layout [0, 0, 0, 32, 0, 1, "
                              "1, 2, 32, 2, 3, 4]\n  28: ret $2\n"));
  EXPECT_THAT(text,
              HasSubstr("\nfunc[1] def @helper($0) registers 1:\n"
                        "  signature @helper(%: fn (Tensor[(), int32]) -> Tensor[(), int32])\n"
                        "  0: goto +2 (pc 2)\n"));
  EXPECT_THAT(text,
              HasSubstr("\nfunc[2] def @closure_body($0, $1) registers 2:\n  0: ret $1  ; 1:1\n"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("6.5")));

  exe.constants.push_back(
      {TensorNode::FromVector<int>({12}, DataType::Int32(), {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}),
       0});
  const std::string with_values = ExecutableToString(exe, true);
  EXPECT_THAT(with_values, HasSubstr("  const[0] Tensor[(2, 3), float32] on device[0] = [1.0, 2.0, "
                                     "3.0, 4.0, 5.0, 6.5]\n"));
  EXPECT_THAT(with_values,
              HasSubstr("  const[1] Tensor[(), int64] on device[0] = [-4611686018427387904]\n"));
  EXPECT_THAT(with_values, HasSubstr("= [True, False, False, True]\n"));
  EXPECT_THAT(with_values, HasSubstr("  const[3] Tensor[(0, 3), float16] on device[1] = []\n"));
  EXPECT_THAT(with_values, HasSubstr("= [0.1, -1e+300]\n"));
  EXPECT_THAT(with_values, HasSubstr("= [0, 1, 2, 3, 4, 5, 6, 7, ... (12 elements)]\n"));
}

}  // namespace
}  // namespace nimble::vm::testing
