#include "nimble/vm/npy.h"

#include <zip.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <string_view>

#include "nimble/vm/error.h"
#include "nimble/vm/file_io.h"

namespace nimble {

namespace {

constexpr std::string_view kMagic = "\x93NUMPY";

// The dtypes a .npy descr may name: kind character, item size, our dtype.
struct NpyDType {
  char kind;
  size_t size;
  DataType dtype;
};

constexpr NpyDType kNpyDTypes[] = {
    {'b', 1, DataType::Bool()},           {'i', 1, DataType::Int8()},
    {'u', 1, {DataType::Code::kUInt, 8}}, {'i', 4, DataType::Int32()},
    {'i', 8, DataType::Int64()},          {'f', 2, DataType::Float16()},
    {'f', 4, DataType::Float32()},        {'f', 8, DataType::Float64()},
};

struct NpyHeader {
  DataType dtype;
  bool fortran_order = false;
  Shape shape;
};

// Parses the header, a Python dict literal such as
// `{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }`.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& file) : text_(text), file_(file) {}

  NpyHeader Parse() {
    NpyHeader header;
    bool has_descr = false, has_fortran_order = false, has_shape = false;
    SkipSpace();
    if (!Consume('{')) Fail("the header is not a dict");
    SkipSpace();
    while (!Consume('}')) {
      const std::string key = ParseString("a key");
      SkipSpace();
      Expect(':');
      SkipSpace();
      if (key == "descr") {
        MarkSeen(&has_descr, key);
        header.dtype = ToDType(ParseString("a dtype string"));
      } else if (key == "fortran_order") {
        MarkSeen(&has_fortran_order, key);
        header.fortran_order = ParseBool();
      } else if (key == "shape") {
        MarkSeen(&has_shape, key);
        header.shape = ParseShape();
      } else {
        Fail("unexpected key '" + key + "' in the header");
      }
      SkipSpace();
      if (!Consume(',')) {
        Expect('}');
        break;
      }
      SkipSpace();
    }
    SkipSpace();
    if (pos_ != text_.size()) Fail("unexpected text after the header dict");
    if (!has_descr) Fail("the header has no 'descr' key");
    if (!has_fortran_order) Fail("the header has no 'fortran_order' key");
    if (!has_shape) Fail("the header has no 'shape' key");
    return header;
  }

 private:
  [[noreturn]] void Fail(const std::string& cause) const { throw Error(file_ + ": " + cause); }
  [[noreturn]] void FailAt(const std::string& expected) const {
    Fail("malformed header: expected " + expected + " at header offset " + std::to_string(pos_));
  }

  void MarkSeen(bool* seen, const std::string& key) const {
    if (*seen) Fail("the header repeats the key '" + key + "'");
    *seen = true;
  }

  void SkipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }

  bool Consume(char c) {
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  void Expect(char c) {
    if (!Consume(c)) FailAt(std::string("'") + c + "'");
  }

  bool ConsumeWord(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  std::string ParseString(const std::string& what) {
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) FailAt(what);
    const char quote = text_[pos_++];
    const size_t end = text_.find(quote, pos_);
    if (end == std::string_view::npos) Fail("malformed header: unterminated string");
    std::string value(text_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return value;
  }

  bool ParseBool() {
    if (ConsumeWord("True")) return true;
    if (ConsumeWord("False")) return false;
    FailAt("True or False for 'fortran_order'");
  }

  int64_t ParseDim() {
    if (pos_ >= text_.size() || text_[pos_] < '0' || text_[pos_] > '9') {
      Fail("bad shape: expected a non-negative integer at header offset " + std::to_string(pos_));
    }
    int64_t value = 0;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      const int digit = text_[pos_++] - '0';
      if (value > (std::numeric_limits<int64_t>::max() - digit) / 10) {
        Fail("bad shape: a dimension is too large");
      }
      value = value * 10 + digit;
    }
    Consume('L');  // Python 2 long literals, as old numpy wrote them.
    return value;
  }

  Shape ParseShape() {
    if (!Consume('(')) FailAt("a tuple for 'shape'");
    Shape shape;
    SkipSpace();
    while (!Consume(')')) {
      shape.push_back(ParseDim());
      SkipSpace();
      if (!Consume(',')) {
        SkipSpace();
        if (!Consume(')')) FailAt("',' or ')' in 'shape'");
        break;
      }
      SkipSpace();
    }
    return shape;
  }

  DataType ToDType(const std::string& descr) const {
    if (descr.size() == 3 && descr[2] >= '1' && descr[2] <= '9') {
      const char order = descr[0];
      const size_t size = static_cast<size_t>(descr[2] - '0');
      for (const NpyDType& entry : kNpyDTypes) {
        if (entry.kind != descr[1] || entry.size != size) continue;
        if (size == 1 && (order == '|' || order == '<' || order == '>' || order == '=')) {
          return entry.dtype;
        }
        if (order == '<' || order == '=') return entry.dtype;
        if (order == '>') Fail("big-endian data ('" + descr + "') is not supported");
      }
    }
    Fail("unsupported dtype '" + descr +
         "' (expected one of |b1, |i1, |u1, <i4, <i8, <f2, <f4, <f8)");
  }

  std::string_view text_;
  const std::string& file_;
  size_t pos_ = 0;
};

uint32_t ReadLittleEndian(std::span<const std::byte> bytes) {
  uint32_t value = 0;
  for (size_t i = bytes.size(); i-- > 0;)
    value = (value << 8) | std::to_integer<uint32_t>(bytes[i]);
  return value;
}

// Copies Fortran-order (first axis fastest) elements into C order: walks the
// source in its own order while stepping a C-order offset into the destination.
void TransposeFromFortran(const std::byte* source, std::byte* destination, const Shape& shape,
                          size_t item_size) {
  struct Axis {
    int64_t extent;
    int64_t c_stride;
    int64_t index = 0;
  };
  std::vector<Axis> axes;
  int64_t stride = 1;
  for (auto dim = shape.rbegin(); dim != shape.rend(); ++dim) {
    axes.insert(axes.begin(), {*dim, stride});
    stride *= *dim;
  }
  const int64_t numel = stride;
  int64_t offset = 0;
  for (int64_t element = 0; element < numel; ++element) {
    std::memcpy(destination + offset * item_size, source + element * item_size, item_size);
    for (Axis& axis : axes) {
      if (++axis.index < axis.extent) {
        offset += axis.c_stride;
        break;
      }
      offset -= (axis.extent - 1) * axis.c_stride;
      axis.index = 0;
    }
  }
}

// The data size `shape` needs, or an error when it does not fit in size_t.
size_t DataBytes(const Shape& shape, size_t item_size, const std::string& file) {
  size_t bytes = item_size;
  for (int64_t dim : shape) {
    const auto size = static_cast<size_t>(dim);
    if (size != 0 && bytes > std::numeric_limits<size_t>::max() / size) {
      throw Error(file + ": bad shape " + ShapeToString(shape) + ": too many elements");
    }
    bytes *= size;
  }
  return bytes;
}

std::string Describe(DataType dtype) {
  for (const NpyDType& entry : kNpyDTypes) {
    if (entry.dtype == dtype) {
      return std::string(1, entry.size == 1 ? '|' : '<') + entry.kind + std::to_string(entry.size);
    }
  }
  throw Error("cannot write dtype " + dtype.name() + " to a .npy file");
}

using ZipArchive = std::unique_ptr<zip_t, void (*)(zip_t*)>;

ZipArchive OpenZip(const std::string& path, int flags) {
  int code = 0;
  zip_t* archive = zip_open(path.c_str(), flags, &code);
  if (!archive) {
    zip_error_t error;
    zip_error_init_with_code(&error, code);
    const std::string message = zip_error_strerror(&error);
    zip_error_fini(&error);
    throw Error("cannot open .npz archive '" + path + "': " + message);
  }
  return ZipArchive(archive, zip_discard);
}

std::vector<std::byte> ReadZipEntry(zip_t* archive, zip_uint64_t index, const std::string& name) {
  std::unique_ptr<zip_file_t, int (*)(zip_file_t*)> file(zip_fopen_index(archive, index, 0),
                                                         zip_fclose);
  if (!file) throw Error(name + ": cannot open the entry: " + zip_strerror(archive));
  // Read as it comes: the size the archive declares may be a lie.
  constexpr size_t kChunk = size_t{1} << 20;
  std::vector<std::byte> bytes;
  while (true) {
    const size_t old_size = bytes.size();
    bytes.resize(old_size + kChunk);
    const zip_int64_t count = zip_fread(file.get(), bytes.data() + old_size, kChunk);
    if (count < 0) throw Error(name + ": cannot read the entry: " + zip_file_strerror(file.get()));
    bytes.resize(old_size + static_cast<size_t>(count));
    if (count == 0) return bytes;
  }
}

}  // namespace

