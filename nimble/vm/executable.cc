// The file layout is the same on every host: integers have the fixed widths
// named below and are little-endian, floats are their IEEE-754 bit patterns
// stored as such integers, and constants' bytes are little-endian elements.
//
//   "NIMBLEVM"  uint32 byte-order mark 0x01020304  uint32 format version
//   then each section as  uint32 tag, uint64 checksum (SectionChecksum of the
//   payload), uint64 payload length, payload, in this fixed order:
//   1 target          string
//   2 devices         uint32 count, per device int32 type, int32 id; int32 host index
//   3 functions       uint32 count, per function string name, int32 num_params,
//                     int32 register_file_size, uint32 signature length (0 or
//                     num_params), per parameter string name and its type
//   4 constants       uint32 count, per constant uint8 dtype code, uint8 bits,
//                     uint32 ndim, int64 dims[ndim], int32 device index,
//                     uint64 byte count, raw bytes
//   5 primitives      uint32 count, per primitive string name, uint32 attr count,
//                     per attr string name, uint8 kind (the AttrValue index), value
//   6 messages        uint32 count, strings
//   7 bytecode        per function of the table: uint32 instruction count, then per
//                     instruction an opcode byte and only the fields its opcode uses
//                     (CodeFields): registers, indices and immediates as zigzag
//                     LEB128 varints, lists as a varint count and their elements,
//                     dtypes as code and bits bytes
//   8 kernel library  the raw bytes
//   9 source map      string source name; per function of the table a varint
//                     count (0 or its instruction count), then per instruction
//                     varint line and varint column (line 0: unknown)
//  10 device code     the raw bytes: PTX of the GPU kernels (target nvidia), or empty
//
// A string is a uint32 length and its bytes. A parameter type is a uint8 kind
// (ParamType::Kind), then for a tensor its dtype, uint32 ndim, int64 dims
// (-1 for `?`) and int64 bounds (-1: none), for a tuple a uint32 count and
// the fields' types, for another type its name as a string. Counts are checked against the bytes
// left before anything is allocated. The byte-order mark comes before
// everything else read as an integer, so that a file whose integers were
// written big-endian is named as such rather than as a strange version.
#include "nimble/vm/executable.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <set>
#include <string_view>
#include <type_traits>
#include <utility>

#include "nimble/vm/error.h"
#include "nimble/vm/extent_switch.h"
#include "nimble/vm/file_io.h"
#include "nimble/vm/tree_schedule.h"

namespace nimble::vm {
namespace {

constexpr char kMagic[8] = {'N', 'I', 'M', 'B', 'L', 'E', 'V', 'M'};
constexpr uint32_t kByteOrderMark = 0x01020304;
constexpr uint32_t kBigEndianByteOrderMark = 0x04030201;  // the mark written big-endian
// Constants' bytes are copied as they lie in memory, which is the file's
// layout on every host the runtime builds for (x86-64, aarch64).
static_assert(std::endian::native == std::endian::little,
              "executable constants are stored little-endian");
static_assert(std::numeric_limits<float>::is_iec559 && std::numeric_limits<double>::is_iec559,
              "executable floats are IEEE-754");
constexpr size_t kSectionHeaderBytes = sizeof(uint32_t) + 2 * sizeof(uint64_t);

enum class Section : uint32_t {
  kTarget = 1,
  kDevices,
  kFunctions,
  kConstants,
  kPrimitives,
  kMessages,
  kBytecode,
  kKernelLibrary,
  kSourceMap,
  kDeviceCode,
};
constexpr Section kSectionOrder[] = {
    Section::kTarget,     Section::kDevices,    Section::kFunctions, Section::kConstants,
    Section::kPrimitives, Section::kMessages,   Section::kBytecode,  Section::kKernelLibrary,
    Section::kSourceMap,  Section::kDeviceCode,
};

std::string Hex32(uint32_t value) {
  char text[11];
  std::snprintf(text, sizeof(text), "0x%08x", value);
  return text;
}

std::string Hex64(uint64_t value) {
  char text[19];
  std::snprintf(text, sizeof(text), "0x%016llx", static_cast<unsigned long long>(value));
  return text;
}

// The finaliser of MurmurHash3: every input bit reaches every output bit.
uint64_t Mix64(uint64_t value) {
  value ^= value >> 33;
  value *= 0xff51afd7ed558ccdull;
  value ^= value >> 33;
  value *= 0xc4ceb9fe1a85ec53ull;
  return value ^ (value >> 33);
}

std::string SectionName(Section section) {
  switch (section) {
    case Section::kTarget:
      return "target";
    case Section::kDevices:
      return "devices";
    case Section::kFunctions:
      return "functions";
    case Section::kConstants:
      return "constants";
    case Section::kPrimitives:
      return "primitives";
    case Section::kMessages:
      return "messages";
    case Section::kBytecode:
      return "bytecode";
    case Section::kKernelLibrary:
      return "kernel library";
    case Section::kSourceMap:
      return "source map";
    case Section::kDeviceCode:
      return "device code";
  }
  return "?";
}

class Writer {
 public:
  void U8(uint8_t value) { Fixed(value); }
  void U32(uint32_t value) { Fixed(value); }
  void U64(uint64_t value) { Fixed(value); }
  void I32(int32_t value) { Fixed(static_cast<uint32_t>(value)); }
  void I64(int64_t value) { Fixed(static_cast<uint64_t>(value)); }
  void F64(double value) { Fixed(std::bit_cast<uint64_t>(value)); }
  void Bytes(std::span<const std::byte> bytes) {
    bytes_.insert(bytes_.end(), bytes.begin(), bytes.end());
  }
  // Element counts and string lengths are uint32.
  void Count(size_t count, const std::string& what) {
    if (count > std::numeric_limits<uint32_t>::max()) {
      throw Error("executable: cannot save " + what + ": " + std::to_string(count) +
                  " entries exceed the format's limit");
    }
    U32(static_cast<uint32_t>(count));
  }
  void String(const std::string& text) {
    Count(text.size(), "a string");
    Bytes(std::as_bytes(std::span(text)));
  }
  void DType(DataType dtype) {
    U8(static_cast<uint8_t>(dtype.code()));
    U8(static_cast<uint8_t>(dtype.bits()));
  }
  void VarUint(uint64_t value) {
    while (value >= 0x80) {
      U8(static_cast<uint8_t>(value | 0x80));
      value >>= 7;
    }
    U8(static_cast<uint8_t>(value));
  }
  // Zigzag: small negative numbers (kNoRegister, backward jumps) stay short.
  void VarInt(int64_t value) {
    VarUint((static_cast<uint64_t>(value) << 1) ^ static_cast<uint64_t>(value >> 63));
  }
  void AppendSection(Section tag, const Writer& payload) {
    U32(static_cast<uint32_t>(tag));
    U64(SectionChecksum(payload.bytes_));
    U64(payload.bytes_.size());
    Bytes(payload.bytes_);
  }

