#include "nimble/vm/npy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <zip.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "nimble/vm/error.h"

namespace nimble {
namespace {

using ::testing::HasSubstr;
using namespace std::string_view_literals;

constexpr DataType kAllDTypes[] = {
    DataType::Bool(),  DataType::Int8(),    {DataType::Code::kUInt, 8}, DataType::Int32(),
    DataType::Int64(), DataType::Float16(), DataType::Float32(),        DataType::Float64(),
};

// Prefers a memory file system: the fuzz test rewrites a file hundreds of times.
std::string TempPath(const std::string& name) {
  const std::string directory =
      std::filesystem::is_directory("/dev/shm") ? "/dev/shm/" : ::testing::TempDir();
  return directory + "nimble_npy_test_" + std::to_string(getpid()) + "_" + name;
}

std::vector<std::byte> Bytes(std::string_view text) {
  const auto* begin = reinterpret_cast<const std::byte*>(text.data());
  return {begin, begin + text.size()};
}

// A .npy file with the given version and header text (taken as is) and data.
std::vector<std::byte> NpyFile(int major, const std::string& header, std::string_view data) {
  std::string file = "\x93NUMPY";
  file += static_cast<char>(major);
  file += '\0';
  const size_t length_bytes = major == 1 ? 2 : 4;
  for (size_t i = 0; i < length_bytes; ++i) file += static_cast<char>(header.size() >> (8 * i));
  file += header;
  file += data;
  return Bytes(file);
}

template <typename T>
std::string_view RawBytes(const std::vector<T>& values) {
  return {reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T)};
}

Tensor Iota(const Shape& shape, DataType dtype) {
  Tensor tensor = TensorNode::Empty(shape, dtype);
  for (int64_t i = 0; i < tensor->numel(); ++i) tensor->SetFromDouble(i, (i * 7) % 11 - 3);
  return tensor;
}

void ExpectSameTensor(const Tensor& actual, const Tensor& expected) {
  ASSERT_EQ(actual->dtype(), expected->dtype());
  ASSERT_EQ(actual->shape(), expected->shape());
  EXPECT_EQ(std::memcmp(actual->raw_data(), expected->raw_data(), expected->nbytes()), 0);
}

std::string ParseError(const std::vector<std::byte>& bytes) {
  try {
    ParseNpy(bytes, "model.npy");
  } catch (const Error& error) {
    return error.what();
  }
  return "(no error)";
}

std::vector<std::byte> ReadBytes(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  return Bytes(text);
}

void WriteBytes(const std::string& path, const std::vector<std::byte>& bytes) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
}

TEST(NpyTest, RoundTripsEveryDTypeAndShape) {
  const Shape shapes[] = {{}, {0}, {5}, {2, 3}, {2, 0, 4}, {1, 2, 3, 2}};
  for (DataType dtype : kAllDTypes) {
    for (const Shape& shape : shapes) {
      SCOPED_TRACE(dtype.name() + " " + ShapeToString(shape));
      const Tensor tensor = Iota(shape, dtype);
      ExpectSameTensor(ParseNpy(SerializeNpy(tensor), "memory"), tensor);
    }
  }
}

TEST(NpyTest, RoundTripsThroughAFile) {
  const std::string path = TempPath("file.npy");
  const Tensor tensor = Iota({3, 4}, DataType::Float32());
  WriteNpy(path, tensor);
  ExpectSameTensor(ReadNpy(path), tensor);
  std::remove(path.c_str());
}

TEST(NpyTest, RoundTripsAView) {
  const Tensor rows = Iota({4, 3}, DataType::Int64())->SliceRows(1, 3);
  ExpectSameTensor(ParseNpy(SerializeNpy(rows), "memory"), rows);
}

