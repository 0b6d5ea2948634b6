#include <gtest/gtest.h>

#include <functional>
#include <thread>
#include <vector>

#include "nimble/vm/adt.h"
#include "nimble/vm/error.h"
#include "nimble/vm/tensor.h"

namespace nimble {
namespace {

class Counted : public Object {
 public:
  explicit Counted(int* destroyed, Ref<Object> next = nullptr)
      : destroyed_(destroyed), next_(std::move(next)) {}
  ~Counted() override { ++*destroyed_; }

 private:
  int* destroyed_;
  Ref<Object> next_;
};

TEST(ObjectTest, CountsReferencesAndDestroysAtZero) {
  int destroyed = 0;
  Ref<Counted> first = Make<Counted>(&destroyed);
  EXPECT_EQ(first->use_count(), 1);
  {
    Ref<Object> second = first;
    EXPECT_EQ(first->use_count(), 2);
  }
  EXPECT_EQ(first->use_count(), 1);
  first = nullptr;
  EXPECT_EQ(destroyed, 1);
}

TEST(ObjectTest, ReleasesAMillionLongChainWithoutRecursion) {
  int destroyed = 0;
  Ref<Object> chain;
  for (int i = 0; i < 1'000'000; ++i) chain = Make<Counted>(&destroyed, chain);
  chain = nullptr;
  EXPECT_EQ(destroyed, 1'000'000);
}

TEST(ObjectTest, DowncastsByDynamicType) {
  Ref<Object> tensor = TensorNode::Empty({2}, DataType::Float32());
  EXPECT_TRUE(tensor.is<TensorNode>());
  EXPECT_FALSE(tensor.is<ADTNode>());
  EXPECT_EQ(tensor.as<ADTNode>(), nullptr);
  EXPECT_EQ(tensor.as<TensorNode>()->shape(), Shape({2}));
}

TEST(DataTypeTest, ParsesAndPrintsRelayNames) {
  for (const char* name : {"bool", "int8", "int32", "int64", "float16", "float32", "float64"}) {
    EXPECT_EQ(DataType::Parse(name).name(), name);
  }
  EXPECT_EQ(DataType::Parse("int64").bytes(), 8u);
  EXPECT_THROW(DataType::Parse("float128"), Error);
}

TEST(DataTypeTest, ConvertsHalfPrecision) {
  for (float value : {0.0f, 1.0f, -2.5f, 65504.0f, 0.000061035156f, 3.140625f}) {
    EXPECT_EQ(HalfToFloat(FloatToHalf(value)), value);
  }
  EXPECT_EQ(FloatToHalf(1.0f).bits, 0x3c00);
}

TEST(TensorTest, ViewsShareStorage) {
  Tensor tensor = TensorNode::FromVector<float>({2, 3}, DataType::Float32(), {0, 1, 2, 3, 4, 5});
  Tensor view = tensor->View({3, 2});
  EXPECT_EQ(view->storage(), tensor->storage());
  view->data<float>()[0] = 42;
  EXPECT_EQ(tensor->data<float>()[0], 42);
  Tensor row = tensor->SliceRows(1, 2);
  EXPECT_EQ(row->shape(), Shape({1, 3}));
  EXPECT_EQ(row->data<float>()[0], 3);
  EXPECT_THROW(tensor->View({4}), Error);
  EXPECT_THROW(tensor->SliceRows(1, 3), Error);
}

TEST(TensorTest, RejectsNegativeAndOverflowingShapes) {
  EXPECT_THROW(TensorNode::Empty({-1, 2}, DataType::Float32()), Error);
  EXPECT_THROW(TensorNode::Empty({1LL << 40, 1LL << 40}, DataType::Float32()), Error);
  EXPECT_EQ(TensorNode::Empty({}, DataType::Int64())->numel(), 1);
  EXPECT_EQ(TensorNode::Empty({}, DataType::Int64())->TypeString(), "Tensor[(), int64]");
}

// 2^62 float32 elements fit int64 but their bytes do not: they wrapped to 0,
// and a tensor of that shape passed the fit check of an empty storage.
TEST(TensorTest, BytesPastInt64AreAnError) {
  const Shape huge = {int64_t{1} << 62};
  EXPECT_EQ(ShapeBytes(std::vector<int64_t>{3, 5}, DataType::Float32()), 60);
  EXPECT_EQ(ShapeBytes(huge, DataType::Int8()), int64_t{1} << 62);
  for (const auto& make : std::vector<std::function<void()>>{
           [&] { ShapeBytes(huge, DataType::Float32()); },
           [&] { TensorNode::Empty(huge, DataType::Float32()); },
           [&] {
             Make<TensorNode>(StorageNode::Allocate(Device{}, 0), 0, huge, DataType::Float32());
           }}) {
    try {
      make();
      ADD_FAILURE() << "no error";
    } catch (const Error& error) {
      EXPECT_STREQ(error.what(), "storage for shape (4611686018427387904,) of float32 overflows");
    }
  }
}

TEST(ObjectTest, FreedObjectsLendTheirMemoryToTheNextOfTheirSize) {
  int destroyed = 0;
  Ref<Counted> first = Make<Counted>(&destroyed);
  const void* address = first.get();
  first = nullptr;
  EXPECT_EQ(Make<Counted>(&destroyed).get(), address);
}

TEST(ObjectTest, ObjectsFreedOnAnotherThreadJoinItsFreeLists) {
  std::vector<Tensor> tensors;
  for (int i = 0; i < 100; ++i) tensors.push_back(TensorNode::Empty({2}, DataType::Int32()));
  const void* last = tensors.back().get();
  std::thread([&tensors, last] {
    tensors.clear();
    // The other thread reuses what it freed, last freed first.
    EXPECT_EQ(TensorNode::Empty({2}, DataType::Int32()).get(), last);
  }).join();
  EXPECT_EQ(TensorNode::FromVector<int32_t>({2}, DataType::Int32(), {4, 5})->GetAsInt64(1), 5);
}

// An object of a size no other test uses, so its size class is this test's own.
class Sized200 : public Object {
  char bytes_[200 - sizeof(Object)] = {};
};

TEST(ObjectTest, AnExitedThreadsFreeBlocksServeTheNextThread) {
  const void* last_freed = nullptr;
  std::thread([&last_freed] {
    std::vector<Ref<Sized200>> objects;
    for (int i = 0; i < 10; ++i) objects.push_back(Make<Sized200>());
    last_freed = objects.back().get();
    objects.clear();
  }).join();
  const void* reused = nullptr;
  std::thread([&reused] { reused = Make<Sized200>().get(); }).join();
  EXPECT_EQ(reused, last_freed);
}

// Another size class of its own, for a thread to carve a fresh chunk from.
class Sized100 : public Object {
  char bytes_[100 - sizeof(Object)] = {};
};

TEST(ObjectTest, ObjectsMadeOneAfterAnotherOnAFreshThreadAreAdjacent) {
  std::vector<const char*> addresses;
  std::thread([&addresses] {
    std::vector<Ref<Sized100>> objects;
    for (int i = 0; i < 8; ++i) objects.push_back(Make<Sized100>());
    for (const auto& object : objects)
      addresses.push_back(reinterpret_cast<const char*>(object.get()));
  }).join();
  const ptrdiff_t block = (sizeof(Sized100) + 15) / 16 * 16;  // its size class
  for (size_t i = 1; i < addresses.size(); ++i) EXPECT_EQ(addresses[i] - addresses[i - 1], block);
}

// At a thread's exit its thread-local objects are destroyed in the reverse
// order of their construction, so one made before the thread's first release
// outlives the list where releases wait. What it still holds must be freed
// all the same: before, those releases went into the destroyed list's freed
// memory and corrupted the heap (a test binary aborted at exit).
TEST(ObjectTest, ReleasesAfterTheThreadsPendingListIsDestroyed) {
  static int destroyed;
  destroyed = 0;
  std::thread([] {
    thread_local Ref<Object> kept_to_the_end;
    const auto tuple_of_counted = [] {
      std::vector<Ref<Object>> fields;
      for (int i = 0; i < 64; ++i) fields.push_back(Make<Counted>(&destroyed));
      return MakeTuple(std::move(fields));
    };
    kept_to_the_end = tuple_of_counted();
    // The first release makes the list; its 64 fields grow it.
    tuple_of_counted();
    EXPECT_EQ(destroyed, 64);
  }).join();
  EXPECT_EQ(destroyed, 128);
}

}  // namespace
}  // namespace nimble