  std::vector<std::byte> Take() { return std::move(bytes_); }

 private:
  template <typename T>
  void Fixed(T value) {
    for (size_t i = 0; i < sizeof(T); ++i) {
      bytes_.push_back(static_cast<std::byte>(value >> (8 * i)));
    }
  }

  std::vector<std::byte> bytes_;
};

// Bounds-checked reads over one span. `part` names what is read ("constants
// section") and `where` the entry being read, for error messages.
class Reader {
 public:
  Reader(std::span<const std::byte> bytes, std::string part)
      : bytes_(bytes), part_(std::move(part)) {}

  void At(std::string where) { where_ = std::move(where); }
  size_t remaining() const { return bytes_.size() - offset_; }

  std::span<const std::byte> Bytes(uint64_t count) {
    if (count > remaining()) {
      throw Error("executable: truncated " + part_ + (where_.empty() ? "" : " (" + where_ + ")"));
    }
    const auto bytes = bytes_.subspan(offset_, static_cast<size_t>(count));
    offset_ += static_cast<size_t>(count);
    return bytes;
  }
  uint8_t U8() { return Fixed<uint8_t>(); }
  uint32_t U32() { return Fixed<uint32_t>(); }
  uint64_t U64() { return Fixed<uint64_t>(); }
  int32_t I32() { return static_cast<int32_t>(Fixed<uint32_t>()); }
  int64_t I64() { return static_cast<int64_t>(Fixed<uint64_t>()); }
  double F64() { return std::bit_cast<double>(Fixed<uint64_t>()); }

  // A uint32 count of entries that take at least `min_entry_bytes` each,
  // rejected when the bytes left cannot hold them.
  size_t Count(size_t min_entry_bytes) { return CheckCount(U32(), min_entry_bytes); }
  size_t VarCount(size_t min_entry_bytes) { return CheckCount(VarUint(), min_entry_bytes); }

  std::string String() {
    const auto bytes = Bytes(U32());
    return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  }
  bool Bool() {
    const uint8_t value = U8();
    if (value > 1) Fail("bool byte " + std::to_string(value) + " is not 0 or 1");
    return value == 1;
  }
  DataType DType() {
    const uint8_t code = U8();
    const uint8_t bits = U8();
    const DataType dtype(static_cast<DataType::Code>(code), bits);
    DataType known;
    if (!DataType::TryParse(dtype.name(), &known) || known != dtype) {
      Fail("unknown dtype (code " + std::to_string(code) + ", bits " + std::to_string(bits) + ")");
    }
    return dtype;
  }

  uint64_t VarUint() {
    uint64_t value = 0;
    for (int shift = 0;; shift += 7) {
      const uint8_t byte = U8();
      if (shift == 63 && (byte & 0xfe) != 0) Fail("varint longer than 64 bits");
      value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return value;
    }
  }
  int64_t VarInt() {
    const uint64_t zigzag = VarUint();
    return static_cast<int64_t>((zigzag >> 1) ^ (~(zigzag & 1) + 1));
  }
  int32_t VarInt32() {
    const int64_t value = VarInt();
    if (value < std::numeric_limits<int32_t>::min() ||
        value > std::numeric_limits<int32_t>::max()) {
      Fail("value " + std::to_string(value) + " does not fit in 32 bits");
    }
    return static_cast<int32_t>(value);
  }

  void ExpectEnd() {
    if (remaining() != 0) {
      where_.clear();
      Fail(std::to_string(remaining()) + " unexpected bytes at the end");
    }
  }

  [[noreturn]] void Fail(const std::string& problem) const {
    throw Error("executable: " + part_ + (where_.empty() ? "" : ", " + where_) + ": " + problem);
  }

 private:
  template <typename T>
  T Fixed() {
    const auto bytes = Bytes(sizeof(T));
    T value = 0;
    for (size_t i = 0; i < sizeof(T); ++i) {
      value |= static_cast<T>(static_cast<T>(bytes[i]) << (8 * i));
    }
    return value;
  }

  size_t CheckCount(uint64_t count, size_t min_entry_bytes) {
    if (count > remaining() / min_entry_bytes) {
      Fail("count " + std::to_string(count) + " exceeds the " + std::to_string(remaining()) +
           " bytes left");
    }
    return static_cast<size_t>(count);
  }