TEST(NpyTest, WritesAVersion1HeaderAlignedTo64Bytes) {
  const std::vector<std::byte> bytes = SerializeNpy(Iota({2, 3}, DataType::Float32()));
  const std::string text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  EXPECT_EQ(text.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  const size_t header_length = std::to_integer<size_t>(bytes[8]) | std::to_integer<size_t>(bytes[9])
                                                                       << 8;
  EXPECT_EQ((10 + header_length) % 64, 0u);
  EXPECT_EQ(bytes.size(), 10 + header_length + 6 * 4);
  const std::string header = text.substr(10, header_length);
  EXPECT_EQ(header.back(), '\n');
  EXPECT_THAT(header, ::testing::StartsWith(
                          "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }   "));
}

TEST(NpyTest, WritesNumpyDescrAndShapeSpellings) {
  const auto header = [](const Tensor& tensor) {
    const std::vector<std::byte> bytes = SerializeNpy(tensor);
    return std::string(reinterpret_cast<const char*>(bytes.data()) + 10, 60);
  };
  EXPECT_THAT(header(Iota({}, DataType::Bool())), HasSubstr("'descr': '|b1'"));
  EXPECT_THAT(header(Iota({}, DataType::Bool())), HasSubstr("'shape': (), }"));
  EXPECT_THAT(header(Iota({4}, DataType::Int8())), HasSubstr("'descr': '|i1'"));
  EXPECT_THAT(header(Iota({4}, DataType::Int8())), HasSubstr("'shape': (4,), }"));
  EXPECT_THAT(header(Iota({4}, {DataType::Code::kUInt, 8})), HasSubstr("'descr': '|u1'"));
  EXPECT_THAT(header(Iota({4}, DataType::Float16())), HasSubstr("'descr': '<f2'"));
  EXPECT_THAT(header(Iota({4}, DataType::Int64())), HasSubstr("'descr': '<i8'"));
}

TEST(NpyTest, ParsesAHandWrittenVersion1File) {
  const std::vector<int64_t> values = {5, -1, 1LL << 40};
  const Tensor tensor =
      ParseNpy(NpyFile(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }          \n",
                       RawBytes(values)),
               "hand.npy");
  EXPECT_EQ(tensor->dtype(), DataType::Int64());
  EXPECT_EQ(tensor->shape(), Shape({3}));
  EXPECT_EQ(tensor->data<int64_t>()[0], 5);
  EXPECT_EQ(tensor->data<int64_t>()[1], -1);
  EXPECT_EQ(tensor->data<int64_t>()[2], 1LL << 40);
}

TEST(NpyTest, ParsesVersion2And3HeadersWithOtherSpellings) {
  const std::vector<float> values = {1.5f, -2.0f};
  // Keys in another order, double quotes, '=' byte order, no trailing comma.
  const std::string header =
      "{ \"shape\" : ( 2 , 1 ), \"fortran_order\": False,\"descr\": '=f4'}\n";
  for (int major : {2, 3}) {
    const Tensor tensor = ParseNpy(NpyFile(major, header, RawBytes(values)), "v2.npy");
    EXPECT_EQ(tensor->dtype(), DataType::Float32());
    EXPECT_EQ(tensor->shape(), Shape({2, 1}));
    EXPECT_EQ(tensor->data<float>()[0], 1.5f);
    EXPECT_EQ(tensor->data<float>()[1], -2.0f);
  }
}

TEST(NpyTest, AcceptsOneByteTypesWithAnyByteOrderAndPython2Longs) {
  for (const char* descr : {"|u1", "<u1", ">u1", "=u1"}) {
    const Tensor tensor = ParseNpy(NpyFile(1,
                                           std::string("{'descr': '") + descr +
                                               "', 'fortran_order': False, 'shape': (2L,), }\n",
                                           "\x07\xff"),
                                   "bytes.npy");
    EXPECT_EQ(tensor->dtype(), DataType(DataType::Code::kUInt, 8));
    EXPECT_EQ(tensor->GetAsInt64(1), 255);
  }
}

TEST(NpyTest, NormalisesBoolBytes) {
  const Tensor tensor = ParseNpy(
      NpyFile(1, "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }\n", "\x00\x01\x02"sv),
      "mask.npy");
  EXPECT_EQ(tensor->GetAsInt64(0), 0);
  EXPECT_EQ(tensor->GetAsInt64(1), 1);
  EXPECT_EQ(std::to_integer<int>(static_cast<const std::byte*>(tensor->raw_data())[2]), 1);
}