Tensor ParseNpy(std::span<const std::byte> bytes, const std::string& name_for_errors) {
  const std::string& file = name_for_errors;
  if (bytes.size() < kMagic.size() + 2 ||
      std::memcmp(bytes.data(), kMagic.data(), kMagic.size()) != 0) {
    throw Error(file + ": not a .npy file (bad magic)");
  }
  const auto major = std::to_integer<int>(bytes[6]);
  const auto minor = std::to_integer<int>(bytes[7]);
  if (major < 1 || major > 3 || minor != 0) {
    throw Error(file + ": unsupported .npy format version " + std::to_string(major) + "." +
                std::to_string(minor));
  }
  const size_t length_bytes = major == 1 ? 2 : 4;
  const size_t header_start = 8 + length_bytes;
  if (bytes.size() < header_start) throw Error(file + ": truncated header");
  const size_t header_length = ReadLittleEndian(bytes.subspan(8, length_bytes));
  if (bytes.size() - header_start < header_length) {
    throw Error(file + ": truncated header: it declares " + std::to_string(header_length) +
                " bytes, the file has " + std::to_string(bytes.size() - header_start));
  }
  const std::string_view text(reinterpret_cast<const char*>(bytes.data() + header_start),
                              header_length);
  const NpyHeader header = HeaderParser(text, file).Parse();

  const size_t item_size = header.dtype.bytes();
  const size_t expected = DataBytes(header.shape, item_size, file);
  const std::span<const std::byte> data = bytes.subspan(header_start + header_length);
  if (data.size() != expected) {
    throw Error(file + ": the data is " + std::to_string(data.size()) + " bytes " +
                (data.size() < expected ? "(truncated)" : "(trailing bytes)") + " but shape " +
                ShapeToString(header.shape) + " of " + header.dtype.name() + " needs " +
                std::to_string(expected));
  }

  Tensor tensor = TensorNode::Empty(header.shape, header.dtype);
  auto* destination = static_cast<std::byte*>(tensor->raw_data());
  if (header.fortran_order) {
    TransposeFromFortran(data.data(), destination, header.shape, item_size);
  } else if (expected > 0) {
    std::memcpy(destination, data.data(), expected);
  }
  if (header.dtype.is_bool()) {
    // Any byte other than 0 is true; normalise so the storage holds valid bools.
    for (size_t i = 0; i < expected; ++i)
      destination[i] = std::byte{destination[i] != std::byte{0}};
  }
  return tensor;
}

Tensor ReadNpy(const std::string& path) {
  return ParseNpy(ReadFileBytes(path), path);
}