  std::span<const std::byte> bytes_;
  size_t offset_ = 0;
  std::string part_;
  std::string where_;
};

// Field codecs for CodeFields: the writer takes values, the reader fills references.
struct FieldWriter {
  Writer& out;
  void Reg(RegName reg) { out.VarInt(reg); }
  void Int(int64_t value) { out.VarInt(value); }
  void Int32(int32_t value) { out.VarInt(value); }
  void DType(DataType dtype) { out.DType(dtype); }
  void Regs(const std::vector<RegName>& regs) {
    out.VarUint(regs.size());
    for (RegName reg : regs) Reg(reg);
  }
  void Dims(const Shape& values) {
    out.VarUint(values.size());
    for (int64_t value : values) Int(value);
  }
};

struct FieldReader {
  Reader& in;
  void Reg(RegName& reg) { reg = in.VarInt32(); }
  void Int(int64_t& value) { value = in.VarInt(); }
  void Int32(int32_t& value) { value = in.VarInt32(); }
  void DType(DataType& dtype) { dtype = in.DType(); }
  void Regs(std::vector<RegName>& regs) {
    regs.resize(in.VarCount(1));
    for (RegName& reg : regs) Reg(reg);
  }
  void Dims(Shape& values) {
    values.resize(in.VarCount(1));
    for (int64_t& value : values) Int(value);
  }
};

// The fields each opcode stores, in file order (the field table of
// bytecode.h). One description serves the writer and the reader, so the two
// cannot disagree; `Inst` is `const Instruction` when writing.
template <typename Codec, typename Inst>
void CodeFields(Codec& codec, Inst& in) {
  switch (in.op) {
    case Opcode::kMove:
    case Opcode::kGetTag:
      codec.Reg(in.src);
      codec.Reg(in.dst);
      return;
    case Opcode::kShapeOf:
      codec.Reg(in.src);
      codec.DType(in.dtype);
      codec.Reg(in.dst);
      return;
    case Opcode::kTreeSchedule:
      codec.Reg(in.src);
      codec.Int(in.index);
      codec.Dims(in.shape);
      codec.Reg(in.dst);
      return;
    case Opcode::kScalar:
      codec.Int(in.index);
      codec.Reg(in.src);
      codec.Reg(in.operand);
      codec.Int(in.immediate);
      codec.DType(in.dtype);
      codec.Reg(in.dst);
      return;
    case Opcode::kRet:
      codec.Reg(in.src);
      return;
    case Opcode::kInvoke:
    case Opcode::kAllocADT:
    case Opcode::kAllocClosure:
      codec.Int(in.index);
      codec.Regs(in.args);
      codec.Int(in.immediate);
      codec.Reg(in.dst);
      return;
    case Opcode::kInvokeClosure:
      codec.Reg(in.src);
      codec.Regs(in.args);
      codec.Int(in.immediate);
      codec.Reg(in.dst);
      return;
    case Opcode::kInvokePacked:
      codec.Int(in.index);
      codec.Int(in.immediate);
      codec.Regs(in.args);
      return;
    case Opcode::kAllocStorage:
      codec.Reg(in.src);
      codec.Int(in.immediate);
      codec.Int32(in.alignment);
      codec.DType(in.dtype);
      codec.Int32(in.device_index);
      codec.Reg(in.dst);
      return;
    case Opcode::kAllocTensor:
      codec.Reg(in.src);
      codec.Reg(in.operand);
      codec.Int(in.immediate);
      codec.Dims(in.shape);
      codec.DType(in.dtype);
      codec.Reg(in.dst);
      return;
    case Opcode::kAllocTensorReg:
      codec.Reg(in.src);
      codec.Reg(in.operand);
      codec.Int(in.immediate);
      codec.DType(in.dtype);
      codec.Reg(in.dst);
      return;
    case Opcode::kReshapeTensor:
      codec.Reg(in.src);
      codec.Reg(in.operand);
      codec.Reg(in.dst);
      return;
    case Opcode::kGetField:
      codec.Reg(in.src);
      codec.Int(in.index);
      codec.Reg(in.dst);
      return;
    case Opcode::kIf:
      codec.Reg(in.src);
      codec.Reg(in.operand);
      codec.Int(in.immediate);
      codec.Int32(in.true_offset);
      codec.Int32(in.false_offset);
      return;
    case Opcode::kGoto:
      codec.Int32(in.true_offset);
      return;
    case Opcode::kLoadConst:
      codec.Int(in.index);
      codec.Reg(in.dst);
      return;
    case Opcode::kFatal:
      codec.Int(in.index);
      return;
    case Opcode::kLoadConsti:
      codec.Int(in.immediate);
      codec.Reg(in.dst);
      return;
    case Opcode::kDeviceCopy:
      codec.Reg(in.src);
      codec.Int32(in.source_device_index);
      codec.Int32(in.device_index);
      codec.Reg(in.dst);
      return;
    case Opcode::kKillRegister:
      codec.Reg(in.dst);
      return;
  }
}

void WriteAttrValue(Writer& out, const AttrValue& value) {
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>) {
          out.U8(v ? 1 : 0);
        } else if constexpr (std::is_same_v<T, int64_t>) {
          out.I64(v);
        } else if constexpr (std::is_same_v<T, double>) {
          out.F64(v);
        } else if constexpr (std::is_same_v<T, std::string>) {
          out.String(v);
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          out.Count(v.size(), "an int list attribute");
          for (int64_t element : v) out.I64(element);
        } else if constexpr (std::is_same_v<T, DataType>) {
          out.DType(v);
        }
      },
      value);
}

AttrValue ReadAttrValue(Reader& in) {
  const uint8_t kind = in.U8();
  // The kinds are the AttrValue alternatives, in their order.
  switch (kind) {
    case 0:
      return std::monostate{};
    case 1:
      return in.Bool();
    case 2:
      return in.I64();
    case 3:
      return in.F64();
    case 4:
      return in.String();
    case 5: {
      std::vector<int64_t> values(in.Count(sizeof(int64_t)));
      for (int64_t& value : values) value = in.I64();
      return values;
    }
    case 6:
      return in.DType();
  }
  in.Fail("unknown attribute kind " + std::to_string(kind));
}
static_assert(std::variant_size_v<AttrValue> == 7, "ReadAttrValue decodes 7 attribute kinds");

void WriteParamType(Writer& out, const ParamType& type) {
  out.U8(static_cast<uint8_t>(type.kind));
  switch (type.kind) {
    case ParamType::Kind::kTensor:
      out.DType(type.dtype);
      out.Count(type.dims.size(), "parameter dimensions");
      for (int64_t dim : type.dims) out.I64(dim);
      for (int64_t bound : type.bounds) out.I64(bound);
      return;
    case ParamType::Kind::kTuple:
      out.Count(type.fields.size(), "tuple fields");
      for (const ParamType& field : type.fields) WriteParamType(out, field);
      return;
    case ParamType::Kind::kOther:
      out.String(type.name);
      return;
  }
}

ParamType ReadParamType(Reader& in, int depth) {
  if (depth > ParamType::kMaxDepth) {
    in.Fail("parameter type nested deeper than " + std::to_string(ParamType::kMaxDepth));
  }
  const uint8_t kind = in.U8();
  switch (static_cast<ParamType::Kind>(kind)) {
    case ParamType::Kind::kTensor: {
      const DataType dtype = in.DType();
      std::vector<int64_t> dims(in.Count(2 * sizeof(int64_t)));
      for (int64_t& dim : dims) dim = in.I64();
      std::vector<int64_t> bounds(dims.size());
      for (int64_t& bound : bounds) bound = in.I64();
      return ParamType::Tensor(dtype, std::move(dims), std::move(bounds));
    }
    case ParamType::Kind::kTuple: {
      std::vector<ParamType> fields(in.Count(1));
      for (ParamType& field : fields) field = ReadParamType(in, depth + 1);
      return ParamType::Tuple(std::move(fields));
    }
    case ParamType::Kind::kOther:
      return ParamType::Other(in.String());
  }
  in.Fail("unknown parameter type kind " + std::to_string(kind));
}

