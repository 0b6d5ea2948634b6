// Test helpers for executables: a hand-built executable that uses every
// opcode, every attribute kind, constants of several dtypes (a scalar and a
// zero-size one among them), several devices, a kernel library blob,
// signatures with every kind of parameter type and a partial source map (the
// reference input of the serialization tests and the seed of the loader's
// fuzz test), and byte-level surgery on saved files.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <initializer_list>
#include <vector>

#include "nimble/vm/executable.h"

namespace nimble::vm::testing {

using Bytes = std::vector<std::byte>;

// Section tags of the file format (executable.cc).
enum Tag : uint32_t {
  kTarget = 1,
  kDevices,
  kFunctions,
  kConstants,
  kPrimitives,
  kMessages,
  kBytecode,
  kKernelLibrary,
  kSourceMap,
  kDeviceCode
};
constexpr size_t kFileHeaderBytes = 16;     // magic, byte-order mark, version
constexpr size_t kSectionHeaderBytes = 20;  // tag, checksum, length

inline Bytes MakeBytes(std::initializer_list<int> values) {
  Bytes bytes;
  for (int value : values) bytes.push_back(static_cast<std::byte>(value));
  return bytes;
}

inline uint64_t ReadLE(const Bytes& bytes, size_t offset, size_t width) {
  uint64_t value = 0;
  for (size_t i = 0; i < width; ++i) {
    value |= static_cast<uint64_t>(bytes.at(offset + i)) << (8 * i);
  }
  return value;
}

inline void WriteLE(Bytes& bytes, size_t offset, size_t width, uint64_t value) {
  for (size_t i = 0; i < width; ++i) {
    bytes.at(offset + i) = static_cast<std::byte>(value >> (8 * i));
  }
}

// Offset of the payload of the section tagged `tag` in a well-formed file.
inline size_t PayloadOffset(const Bytes& file, uint32_t tag) {
  size_t offset = kFileHeaderBytes;
  while (ReadLE(file, offset, 4) != tag) {
    offset += kSectionHeaderBytes + ReadLE(file, offset + 12, 8);
  }
  return offset + kSectionHeaderBytes;
}

// `file` (well-formed but for its payloads' contents) with every section's
// checksum recomputed, so that bytes patched inside a payload reach its
// decoder instead of failing the checksum.
inline Bytes Resealed(Bytes file) {
  for (size_t offset = kFileHeaderBytes; offset + kSectionHeaderBytes <= file.size();) {
    const size_t length = ReadLE(file, offset + 12, 8);
    const size_t begin = offset + kSectionHeaderBytes;
    if (length > file.size() - begin) break;
    WriteLE(file, offset + 4, 8, SectionChecksum(std::span(file).subspan(begin, length)));
    offset = begin + length;
  }
  return file;
}

// `file` with the payload of section `tag` replaced (its length and
// checksum fixed).
inline Bytes WithPayload(const Bytes& file, uint32_t tag, const Bytes& payload) {
  const size_t begin = PayloadOffset(file, tag);
  const size_t end = begin + ReadLE(file, begin - 8, 8);
  Bytes patched(file.begin(), file.begin() + begin);
  WriteLE(patched, begin - 8, 8, payload.size());
  WriteLE(patched, begin - 16, 8, SectionChecksum(payload));
  patched.insert(patched.end(), payload.begin(), payload.end());
  patched.insert(patched.end(), file.begin() + end, file.end());
  return patched;
}

inline Executable MakeSampleExecutable() {
  using I = Instruction;
  Executable exe;
  exe.target = "intel";
  exe.devices = {Device{DeviceType::kCPU, 0}, Device{DeviceType::kCUDA, 0},
                 Device{DeviceType::kCUDA, 1}};
  exe.host_device_index = 0;

  VMFunction main{"main", 2, 16, {}};
  main.instructions = {
      I::LoadConst(0, 2),
      I::LoadConsti(1, 3),
      I::If(3, kNoRegister, 1, 1, 2),
      I::Goto(1),
      I::If(3, 3, 0, 1, 1),
      I::AllocStorage(kNoRegister, 1024, 64, DataType::Float32(), 0, 4),
      I::AllocStorage(3, 0, 128, DataType::Int64(), 1, 5),
      I::AllocTensor(4, kNoRegister, 0, {2, 3}, DataType::Float32(), 6),
      I::AllocTensor(4, 3, 0, {}, DataType::Int64(), 7),
      I::ShapeOf(6, DataType::Int64(), 8),
      I::AllocTensorReg(4, 64, 8, DataType::Float32(), 9),
      I::InvokePacked(0, {0, 1}, {6}),
      I::InvokePacked(1, {6}, {9, 7}),
      I::ReshapeTensor(6, 8, 10),
      I::DeviceCopy(10, 0, 1, 11),
      I::AllocADT(0, {6, 9}, 12),
      I::GetField(12, 1, 13),
      I::GetTag(12, 14),
      I::Scalar(ScalarOperator::kAdd, 3, kNoRegister, 1, DataType::Int64(), 7),
      I::Scalar(ScalarOperator::kLess, 3, 7, 0, DataType::Int64(), 3),
      I::AllocClosure(2, {13}, 15),
      I::InvokeClosure(15, {6}, 13),
      I::Invoke(1, {13}, 14),
      I::Move(14, 2),
      I::KillRegister(13),
      I::If(14, 3, 0, 2, 1),
      I::Fatal(0),
      // Payloads (tag 0, field 0, int32, ()) and (tag 1, field 1, float32, (3, 4)).
      I::TreeSchedule(12, 2, {0, 0, 0, 32, 0, 1, 1, 2, 32, 2, 3, 4}, 15),
      I::Ret(2),
  };
  main.params = {
      {"x", ParamType::Tensor(DataType::Float32(), {ParamType::kAnyDim, 16})},
      {"pair", ParamType::Tuple({ParamType::Tensor(DataType::Int64(), {}),
                                 ParamType::Tuple({ParamType::Other("List[float32]")})})},
  };
  main.positions.resize(main.instructions.size());
  main.positions[0] = {3, 7};
  main.positions[26] = {12, 1};
  VMFunction helper{"helper", 1, 1, {I::Goto(2), I::Ret(0), I::Goto(-1)}};
  helper.params = {{"", ParamType::Other("fn (Tensor[(), int32]) -> Tensor[(), int32]")}};
  VMFunction closure_body{"closure_body", 2, 2, {I::Ret(1)}};
  closure_body.positions = {{1, 1}};
  exe.functions = {main, helper, closure_body};
  exe.source_name = "prog.relay";

  exe.constants = {
      {TensorNode::FromVector<float>({2, 3}, DataType::Float32(), {1, 2, 3, 4, 5, 6.5f}), 0},
      {TensorNode::Scalar<int64_t>(DataType::Int64(), -(int64_t{1} << 62)), 0},
      {TensorNode::FromVector<int>({4}, DataType::Bool(), {1, 0, 0, 1}), 0},
      {TensorNode::Empty({0, 3}, DataType::Float16()), 1},
      {TensorNode::FromVector<int>({3}, DataType::Int8(), {-128, 0, 127}), 2},
      {TensorNode::FromVector<double>({2}, DataType::Float64(), {0.1, -1e300}), 0},
      {TensorNode::FromVector<int>({2, 1}, DataType::Int32(), {7, -7}), 1},
      {TensorNode::FromVector<int>({1}, DataType(DataType::Code::kUInt, 8), {255}), 0},
  };

  Attrs attrs;
  attrs.Set("none", std::monostate{});
  attrs.Set("flag", true);
  attrs.Set("axis", int64_t{-1});
  attrs.Set("scale", 0.5);
  attrs.Set("mode", std::string("same"));
  attrs.Set("newshape", std::vector<int64_t>{1, -1, 0});
  attrs.Set("dtype", DataType::Int64());
  exe.primitives = {{"add", {}}, {"concatenate", attrs}};

  exe.messages = {"non-exhaustive match at 3:7", "", "quote \" and\nnewline"};
  for (int i = 0; i < 300; ++i) exe.kernel_library.push_back(static_cast<std::byte>(i * 7));
  return exe;
}

inline std::vector<std::byte> TensorBytes(const Tensor& tensor) {
  std::vector<std::byte> bytes(tensor->nbytes());
  if (!bytes.empty()) std::memcpy(bytes.data(), tensor->raw_data(), bytes.size());
  return bytes;
}

// Field-by-field equality (constants compared by dtype, shape, device and bytes).
inline void ExpectSameExecutable(const Executable& actual, const Executable& expected) {
  EXPECT_EQ(actual.target, expected.target);
  EXPECT_EQ(actual.devices, expected.devices);
  EXPECT_EQ(actual.host_device_index, expected.host_device_index);
  EXPECT_EQ(actual.functions, expected.functions);
  EXPECT_EQ(actual.primitives, expected.primitives);
  EXPECT_EQ(actual.messages, expected.messages);
  EXPECT_EQ(actual.kernel_library, expected.kernel_library);
  EXPECT_EQ(actual.source_name, expected.source_name);
  ASSERT_EQ(actual.constants.size(), expected.constants.size());
  for (size_t i = 0; i < actual.constants.size(); ++i) {
    SCOPED_TRACE("constant " + std::to_string(i));
    const ConstantEntry& a = actual.constants[i];
    const ConstantEntry& e = expected.constants[i];
    EXPECT_EQ(a.device_index, e.device_index);
    EXPECT_EQ(a.tensor->dtype(), e.tensor->dtype());
    EXPECT_EQ(a.tensor->shape(), e.tensor->shape());
    EXPECT_EQ(TensorBytes(a.tensor), TensorBytes(e.tensor));
  }
}

}  // namespace nimble::vm::testing