TEST(NpyTest, TransposesFortranOrderIntoCOrder) {
  // C-order values 0..23 of shape (2, 3, 4), laid out first axis fastest.
  std::vector<int32_t> fortran(24);
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) {
      for (int k = 0; k < 4; ++k) fortran[i + 2 * j + 6 * k] = i * 12 + j * 4 + k;
    }
  }
  const Tensor tensor =
      ParseNpy(NpyFile(1, "{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3, 4), }\n",
                       RawBytes(fortran)),
               "fortran.npy");
  ASSERT_EQ(tensor->shape(), Shape({2, 3, 4}));
  for (int i = 0; i < 24; ++i) EXPECT_EQ(tensor->data<int32_t>()[i], i);

  const Tensor empty = ParseNpy(
      NpyFile(1, "{'descr': '<f8', 'fortran_order': True, 'shape': (3, 0), }\n", ""), "e.npy");
  EXPECT_EQ(empty->shape(), Shape({3, 0}));
}

TEST(NpyTest, RejectsMalformedFilesNamingTheFileAndTheCause) {
  const std::string f4 = "'descr': '<f4', 'fortran_order': False";
  const std::string two_floats(8, '\0');
  const auto with_header = [&](const std::string& header, std::string_view data = "") {
    return ParseError(NpyFile(1, header, data));
  };
  EXPECT_THAT(ParseError(Bytes("")), HasSubstr("model.npy: not a .npy file (bad magic)"));
  EXPECT_THAT(ParseError(Bytes("PK\x03\x04 not npy")), HasSubstr("bad magic"));
  EXPECT_THAT(ParseError(Bytes("\x93NUMPY\x04\x00"sv)),
              HasSubstr("unsupported .npy format version 4.0"));
  EXPECT_THAT(ParseError(Bytes("\x93NUMPY\x01\x00\x10"sv)), HasSubstr("truncated header"));
  EXPECT_THAT(ParseError(Bytes("\x93NUMPY\x01\x00\x40\x00{'descr'"sv)),
              HasSubstr("truncated header: it declares 64 bytes, the file has 8"));
  EXPECT_THAT(with_header("['descr', '<f4']"), HasSubstr("the header is not a dict"));
  EXPECT_THAT(with_header("{'descr': '<f4', 'shape': (2,)}"),
              HasSubstr("the header has no 'fortran_order' key"));
  EXPECT_THAT(with_header("{'fortran_order': False, 'shape': (2,)}"),
              HasSubstr("the header has no 'descr' key"));
  EXPECT_THAT(with_header("{" + f4 + "}"), HasSubstr("the header has no 'shape' key"));
  EXPECT_THAT(with_header("{" + f4 + ", 'shape': (2,), 'extra': 1}"),
              HasSubstr("unexpected key 'extra'"));
  EXPECT_THAT(with_header("{" + f4 + ", 'shape': (2,), 'shape': (2,)}"),
              HasSubstr("repeats the key 'shape'"));
  EXPECT_THAT(with_header("{" + f4 + ", 'shape': (2, -1)}"), HasSubstr("bad shape"));
  EXPECT_THAT(with_header("{" + f4 + ", 'shape': (2, 'a')}"), HasSubstr("bad shape"));
  EXPECT_THAT(with_header("{" + f4 + ", 'shape': [2]}"), HasSubstr("a tuple for 'shape'"));
  EXPECT_THAT(with_header("{" + f4 + ", 'shape': (99999999999999999999,)}"),
              HasSubstr("a dimension is too large"));
  EXPECT_THAT(with_header("{'descr': '<f4', 'fortran_order': 0, 'shape': ()}"),
              HasSubstr("True or False"));
  EXPECT_THAT(with_header("{'descr': '<c8', 'fortran_order': False, 'shape': ()}"),
              HasSubstr("unsupported dtype '<c8'"));
  EXPECT_THAT(with_header("{'descr': '<i2', 'fortran_order': False, 'shape': ()}"),
              HasSubstr("unsupported dtype '<i2'"));
  EXPECT_THAT(with_header("{'descr': '|f4', 'fortran_order': False, 'shape': ()}"),
              HasSubstr("unsupported dtype '|f4'"));
  EXPECT_THAT(with_header("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': ()}"),
              HasSubstr("expected a dtype string"));
  EXPECT_THAT(with_header("{'descr': '>f4', 'fortran_order': False, 'shape': ()}"),
              HasSubstr("big-endian data ('>f4') is not supported"));
  EXPECT_THAT(with_header("{'descr: '<f4'}"), HasSubstr("malformed header"));
  EXPECT_THAT(with_header("{" + f4 + ", 'shape': (2,)} junk"), HasSubstr("unexpected text"));
  EXPECT_THAT(with_header("{" + f4 + ", 'shape': (3,)}", two_floats),
              HasSubstr("the data is 8 bytes (truncated) but shape (3,) of float32 needs 12"));
  EXPECT_THAT(with_header("{" + f4 + ", 'shape': (1,)}", two_floats),
              HasSubstr("(trailing bytes)"));
  // An absurd shape is refused by comparing sizes, before any allocation.
  EXPECT_THAT(with_header("{" + f4 + ", 'shape': (1000000000000, 1000000)}", two_floats),
              HasSubstr("(truncated)"));
  EXPECT_THAT(with_header("{" + f4 + ", 'shape': (4611686018427387904, 4611686018427387904)}"),
              HasSubstr("too many elements"));
}