void WriteSections(const Executable& exe, Writer& file) {
  Writer target;
  target.String(exe.target);
  file.AppendSection(Section::kTarget, target);

  Writer devices;
  devices.Count(exe.devices.size(), "devices");
  for (const Device& device : exe.devices) {
    devices.I32(static_cast<int32_t>(device.type));
    devices.I32(device.id);
  }
  devices.I32(exe.host_device_index);
  file.AppendSection(Section::kDevices, devices);

  Writer functions;
  functions.Count(exe.functions.size(), "functions");
  for (const VMFunction& function : exe.functions) {
    functions.String(function.name);
    functions.I32(function.num_params);
    functions.I32(function.register_file_size);
    functions.Count(function.params.size(), "parameters of @" + function.name);
    for (const Param& param : function.params) {
      functions.String(param.name);
      WriteParamType(functions, param.type);
    }
  }
  file.AppendSection(Section::kFunctions, functions);

  Writer constants;
  constants.Count(exe.constants.size(), "constants");
  for (size_t i = 0; i < exe.constants.size(); ++i) {
    const Tensor& tensor = exe.constants[i].tensor;
    if (!tensor) {
      throw Error("executable: cannot save constant " + std::to_string(i) + ": no tensor");
    }
    constants.DType(tensor->dtype());
    constants.Count(tensor->shape().size(), "constant dimensions");
    for (int64_t dim : tensor->shape()) constants.I64(dim);
    constants.I32(exe.constants[i].device_index);
    constants.U64(tensor->nbytes());
    constants.Bytes(std::span(static_cast<const std::byte*>(tensor->raw_data()), tensor->nbytes()));
  }
  file.AppendSection(Section::kConstants, constants);

  Writer primitives;
  primitives.Count(exe.primitives.size(), "primitives");
  for (const Primitive& primitive : exe.primitives) {
    primitives.String(primitive.name);
    primitives.Count(primitive.attrs.entries().size(), "attributes");
    for (const auto& [name, value] : primitive.attrs.entries()) {
      primitives.String(name);
      primitives.U8(static_cast<uint8_t>(value.index()));
      WriteAttrValue(primitives, value);
    }
  }
  file.AppendSection(Section::kPrimitives, primitives);

  Writer messages;
  messages.Count(exe.messages.size(), "messages");
  for (const std::string& message : exe.messages) messages.String(message);
  file.AppendSection(Section::kMessages, messages);

  Writer bytecode;
  FieldWriter fields{bytecode};
  for (const VMFunction& function : exe.functions) {
    bytecode.Count(function.instructions.size(), "instructions of @" + function.name);
    for (const Instruction& instruction : function.instructions) {
      bytecode.U8(static_cast<uint8_t>(instruction.op));
      CodeFields(fields, instruction);
    }
  }
  file.AppendSection(Section::kBytecode, bytecode);

  Writer library;
  library.Bytes(exe.kernel_library);
  file.AppendSection(Section::kKernelLibrary, library);

  Writer source_map;
  source_map.String(exe.source_name);
  for (const VMFunction& function : exe.functions) {
    source_map.VarUint(function.positions.size());
    for (const SourcePosition& position : function.positions) {
      source_map.VarInt(position.line);
      source_map.VarInt(position.column);
    }
  }
  file.AppendSection(Section::kSourceMap, source_map);

  Writer device_code;
  device_code.Bytes(exe.device_code);
  file.AppendSection(Section::kDeviceCode, device_code);
}

void ReadTarget(Reader& in, Executable& exe) {
  exe.target = in.String();
}

void ReadDevices(Reader& in, Executable& exe) {
  exe.devices.resize(in.Count(2 * sizeof(int32_t)));
  for (size_t i = 0; i < exe.devices.size(); ++i) {
    in.At("device " + std::to_string(i));
    const int32_t type = in.I32();
    if (type != static_cast<int32_t>(DeviceType::kCPU) &&
        type != static_cast<int32_t>(DeviceType::kCUDA)) {
      in.Fail("unknown device type " + std::to_string(type));
    }
    exe.devices[i] = Device{static_cast<DeviceType>(type), in.I32()};
  }
  in.At("host device index");
  exe.host_device_index = in.I32();
}

void ReadFunctions(Reader& in, Executable& exe) {
  exe.functions.resize(in.Count(2 * sizeof(uint32_t) + 2 * sizeof(int32_t)));
  for (size_t i = 0; i < exe.functions.size(); ++i) {
    in.At("function " + std::to_string(i));
    VMFunction& function = exe.functions[i];
    function.name = in.String();
    function.num_params = in.I32();
    function.register_file_size = in.I32();
    // A parameter takes at least its name's length and a kind byte.
    function.params.resize(in.Count(sizeof(uint32_t) + 1));
    for (Param& param : function.params) {
      param.name = in.String();
      param.type = ReadParamType(in, 0);
    }
  }
}

void ReadConstants(Reader& in, Executable& exe) {
  constexpr size_t kMinConstantBytes = 2 + sizeof(uint32_t) + sizeof(int32_t) + sizeof(uint64_t);
  exe.constants.resize(in.Count(kMinConstantBytes));
  for (size_t i = 0; i < exe.constants.size(); ++i) {
    in.At("constant " + std::to_string(i));
    const DataType dtype = in.DType();
    Shape shape(in.Count(sizeof(int64_t)));
    for (int64_t& dim : shape) dim = in.I64();
    int64_t bytes = 0;
    try {
      bytes = ShapeBytes(shape, dtype);
    } catch (const Error& error) {
      in.Fail(error.what());
    }
    exe.constants[i].device_index = in.I32();
    const uint64_t byte_count = in.U64();
    if (byte_count != static_cast<uint64_t>(bytes)) {
      in.Fail(std::to_string(byte_count) + " bytes for a tensor of shape " + ShapeToString(shape) +
              " and dtype " + dtype.name());
    }
    const auto data = in.Bytes(byte_count);
    if (dtype.is_bool()) {
      for (size_t j = 0; j < data.size(); ++j) {
        if (static_cast<uint8_t>(data[j]) > 1) {
          in.Fail("bool element " + std::to_string(j) + " is not 0 or 1");
        }
      }
    }
    Tensor tensor = TensorNode::Empty(shape, dtype);
    if (!data.empty()) std::memcpy(tensor->raw_data(), data.data(), data.size());
    exe.constants[i].tensor = std::move(tensor);
  }
}

void ReadPrimitives(Reader& in, Executable& exe) {
  exe.primitives.resize(in.Count(2 * sizeof(uint32_t)));
  for (size_t i = 0; i < exe.primitives.size(); ++i) {
    in.At("primitive " + std::to_string(i));
    Primitive& primitive = exe.primitives[i];
    primitive.name = in.String();
    const size_t num_attrs = in.Count(sizeof(uint32_t) + 1);
    for (size_t a = 0; a < num_attrs; ++a) {
      std::string name = in.String();
      if (primitive.attrs.Has(name)) in.Fail("duplicate attribute '" + name + "'");
      primitive.attrs.Set(name, ReadAttrValue(in));
    }
  }
}

void ReadMessages(Reader& in, Executable& exe) {
  exe.messages.resize(in.Count(sizeof(uint32_t)));
  for (std::string& message : exe.messages) message = in.String();
}