std::vector<std::byte> SerializeNpy(const Tensor& tensor) {
  std::string header = "{'descr': '" + Describe(tensor->dtype()) +
                       "', 'fortran_order': False, 'shape': " + ShapeToString(tensor->shape()) +
                       ", }";
  // Pad with spaces so that the data starts 64-byte aligned; a '\n' ends it.
  const auto padded = [&](size_t preamble) {
    return (preamble + header.size() + 1 + 63) / 64 * 64 - preamble;
  };
  const bool version1 = padded(10) <= std::numeric_limits<uint16_t>::max();
  const size_t preamble = version1 ? 10 : 12;
  header.resize(padded(preamble) - 1, ' ');
  header += '\n';

  std::vector<std::byte> bytes;
  bytes.reserve(preamble + header.size() + tensor->nbytes());
  const auto append = [&](const void* source, size_t size) {
    const auto* begin = static_cast<const std::byte*>(source);
    bytes.insert(bytes.end(), begin, begin + size);
  };
  append(kMagic.data(), kMagic.size());
  bytes.push_back(std::byte{static_cast<uint8_t>(version1 ? 1 : 2)});
  bytes.push_back(std::byte{0});
  for (size_t i = 0; i < preamble - 8; ++i) {
    bytes.push_back(std::byte{static_cast<uint8_t>(header.size() >> (8 * i))});
  }
  append(header.data(), header.size());
  append(tensor->raw_data(), tensor->nbytes());
  return bytes;
}

void WriteNpy(const std::string& path, const Tensor& tensor) {
  WriteFileBytes(path, SerializeNpy(tensor));
}

std::vector<std::pair<std::string, Tensor>> ReadNpz(const std::string& path) {
  ZipArchive archive = OpenZip(path, ZIP_RDONLY | ZIP_CHECKCONS);
  const zip_int64_t count = zip_get_num_entries(archive.get(), 0);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (zip_int64_t index = 0; index < count; ++index) {
    const char* entry = zip_get_name(archive.get(), static_cast<zip_uint64_t>(index), 0);
    if (!entry) throw Error(path + ": cannot read entry names: " + zip_strerror(archive.get()));
    std::string name = entry;
    const std::string location = path + ":" + name;
    const std::vector<std::byte> bytes =
        ReadZipEntry(archive.get(), static_cast<zip_uint64_t>(index), location);
    if (name.ends_with(".npy")) name.resize(name.size() - 4);
    tensors.emplace_back(std::move(name), ParseNpy(bytes, location));
  }
  return tensors;
}

void WriteNpz(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors) {
  if (tensors.empty()) {
    // libzip writes no file for an empty archive; numpy writes the bare
    // end-of-central-directory record.
    std::vector<std::byte> empty_archive(22, std::byte{0});
    std::memcpy(empty_archive.data(), "PK\x05\x06", 4);
    WriteFileBytes(path, empty_archive);
    return;
  }
  ZipArchive archive = OpenZip(path, ZIP_CREATE | ZIP_TRUNCATE);
  // libzip reads the buffers when the archive is closed; keep them alive.
  std::vector<std::vector<std::byte>> buffers;
  buffers.reserve(tensors.size());
  for (const auto& [name, tensor] : tensors) {
    const std::string entry = name + ".npy";
    buffers.push_back(SerializeNpy(tensor));
    zip_source_t* source =
        zip_source_buffer(archive.get(), buffers.back().data(), buffers.back().size(), 0);
    if (!source) throw Error(path + ": " + zip_strerror(archive.get()));
    const zip_int64_t index = zip_file_add(archive.get(), entry.c_str(), source, ZIP_FL_ENC_UTF_8);
    if (index < 0) {
      zip_source_free(source);
      throw Error("cannot add '" + entry + "' to '" + path + "': " + zip_strerror(archive.get()));
    }
    zip_set_file_compression(archive.get(), static_cast<zip_uint64_t>(index), ZIP_CM_STORE, 0);
    // A fixed timestamp (1980-01-01, the zip epoch) makes equal tensors give
    // byte-identical files, so regenerated data does not show up as a change.
    zip_file_set_dostime(archive.get(), static_cast<zip_uint64_t>(index), 0,
                         (0 << 9) | (1 << 5) | 1, 0);
  }
  if (zip_close(archive.get()) != 0) {
    throw Error("cannot write '" + path + "': " + zip_strerror(archive.get()));
  }
  archive.release();
}

}  // namespace nimble