TEST(NpyTest, ReadingAMissingFileNamesIt) {
  try {
    ReadNpy("/nonexistent/weights.npy");
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), HasSubstr("cannot open '/nonexistent/weights.npy'"));
  }
  EXPECT_THROW(ReadNpz("/nonexistent/weights.npz"), Error);
}

TEST(NpzTest, RoundTripsSeveralEntriesInOrder) {
  const std::string path = TempPath("several.npz");
  const std::vector<std::pair<std::string, Tensor>> tensors = {
      {"weight", Iota({3, 2}, DataType::Float32())},
      {"bias", Iota({2}, DataType::Float16())},
      {"a/steps", Iota({}, DataType::Int64())},
      {"mask", Iota({0, 2}, DataType::Bool())},
  };
  WriteNpz(path, tensors);
  const auto read = ReadNpz(path);
  ASSERT_EQ(read.size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_EQ(read[i].first, tensors[i].first);
    ExpectSameTensor(read[i].second, tensors[i].second);
  }
  std::remove(path.c_str());
}

TEST(NpzTest, RoundTripsAnEmptyArchive) {
  const std::string path = TempPath("empty.npz");
  WriteNpz(path, {});
  EXPECT_TRUE(ReadNpz(path).empty());
  std::remove(path.c_str());
}

TEST(NpzTest, RejectsDuplicateNames) {
  const std::string path = TempPath("duplicate.npz");
  const Tensor tensor = Iota({2}, DataType::Int32());
  try {
    WriteNpz(path, {{"x", tensor}, {"x", tensor}});
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), HasSubstr("cannot add 'x.npy'"));
  }
  std::remove(path.c_str());
}

// Writes an archive with libzip directly, deflating the entries that ask for it.
void WriteZip(const std::string& path,
              const std::vector<std::tuple<std::string, std::vector<std::byte>, bool>>& entries) {
  int code = 0;
  zip_t* archive = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &code);
  ASSERT_NE(archive, nullptr);
  for (const auto& [name, bytes, deflate] : entries) {
    zip_source_t* source = zip_source_buffer(archive, bytes.data(), bytes.size(), 0);
    ASSERT_NE(source, nullptr);
    const zip_int64_t index = zip_file_add(archive, name.c_str(), source, 0);
    ASSERT_GE(index, 0);
    ASSERT_EQ(zip_set_file_compression(archive, static_cast<zip_uint64_t>(index),
                                       deflate ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 9),
              0);
  }
  ASSERT_EQ(zip_close(archive), 0);
}