void ReadBytecode(Reader& in, Executable& exe) {
  FieldReader fields{in};
  for (VMFunction& function : exe.functions) {
    in.At("function @" + function.name);
    function.instructions.resize(in.Count(1));
    for (size_t pc = 0; pc < function.instructions.size(); ++pc) {
      in.At("function @" + function.name + " pc " + std::to_string(pc));
      const uint8_t op = in.U8();
      if (op >= kNumOpcodes) in.Fail("unknown opcode " + std::to_string(op));
      Instruction& instruction = function.instructions[pc];
      instruction.op = static_cast<Opcode>(op);
      CodeFields(fields, instruction);
    }
  }
}

void ReadRawBytes(Reader& in, std::vector<std::byte>& bytes) {
  const auto payload = in.Bytes(in.remaining());
  bytes.assign(payload.begin(), payload.end());
}

void ReadSourceMap(Reader& in, Executable& exe) {
  exe.source_name = in.String();
  for (VMFunction& function : exe.functions) {
    in.At("function @" + function.name);
    function.positions.resize(in.VarCount(2));
    for (SourcePosition& position : function.positions) {
      position.line = in.VarInt32();
      position.column = in.VarInt32();
    }
  }
}

void ReadSection(Section section, Reader& in, Executable& exe) {
  switch (section) {
    case Section::kTarget:
      return ReadTarget(in, exe);
    case Section::kDevices:
      return ReadDevices(in, exe);
    case Section::kFunctions:
      return ReadFunctions(in, exe);
    case Section::kConstants:
      return ReadConstants(in, exe);
    case Section::kPrimitives:
      return ReadPrimitives(in, exe);
    case Section::kMessages:
      return ReadMessages(in, exe);
    case Section::kBytecode:
      return ReadBytecode(in, exe);
    case Section::kKernelLibrary:
      return ReadRawBytes(in, exe.kernel_library);
    case Section::kSourceMap:
      return ReadSourceMap(in, exe);
    case Section::kDeviceCode:
      return ReadRawBytes(in, exe.device_code);
  }
}

// Checks one function's code against the executable's tables.
class FunctionValidator {
 public:
  FunctionValidator(const Executable& exe, const VMFunction& function)
      : exe_(exe), function_(function) {}

  void Run() {
    const std::string where = "executable: function @" + function_.name + ": ";
    if (function_.num_params < 0 || function_.num_params > function_.register_file_size) {
      throw Error(where + std::to_string(function_.num_params) +
                  " parameters do not fit in the register file of size " +
                  std::to_string(function_.register_file_size));
    }
    if (function_.instructions.empty()) throw Error(where + "no instructions");
    // Each instruction writes at most one register, so a larger file is
    // corrupt, and would make the VM allocate a huge frame.
    const int64_t writable =
        int64_t{function_.num_params} + static_cast<int64_t>(function_.instructions.size());
    if (function_.register_file_size > writable) {
      throw Error(where + "register file size " + std::to_string(function_.register_file_size) +
                  " exceeds its " + std::to_string(function_.num_params) + " parameters plus " +
                  std::to_string(function_.instructions.size()) + " instructions");
    }
    const Opcode last = function_.instructions.back().op;
    if (last != Opcode::kRet && last != Opcode::kGoto && last != Opcode::kFatal) {
      throw Error(where + "the last instruction (pc " +
                  std::to_string(function_.instructions.size() - 1) + ", " + OpcodeName(last) +
                  ") is not ret, goto or fatal, so execution could fall off the end");
    }
    if (!function_.params.empty() &&
        function_.params.size() != static_cast<size_t>(function_.num_params)) {
      throw Error(where + "a signature of " + std::to_string(function_.params.size()) +
                  " parameters for " + std::to_string(function_.num_params) + " parameters");
    }
    for (const Param& param : function_.params) CheckParamType(param.type, 0);
    if (!function_.positions.empty() &&
        function_.positions.size() != function_.instructions.size()) {
      throw Error(where + "a source map of " + std::to_string(function_.positions.size()) +
                  " positions for " + std::to_string(function_.instructions.size()) +
                  " instructions");
    }
    for (size_t pc = 0; pc < function_.positions.size(); ++pc) {
      const SourcePosition& position = function_.positions[pc];
      if (position.line < 0 || position.column < 0) {
        throw Error(where + "negative source position " + position.ToString() + " at pc " +
                    std::to_string(pc));
      }
    }
    for (pc_ = 0; pc_ < function_.instructions.size(); ++pc_) Check(function_.instructions[pc_]);
  }

 private:
  void Check(const Instruction& in) {
    switch (in.op) {
      case Opcode::kMove:
      case Opcode::kGetTag:
        return Regs({in.src, in.dst});
      case Opcode::kShapeOf:
        if (in.dtype != DataType::Int32() && in.dtype != DataType::Int64()) {
          Fail("shape_of gives int32 or int64, not " + in.dtype.name());
        }
        return Regs({in.src, in.dst});
      case Opcode::kTreeSchedule:
        try {
          DecodeTreeScheduleLayout(in.index, in.shape);
        } catch (const Error& error) {
          Fail(error.what());
        }
        return Regs({in.src, in.dst});
      case Opcode::kScalar:
        Index(in.index, kNumScalarOperators, "scalar operator");
        if (!IsScalarDType(in.dtype)) {
          Fail("scalar " + std::string(ScalarOperatorName(static_cast<ScalarOperator>(in.index))) +
               " on " + in.dtype.name() + " (scalar operands are int8, int32, int64 or bool)");
        }
        OptionalReg(in.operand);
        return Regs({in.src, in.dst});
      case Opcode::kRet:
        return Reg(in.src);
      case Opcode::kInvoke: {
        const VMFunction& callee =
            exe_.functions[Index(in.index, exe_.functions.size(), "function")];
        if (in.args.size() != static_cast<size_t>(callee.num_params)) {
          Fail("invoke of @" + callee.name + " passes " + std::to_string(in.args.size()) +
               " arguments, it takes " + std::to_string(callee.num_params));
        }
        MovedArgs(in);
        return Reg(in.dst);
      }
      case Opcode::kInvokeClosure:
        MovedArgs(in);
        return Regs({in.src, in.dst});
      case Opcode::kInvokePacked:
        Index(in.index, exe_.primitives.size(), "kernel");
        if (in.immediate < 1 || static_cast<uint64_t>(in.immediate) > in.args.size()) {
          Fail("invoke_packed with " + std::to_string(in.immediate) + " outputs among " +
               std::to_string(in.args.size()) + " arguments (needs 1 to " +
               std::to_string(in.args.size()) + ")");
        }
        return Regs(in.args);
      case Opcode::kAllocStorage:
        if (in.src == kNoRegister) NonNegative(in.immediate, "storage size");
        if (in.alignment <= 0 || !std::has_single_bit(static_cast<uint32_t>(in.alignment))) {
          Fail("alignment " + std::to_string(in.alignment) + " is not a power of two");
        }
        Index(in.device_index, exe_.devices.size(), "device");
        OptionalReg(in.src);
        return Reg(in.dst);
      case Opcode::kAllocTensor:
        if (in.operand == kNoRegister) NonNegative(in.immediate, "tensor offset");
        try {
          ShapeBytes(in.shape, in.dtype);
        } catch (const Error& error) {
          Fail(error.what());
        }
        OptionalReg(in.operand);
        return Regs({in.src, in.dst});
      case Opcode::kAllocTensorReg:
        NonNegative(in.immediate, "tensor offset");
        return Regs({in.src, in.operand, in.dst});
      case Opcode::kAllocADT:
        NonNegative(in.index, "constructor tag");
        MovedArgs(in);
        return Reg(in.dst);
      case Opcode::kAllocClosure: {
        const VMFunction& callee =
            exe_.functions[Index(in.index, exe_.functions.size(), "function")];
        if (in.args.size() > static_cast<size_t>(callee.num_params)) {
          Fail("closure of @" + callee.name + " captures " + std::to_string(in.args.size()) +
               " values, it takes " + std::to_string(callee.num_params) + " parameters");
        }
        MovedArgs(in);
        return Reg(in.dst);
      }
      case Opcode::kGetField:
        NonNegative(in.index, "field index");
        return Regs({in.src, in.dst});
      case Opcode::kIf:
        Jump(in.true_offset);
        Jump(in.false_offset);
        OptionalReg(in.operand);
        return Reg(in.src);
      case Opcode::kGoto:
        return Jump(in.true_offset);
      case Opcode::kLoadConst:
        Index(in.index, exe_.constants.size(), "constant");
        return Reg(in.dst);
      case Opcode::kLoadConsti:
        return Reg(in.dst);
      case Opcode::kDeviceCopy:
        Index(in.source_device_index, exe_.devices.size(), "device");
        Index(in.device_index, exe_.devices.size(), "device");
        return Regs({in.src, in.dst});
      case Opcode::kReshapeTensor:
        return Regs({in.src, in.operand, in.dst});
      case Opcode::kFatal:
        Index(in.index, exe_.messages.size(), "message");
        return;
      case Opcode::kKillRegister:
        return Reg(in.dst);
    }
    Fail("unknown opcode " + std::to_string(static_cast<int>(in.op)));
  }

