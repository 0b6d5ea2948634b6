#include "nimble/vm/ref_array.h"

#include <gtest/gtest.h>

#include <vector>

#include "nimble/vm/adt.h"

namespace nimble {
namespace {

class Counted : public Object {
 public:
  explicit Counted(int* destroyed) : destroyed_(destroyed) {}
  ~Counted() override { ++*destroyed_; }

 private:
  int* destroyed_;
};

TEST(RefArrayTest, HoldsInlineAndHeapSizesInOrderAndReleasesThem) {
  for (size_t size : {size_t{0}, size_t{1}, RefArray::kInlineSize, RefArray::kInlineSize + 5}) {
    int destroyed = 0;
    std::vector<Ref<Object>> objects;
    for (size_t i = 0; i < size; ++i) objects.push_back(Make<Counted>(&destroyed));
    {
      const RefArray array(size, [&](size_t i) { return objects[i]; });
      ASSERT_EQ(array.size(), size);
      for (size_t i = 0; i < size; ++i) {
        EXPECT_EQ(array[i], objects[i]);
        EXPECT_EQ(objects[i]->use_count(), 2);
      }
      EXPECT_EQ(static_cast<size_t>(array.end() - array.begin()), size);
    }
    for (const Ref<Object>& object : objects) EXPECT_EQ(object->use_count(), 1);
    objects.clear();
    EXPECT_EQ(destroyed, static_cast<int>(size)) << "size " << size;
  }
}

TEST(RefArrayTest, AnADTTakesItsFieldsFromAVectorOrAFill) {
  int destroyed = 0;
  const Ref<Object> head = Make<Counted>(&destroyed);
  const ADT cell = Make<ADTNode>(1, 2, [&](size_t i) { return i == 0 ? head : nullptr; });
  EXPECT_EQ(cell->tag(), 1);
  EXPECT_EQ(cell->field(0), head);
  EXPECT_EQ(cell->field(1), nullptr);
  EXPECT_THROW(cell->field(2), std::out_of_range);
  const ADT tuple = MakeTuple({head, head, head, head});
  EXPECT_EQ(tuple->size(), 4u);
  EXPECT_EQ(head->use_count(), 6);
}

}  // namespace
}  // namespace nimble