TEST(NpzTest, ReadsDeflatedEntries) {
  const std::string path = TempPath("deflated.npz");
  const Tensor big = Iota({64, 64}, DataType::Float64());
  const Tensor small = Iota({3}, DataType::Int8());
  WriteZip(path, {{"big.npy", SerializeNpy(big), true}, {"small.npy", SerializeNpy(small), false}});
  const auto read = ReadNpz(path);
  ASSERT_EQ(read.size(), 2u);
  EXPECT_EQ(read[0].first, "big");
  ExpectSameTensor(read[0].second, big);
  EXPECT_EQ(read[1].first, "small");
  ExpectSameTensor(read[1].second, small);
  std::remove(path.c_str());
}

TEST(NpzTest, RejectsBadArchivesAndEntriesNamingThem) {
  const std::string path = TempPath("bad.npz");
  WriteBytes(path, Bytes("this is not a zip archive"));
  try {
    ReadNpz(path);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), HasSubstr("cannot open .npz archive '" + path + "'"));
  }
  WriteZip(path, {{"notes.npy", Bytes("hello"), true}});
  try {
    ReadNpz(path);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), HasSubstr(path + ":notes.npy: not a .npy file"));
  }
  std::remove(path.c_str());
}

// Applies a few random edits: byte overwrites (mostly within the first
// `hot_prefix` bytes, where the structure lives), truncation or extension.
std::vector<std::byte> Mutate(std::vector<std::byte> bytes, size_t hot_prefix, std::mt19937& rng) {
  const int edits = 1 + static_cast<int>(rng() % 4);
  for (int edit = 0; edit < edits; ++edit) {
    const uint32_t choice = rng() % 10;
    if (choice < 7 && !bytes.empty()) {
      const size_t range = rng() % 4 == 0 ? bytes.size() : std::min(hot_prefix, bytes.size());
      bytes[rng() % range] = std::byte{static_cast<uint8_t>(rng())};
    } else if (choice < 9 && !bytes.empty()) {
      bytes.resize(rng() % bytes.size());
    } else {
      bytes.insert(bytes.begin() + static_cast<std::ptrdiff_t>(rng() % (bytes.size() + 1)),
                   std::byte{static_cast<uint8_t>(rng())});
    }
  }
  return bytes;
}

TEST(NpyFuzzTest, MutatedFilesParseOrThrowNimbleError) {
  const std::vector<std::vector<std::byte>> seeds = {
      SerializeNpy(Iota({2, 3}, DataType::Float32())),
      SerializeNpy(Iota({}, DataType::Bool())),
      NpyFile(2, "{'descr': '<i4', 'fortran_order': True, 'shape': (2, 2), }\n",
              "\1\0\0\0\2\0\0\0\3\0\0\0\4\0\0\0"sv),
  };
  std::mt19937 rng(20240611);
  int parsed = 0, rejected = 0;
  for (int iteration = 0; iteration < 20000; ++iteration) {
    const std::vector<std::byte> bytes = Mutate(seeds[iteration % seeds.size()], 80, rng);
    try {
      const Tensor tensor = ParseNpy(bytes, "fuzz.npy");
      EXPECT_LE(tensor->nbytes(), bytes.size());
      ++parsed;
    } catch (const Error&) {
      ++rejected;
    }
  }
  EXPECT_GT(parsed, 0);
  EXPECT_GT(rejected, 0);
}

TEST(NpzFuzzTest, MutatedArchivesReadOrThrowNimbleError) {
  const std::string seed_path = TempPath("seed.npz");
  const std::string path = TempPath("mutated.npz");
  WriteZip(seed_path, {{"w.npy", SerializeNpy(Iota({4, 4}, DataType::Float32())), true},
                       {"b.npy", SerializeNpy(Iota({4}, DataType::Int64())), false}});
  const std::vector<std::byte> seed = ReadBytes(seed_path);
  std::mt19937 rng(7);
  int read = 0, rejected = 0;
  for (int iteration = 0; iteration < 2000; ++iteration) {
    WriteBytes(path, Mutate(seed, seed.size(), rng));
    try {
      ReadNpz(path);
      ++read;
    } catch (const Error&) {
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 0);
  EXPECT_GT(read, 0);
  std::remove(seed_path.c_str());
  std::remove(path.c_str());
}

}  // namespace
}  // namespace nimble