  // The loader checks the depth while reading; this is for executables built
  // in memory.
  void CheckParamType(const ParamType& type, int depth) const {
    const std::string where = "executable: function @" + function_.name + ": parameter type ";
    if (depth > ParamType::kMaxDepth) {
      throw Error(where + "nested deeper than " + std::to_string(ParamType::kMaxDepth));
    }
    if (type.bounds.size() != type.dims.size()) {
      throw Error(where + "has " + std::to_string(type.dims.size()) + " dimensions and " +
                  std::to_string(type.bounds.size()) + " bounds");
    }
    for (size_t i = 0; i < type.dims.size(); ++i) {
      const int64_t dim = type.dims[i], bound = type.bounds[i];
      if (dim < ParamType::kAnyDim) throw Error(where + "has dimension " + std::to_string(dim));
      if (bound < ParamType::kNoBound ||
          (bound != ParamType::kNoBound && dim != ParamType::kAnyDim)) {
        throw Error(where + "has bound " + std::to_string(bound) + " on dimension " +
                    std::to_string(dim));
      }
    }
    for (const ParamType& field : type.fields) CheckParamType(field, depth + 1);
  }

  [[noreturn]] void Fail(const std::string& problem) const {
    throw Error("executable: function @" + function_.name + " pc " + std::to_string(pc_) + ": " +
                problem);
  }
  void Reg(RegName reg) const {
    if (reg < 0 || reg >= function_.register_file_size) {
      Fail("register $" + std::to_string(reg) + " out of range (register file size " +
           std::to_string(function_.register_file_size) + ")");
    }
  }
  void OptionalReg(RegName reg) const {
    if (reg != kNoRegister) Reg(reg);
  }
  void Regs(const std::vector<RegName>& regs) const {
    for (RegName reg : regs) Reg(reg);
  }
  // The args, and which of them move: only args that exist and can.
  void MovedArgs(const Instruction& in) const {
    Regs(in.args);
    Instruction allowed = in;
    allowed.immediate = 0;
    for (size_t i = 0; i < 64; ++i) {
      if (in.Moves(i) && !allowed.SetMoves(i)) {
        Fail(i < in.args.size()
                 ? "moves register $" + std::to_string(in.args[i]) +
                       ", which it also reads elsewhere"
                 : "moves argument " + std::to_string(i) + " of " + std::to_string(in.args.size()));
      }
    }
  }
  size_t Index(int64_t index, size_t size, const std::string& table) const {
    if (index < 0 || static_cast<uint64_t>(index) >= size) {
      Fail(table + " index " + std::to_string(index) + " out of range (" + std::to_string(size) +
           " " + table + (size == 1 ? "" : "s") + ")");
    }
    return static_cast<size_t>(index);
  }
  void NonNegative(int64_t value, const std::string& what) const {
    if (value < 0) Fail("negative " + what + " " + std::to_string(value));
  }
  void Jump(int32_t offset) const {
    if (offset == 0) Fail("jump offset 0 would loop forever");
    const int64_t target = static_cast<int64_t>(pc_) + offset;
    if (target < 0 || static_cast<uint64_t>(target) >= function_.instructions.size()) {
      Fail("jump target pc " + std::to_string(target) + " outside the function (" +
           std::to_string(function_.instructions.size()) + " instructions)");
    }
  }

  const Executable& exe_;
  const VMFunction& function_;
  size_t pc_ = 0;
};

// "[1.0, 2.5, ... ]": the first few elements of a constant.
std::string ConstantValues(const Tensor& tensor) {
  constexpr int64_t kShown = 8;
  const int64_t numel = tensor->numel();
  std::string text = "[";
  for (int64_t i = 0; i < std::min(numel, kShown); ++i) {
    if (i) text += ", ";
    if (tensor->dtype().is_float()) {
      text += FormatFloatLiteral(tensor->GetAsDouble(i));
    } else if (tensor->dtype().is_bool()) {
      text += tensor->GetAsInt64(i) ? "True" : "False";
    } else {
      text += std::to_string(tensor->GetAsInt64(i));
    }
  }
  if (numel > kShown) text += ", ... (" + std::to_string(numel) + " elements)";
  return text + "]";
}

