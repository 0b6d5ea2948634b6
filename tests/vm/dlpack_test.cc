#include "nimble/vm/dlpack.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "nimble/vm/error.h"

namespace nimble {
namespace {

using ::testing::HasSubstr;

// A DLPack producer owning a float buffer, as another framework would hand
// one over; counts how often its deleter runs.
struct Producer {
  std::vector<float> values;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  DLManagedTensor managed{};
  int deleted = 0;

  Producer(std::vector<int64_t> shape_in, uint64_t byte_offset = 0) : shape(std::move(shape_in)) {
    int64_t numel = 1;
    for (int64_t dim : shape) numel *= std::max<int64_t>(dim, 0);
    values.resize(byte_offset / sizeof(float) + numel);
    for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
    managed.dl_tensor.data = values.data();
    managed.dl_tensor.device = {kDLCPU, 0};
    managed.dl_tensor.ndim = static_cast<int>(shape.size());
    managed.dl_tensor.dtype = {kDLFloat, 32, 1};
    managed.dl_tensor.shape = shape.data();
    managed.dl_tensor.byte_offset = byte_offset;
    managed.manager_ctx = this;
    managed.deleter = [](DLManagedTensor* self) {
      ++static_cast<Producer*>(self->manager_ctx)->deleted;
    };
  }
};

TEST(DLPackTest, MapsDataTypesBothWays) {
  for (const char* name :
       {"bool", "int8", "uint8", "int32", "int64", "float16", "float32", "float64"}) {
    const DataType dtype = DataType::Parse(name);
    EXPECT_EQ(FromDLDataType(ToDLDataType(dtype)), dtype) << name;
    EXPECT_EQ(ToDLDataType(dtype).lanes, 1) << name;
  }
  const DLDataType float32 = ToDLDataType(DataType::Float32());
  EXPECT_EQ(float32.code, kDLFloat);
  EXPECT_EQ(float32.bits, 32);
  // bool is distinct from uint8; TVM's {kDLUInt, 1} reads as bool in every
  // DLPack version.
  const DLDataType boolean = ToDLDataType(DataType::Bool());
  const DLDataType uint8 = ToDLDataType(DataType{DataType::Code::kUInt, 8});
  EXPECT_FALSE(boolean.code == uint8.code && boolean.bits == uint8.bits);
  EXPECT_EQ((boolean.bits * boolean.lanes + 7) / 8, 1);  // one byte per element
  EXPECT_EQ(FromDLDataType({kDLUInt, 1, 1}), DataType::Bool());
  EXPECT_EQ(FromDLDataType({kDLUInt, 8, 1}), (DataType{DataType::Code::kUInt, 8}));
}

TEST(DLPackTest, BFloat16RoundTrips) {
  EXPECT_EQ(FromDLDataType({kDLBfloat, 16, 1}), DataType::BFloat16());
  const DLDataType bf16 = ToDLDataType(DataType::BFloat16());
  EXPECT_EQ(bf16.code, kDLBfloat);
  EXPECT_EQ(bf16.bits, 16);
}

TEST(DLPackTest, RejectsTypesWithoutANimbleEquivalent) {
  EXPECT_THAT(
      [] {
        FromDLDataType({kDLBfloat, 32, 1});
      },
      ::testing::ThrowsMessage<Error>(HasSubstr("unsupported DLPack dtype bfloat32")));
  EXPECT_THAT(
      [] {
        FromDLDataType({kDLInt, 16, 1});
      },
      ::testing::ThrowsMessage<Error>(HasSubstr("unsupported DLPack dtype int16")));
  EXPECT_THAT(
      [] {
        FromDLDataType({kDLFloat, 32, 4});
      },
      ::testing::ThrowsMessage<Error>(HasSubstr("float32x4: 4 lanes")));
}

TEST(DLPackTest, AsDLTensorIsAViewOfTheTensor) {
  Tensor tensor = TensorNode::FromVector<int32_t>({3, 2}, DataType::Int32(), {1, 2, 3, 4, 5, 6});
  Tensor row = tensor->SliceRows(1, 2);
  const DLTensor dl = AsDLTensor(row);
  EXPECT_EQ(dl.data, row->raw_data());
  EXPECT_EQ(dl.byte_offset, 0u);
  EXPECT_EQ(dl.ndim, 2);
  EXPECT_EQ(dl.shape, row->shape().data());
  EXPECT_EQ(dl.shape[0], 1);
  EXPECT_EQ(dl.shape[1], 2);
  EXPECT_EQ(dl.strides, nullptr);
  EXPECT_EQ(dl.device.device_type, kDLCPU);
  EXPECT_EQ(static_cast<int32_t*>(dl.data)[1], 4);

  const DLTensor scalar = AsDLTensor(TensorNode::Scalar<double>(DataType::Float64(), 2.5));
  EXPECT_EQ(scalar.ndim, 0);
  EXPECT_EQ(scalar.dtype.bits, 64);
}

TEST(DLPackTest, ToDLPackKeepsTheTensorAliveUntilTheDeleter) {
  Tensor tensor = TensorNode::FromVector<float>({2, 3}, DataType::Float32(), {1, 2, 3, 4, 5, 6});
  const void* data = tensor->raw_data();
  DLManagedTensor* managed = ToDLPack(tensor);
  EXPECT_EQ(tensor->use_count(), 2);
  tensor = nullptr;
  EXPECT_EQ(managed->dl_tensor.data, data);
  EXPECT_EQ(managed->dl_tensor.strides[0], 3);
  EXPECT_EQ(managed->dl_tensor.strides[1], 1);
  EXPECT_EQ(static_cast<float*>(managed->dl_tensor.data)[5], 6.0f);
  managed->deleter(managed);
}

TEST(DLPackTest, RoundTripSharesMemory) {
  Tensor tensor = TensorNode::FromVector<float>({2, 3}, DataType::Float32(), {1, 2, 3, 4, 5, 6});
  Tensor view = tensor->SliceRows(1, 2);
  Tensor back = FromDLPack(ToDLPack(view));
  EXPECT_EQ(back->raw_data(), view->raw_data());
  EXPECT_EQ(back->shape(), view->shape());
  EXPECT_EQ(back->dtype(), DataType::Float32());
  tensor->SetFromDouble(4, 50);
  EXPECT_EQ(back->GetAsDouble(1), 50.0);
  // The export holds the original storage until the imported tensor dies.
  tensor = nullptr;
  view = nullptr;
  EXPECT_EQ(back->GetAsDouble(1), 50.0);
}

TEST(DLPackTest, FromDLPackWrapsWithoutCopyingAndDeletesOnce) {
  Producer producer({2, 3});
  {
    Tensor tensor = FromDLPack(&producer.managed);
    EXPECT_EQ(tensor->raw_data(), producer.values.data());
    EXPECT_EQ(tensor->shape(), (Shape{2, 3}));
    EXPECT_EQ(tensor->device(), Device{});
    Tensor reshaped = tensor->View({3, 2});
    tensor = nullptr;
    EXPECT_EQ(producer.deleted, 0);
    EXPECT_EQ(reshaped->GetAsDouble(5), 5.0);
    // Exporting an imported tensor again still shares the producer's memory.
    DLManagedTensor* again = ToDLPack(reshaped);
    EXPECT_EQ(again->dl_tensor.data, producer.values.data());
    again->deleter(again);
  }
  EXPECT_EQ(producer.deleted, 1);
}

TEST(DLPackTest, FromDLPackHonoursByteOffset) {
  Producer producer({2, 2}, /*byte_offset=*/8);
  Tensor tensor = FromDLPack(&producer.managed);
  EXPECT_EQ(tensor->raw_data(), &producer.values[2]);
  EXPECT_EQ(tensor->byte_offset(), 8u);
  EXPECT_EQ(tensor->GetAsDouble(0), 2.0);
  EXPECT_EQ(tensor->GetAsDouble(3), 5.0);
  // Exported again, data points at the first element.
  const DLTensor dl = AsDLTensor(tensor->SliceRows(1, 2));
  EXPECT_EQ(dl.data, &producer.values[4]);
  EXPECT_EQ(dl.byte_offset, 0u);
}

TEST(DLPackTest, AcceptsCompactStridesAndAnyStrideOfUnitDims) {
  Producer producer({2, 1, 3});
  producer.strides = {3, 99, 1};
  producer.managed.dl_tensor.strides = producer.strides.data();
  Tensor tensor = FromDLPack(&producer.managed);
  EXPECT_EQ(tensor->shape(), (Shape{2, 1, 3}));
  EXPECT_EQ(tensor->GetAsDouble(4), 4.0);
}

TEST(DLPackTest, RejectsWhatItCannotWrapAndStillDeletes) {
  {
    Producer producer({2, 3});
    producer.strides = {1, 2};  // column-major
    producer.managed.dl_tensor.strides = producer.strides.data();
    EXPECT_THAT([&] { FromDLPack(&producer.managed); },
                ::testing::ThrowsMessage<Error>(
                    HasSubstr("strides (1, 2) of shape (2, 3) are not compact row-major")));
    EXPECT_EQ(producer.deleted, 1);
  }
  {
    Producer producer({4});
    producer.managed.dl_tensor.dtype = {kDLComplex, 64, 1};
    EXPECT_THAT([&] { FromDLPack(&producer.managed); },
                ::testing::ThrowsMessage<Error>(HasSubstr("unsupported DLPack dtype complex64")));
    EXPECT_EQ(producer.deleted, 1);
  }
  {
    Producer producer({4});
    producer.managed.dl_tensor.dtype = {kDLFloat, 32, 2};
    EXPECT_THAT([&] { FromDLPack(&producer.managed); },
                ::testing::ThrowsMessage<Error>(HasSubstr("2 lanes")));
    EXPECT_EQ(producer.deleted, 1);
  }
  {
    Producer producer({4});
    producer.managed.dl_tensor.device = {kDLOpenCL, 0};
    EXPECT_THAT([&] { FromDLPack(&producer.managed); },
                ::testing::ThrowsMessage<Error>(HasSubstr("unsupported DLPack device type 4")));
    EXPECT_EQ(producer.deleted, 1);
  }
  {
    Producer producer({-1});
    EXPECT_THAT([&] { FromDLPack(&producer.managed); },
                ::testing::ThrowsMessage<Error>(HasSubstr("negative dimension")));
    EXPECT_EQ(producer.deleted, 1);
  }
  EXPECT_THAT([] { FromDLPack(nullptr); },
              ::testing::ThrowsMessage<Error>(HasSubstr("null DLManagedTensor")));
}

}  // namespace
}  // namespace nimble