// A string literal with quotes, backslashes and control characters escaped.
std::string Quote(const std::string& text) {
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      quoted += '\\';
      quoted += c;
    } else if (c == '\n') {
      quoted += "\\n";
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escape[8];
      std::snprintf(escape, sizeof(escape), "\\x%02x", static_cast<unsigned char>(c));
      quoted += escape;
    } else {
      quoted += c;
    }
  }
  return quoted + "\"";
}

// FunctionToString's text with the signature after the header line and
// "  ; line:col" after each instruction whose source position is known.
std::string AnnotatedFunction(const VMFunction& function) {
  const std::string code = FunctionToString(function);
  std::string text;
  size_t begin = 0;
  // Line 0 is the header; line pc + 1 is instruction pc.
  for (size_t line = 0; begin < code.size(); ++line) {
    const size_t end = code.find('\n', begin);
    text.append(code, begin, end - begin);
    if (line > 0 && line <= function.positions.size() && function.positions[line - 1].valid()) {
      text += "  ; " + function.positions[line - 1].ToString();
    }
    text += '\n';
    if (line == 0 && !function.params.empty()) {
      text += "  signature " + SignatureToString(function) + "\n";
    }
    begin = end + 1;
  }
  return text;
}

}  // namespace

ParamType ParamType::Tensor(DataType dtype, std::vector<int64_t> dims,
                            std::vector<int64_t> bounds) {
  ParamType type;
  type.kind = Kind::kTensor;
  type.dtype = dtype;
  if (bounds.empty()) bounds.assign(dims.size(), kNoBound);
  if (bounds.size() != dims.size()) {
    throw Error("a parameter type has " + std::to_string(dims.size()) + " dimensions and " +
                std::to_string(bounds.size()) + " bounds");
  }
  type.dims = std::move(dims);
  type.bounds = std::move(bounds);
  return type;
}

ParamType ParamType::Tuple(std::vector<ParamType> fields) {
  ParamType type;
  type.kind = Kind::kTuple;
  type.fields = std::move(fields);
  return type;
}

ParamType ParamType::Other(std::string name) {
  ParamType type;
  type.name = std::move(name);
  return type;
}

std::string ParamType::ToString() const {
  std::string text;
  switch (kind) {
    case Kind::kTensor:
      text = "Tensor[(";
      for (size_t i = 0; i < dims.size(); ++i) {
        text += (i ? ", " : "") + (dims[i] != kAnyDim      ? std::to_string(dims[i])
                                   : bounds[i] == kNoBound ? std::string("?")
                                                           : "?<=" + std::to_string(bounds[i]));
      }
      return text + (dims.size() == 1 ? ",), " : "), ") + dtype.name() + "]";
    case Kind::kTuple:
      for (size_t i = 0; i < fields.size(); ++i) text += (i ? ", " : "") + fields[i].ToString();
      return "(" + text + (fields.size() == 1 ? ",)" : ")");
    case Kind::kOther:
      return name;
  }
  return "?";
}

std::string SourcePosition::ToString() const {
  return std::to_string(line) + ":" + std::to_string(column);
}

std::string SignatureToString(const VMFunction& function) {
  std::string params;
  for (const Param& param : function.params) {
    params += (params.empty() ? "%" : ", %") + param.name + ": " + param.type.ToString();
  }
  return "@" + function.name + "(" + params + ")";
}

int32_t Executable::FunctionIndex(const std::string& name) const {
  for (size_t i = 0; i < functions.size(); ++i) {
    if (functions[i].name == name) return static_cast<int32_t>(i);
  }
  std::string known;
  for (const VMFunction& function : functions)
    known += (known.empty() ? "@" : ", @") + function.name;
  throw Error("executable: no function @" + name + " (functions: " + known + ")");
}

uint64_t SectionChecksum(std::span<const std::byte> payload) {
  // Four lanes of 64-bit words, each xored in and multiplied by an odd
  // constant (a bijection, so a change confined to one lane always changes
  // the sum), run about four times faster than one chain: BERT's 440 MB of
  // constants are summed at each load.
  constexpr uint64_t kPrime = 0x9e3779b97f4a7c15ull;
  uint64_t lanes[4] = {1, 2, 3, 4};
  size_t offset = 0;
  for (; offset + 4 * sizeof(uint64_t) <= payload.size(); offset += 4 * sizeof(uint64_t)) {
    for (int lane = 0; lane < 4; ++lane) {
      uint64_t word;
      std::memcpy(&word, payload.data() + offset + lane * sizeof(uint64_t), sizeof(word));
      lanes[lane] = (lanes[lane] ^ word) * kPrime;
    }
  }
  for (int lane = 0; offset < payload.size(); ++offset, lane = (lane + 1) % 4) {
    lanes[lane] = (lanes[lane] ^ static_cast<uint8_t>(payload[offset])) * kPrime;
  }
  uint64_t sum = Mix64(payload.size());
  for (uint64_t lane : lanes) sum = Mix64(sum ^ Mix64(lane));
  return sum;
}

std::vector<std::byte> Executable::Save() const {
  Writer file;
  file.Bytes(std::as_bytes(std::span(kMagic)));
  file.U32(kByteOrderMark);
  file.U32(kFormatVersion);
  WriteSections(*this, file);
  return file.Take();
}

Executable Executable::Load(std::span<const std::byte> bytes) {
  Reader file(bytes, "header");
  const auto magic = file.Bytes(std::min(bytes.size(), sizeof(kMagic)));
  if (!std::equal(magic.begin(), magic.end(), std::as_bytes(std::span(kMagic)).begin())) {
    throw Error("executable: not a Nimble executable (bad magic number)");
  }
  file.Bytes(sizeof(kMagic) - magic.size());
  const uint32_t mark = file.U32();
  if (mark == kBigEndianByteOrderMark) {
    throw Error("executable: written big-endian (byte-order mark " + Hex32(mark) +
                "), but the format is little-endian on every host");
  }
  if (mark != kByteOrderMark) {
    throw Error("executable: byte-order mark " + Hex32(mark) + " is not " + Hex32(kByteOrderMark) +
                " (format versions before 3 have none: recompile the program)");
  }
  const uint32_t version = file.U32();
  if (version != kFormatVersion) {
    throw Error("executable: format version " + std::to_string(version) +
                ", but this runtime reads version " + std::to_string(kFormatVersion));
  }
  Executable exe;
  for (Section section : kSectionOrder) {
    const std::string name = SectionName(section);
    if (file.remaining() == 0) {
      throw Error("executable: truncated file: the " + name + " section is missing");
    }
    if (file.remaining() < kSectionHeaderBytes) {
      throw Error("executable: truncated " + name + " section header");
    }
    const uint32_t tag = file.U32();
    if (tag != static_cast<uint32_t>(section)) {
      throw Error("executable: expected the " + name + " section (tag " +
                  std::to_string(static_cast<uint32_t>(section)) + "), found tag " +
                  std::to_string(tag));
    }
    const uint64_t checksum = file.U64();
    const uint64_t length = file.U64();
    if (length > file.remaining()) {
      throw Error("executable: truncated " + name + " section (" + std::to_string(length) +
                  " bytes declared, " + std::to_string(file.remaining()) + " present)");
    }
    const std::span<const std::byte> bytes = file.Bytes(length);
    // Checked before anything in the section is read: a damaged kernel
    // library would otherwise be loaded and run.
    if (const uint64_t computed = SectionChecksum(bytes); computed != checksum) {
      throw Error("executable: section " + std::to_string(tag) + " (" + name +
                  ") checksum mismatch: the file is corrupt (stored " + Hex64(checksum) +
                  ", computed " + Hex64(computed) + ")");
    }
    Reader payload(bytes, name + " section");
    ReadSection(section, payload, exe);
    payload.ExpectEnd();
  }
  if (file.remaining() != 0) {
    throw Error("executable: " + std::to_string(file.remaining()) +
                " unexpected bytes after the last section");
  }
  exe.Validate();
  return exe;
}

void Executable::SaveToFile(const std::string& path) const {
  WriteFileBytes(path, Save());
}

Executable Executable::LoadFromFile(const std::string& path) {
  const std::vector<std::byte> bytes = ReadFileBytes(path);
  try {
    return Load(bytes);
  } catch (const Error& error) {
    throw Error("'" + path + "': " + error.what());
  }
}

void Executable::Validate() const {
  if (host_device_index < 0 || static_cast<size_t>(host_device_index) >= devices.size()) {
    throw Error("executable: host device index " + std::to_string(host_device_index) +
                " out of range (" + std::to_string(devices.size()) + " devices)");
  }
  for (size_t i = 0; i < devices.size(); ++i) {
    if (devices[i].id < 0) {
      throw Error("executable: device " + std::to_string(i) + " has negative id " +
                  std::to_string(devices[i].id));
    }
  }
  for (size_t i = 0; i < constants.size(); ++i) {
    const std::string where = "executable: constant " + std::to_string(i) + ": ";
    if (!constants[i].tensor) throw Error(where + "no tensor");
    if (constants[i].device_index < 0 ||
        static_cast<size_t>(constants[i].device_index) >= devices.size()) {
      throw Error(where + "device index " + std::to_string(constants[i].device_index) +
                  " out of range (" + std::to_string(devices.size()) + " devices)");
    }
  }
  const bool has_cuda = std::any_of(devices.begin(), devices.end(),
                                    [](const Device& d) { return d.type == DeviceType::kCUDA; });
  if (!device_code.empty() && (!has_cuda || kernel_library.empty())) {
    throw Error("executable: device code without a CUDA device and a kernel library to launch it");
  }
  std::set<std::string> names;
  for (const VMFunction& function : functions) {
    if (!names.insert(function.name).second) {
      throw Error("executable: two functions are named @" + function.name);
    }
    FunctionValidator(*this, function).Run();
  }
}

std::string ExecutableToString(const Executable& exe, bool constants) {
  std::string text = "target " + Quote(exe.target) + ", format version " +
                     std::to_string(Executable::kFormatVersion) + "\n";
  if (!exe.source_name.empty()) text += "source " + Quote(exe.source_name) + "\n";
  text += "devices:\n";
  for (size_t i = 0; i < exe.devices.size(); ++i) {
    text += "  device[" + std::to_string(i) + "] " + exe.devices[i].ToString() +
            (static_cast<int32_t>(i) == exe.host_device_index ? " (host)" : "") + "\n";
  }
  text += "kernels:\n";
  for (size_t i = 0; i < exe.primitives.size(); ++i) {
    const Primitive& primitive = exe.primitives[i];
    text += "  kernel[" + std::to_string(i) + "] " + primitive.name;
    if (!primitive.attrs.empty()) {
      std::string attrs;
      for (const auto& [name, value] : primitive.attrs.entries()) {
        attrs += (attrs.empty() ? "" : ", ") + name + "=" + AttrValueToString(value);
      }
      text += "(" + attrs + ")";
    }
    text += "\n";
  }
  text += "constants:\n";
  for (size_t i = 0; i < exe.constants.size(); ++i) {
    const ConstantEntry& constant = exe.constants[i];
    text += "  const[" + std::to_string(i) + "] " +
            (constant.tensor ? constant.tensor->TypeString() : "(none)") + " on device[" +
            std::to_string(constant.device_index) + "]";
    if (constants && constant.tensor) text += " = " + ConstantValues(constant.tensor);
    text += "\n";
  }
  text += "messages:\n";
  for (size_t i = 0; i < exe.messages.size(); ++i) {
    text += "  message[" + std::to_string(i) + "] " + Quote(exe.messages[i]) + "\n";
  }
  text += "kernel library: " + std::to_string(exe.kernel_library.size()) + " bytes\n";
  text += "device code: " + std::to_string(exe.device_code.size()) + " bytes\n";
  for (size_t i = 0; i < exe.functions.size(); ++i) {
    text += "\nfunc[" + std::to_string(i) + "] " + AnnotatedFunction(exe.functions[i]);
  }
  return text;
}

std::string KernelTableToString(const Executable& exe) {
  static constexpr std::string_view kShapeFuncPrefix = "shape_func.";
  std::string text;
  for (size_t i = 0; i < exe.primitives.size(); ++i) {
    const Primitive& primitive = exe.primitives[i];
    const bool shape_func = primitive.name.starts_with(kShapeFuncPrefix);
    std::string source;
    if (primitive.attrs.Has("fused")) {
      source = "generated" + std::string(shape_func ? " shape function" : "") + ", fuses " +
               primitive.attrs.GetString("fused");
      if (primitive.attrs.Has("signature")) source += ", " + primitive.attrs.GetString("signature");
    } else if (primitive.name == kExtentSwitch && primitive.attrs.Has("below") &&
               primitive.attrs.Has("from") && primitive.attrs.Has("extent")) {
      source = "kernel[" + std::to_string(primitive.attrs.GetInt("below")) + "] below extent " +
               std::to_string(primitive.attrs.GetInt("extent")) + ", kernel[" +
               std::to_string(primitive.attrs.GetInt("from")) + "] from it";
    } else if (primitive.name.ends_with(".dnnl")) {
      source = "library oneDNN";
    } else if (primitive.name.ends_with(".openblas")) {
      source = "library OpenBLAS";
    } else {
      source = shape_func ? "built-in shape function" : "built-in";
    }
    text += "kernel[" + std::to_string(i) + "] " + primitive.name + ": " + source + "\n";
  }
  return text;
}

}  // namespace nimble::vm
