#include "nimble/vm/object.h"

#include <algorithm>
#include <array>
#include <new>
#include <utility>
#include <vector>

namespace nimble {
namespace {

// Size classes of 16 bytes up to 256; larger objects go to ::operator new.
constexpr size_t kGranule = 16;
constexpr size_t kNumClasses = 16;
// A thread keeps at most this many free bytes per class; the rest go back.
constexpr size_t kMaxFreeBytesPerClass = size_t{16} << 20;

struct FreeBlock {
  FreeBlock* next;
};

// One thread's free blocks. Memory freed on another thread than the one that
// allocated it simply joins that thread's lists.
class FreeLists {
 public:
  ~FreeLists() {
    destroyed = true;
    for (FreeBlock*& head : heads_) {
      while (head) ::operator delete(std::exchange(head, head->next));
    }
  }

  void* Allocate(size_t size_class) {
    FreeBlock* block = heads_[size_class];
    if (!block) return ::operator new((size_class + 1) * kGranule);
    heads_[size_class] = block->next;
    --counts_[size_class];
    return block;
  }

  void Free(void* pointer, size_t size_class) {
    if (counts_[size_class] * (size_class + 1) * kGranule >= kMaxFreeBytesPerClass) {
      ::operator delete(pointer);
      return;
    }
    heads_[size_class] = new (pointer) FreeBlock{heads_[size_class]};
    ++counts_[size_class];
  }

  // Set once this thread's lists are gone (objects freed by later thread-exit
  // or static destructors go straight back to ::operator delete).
  static thread_local bool destroyed;

 private:
  std::array<FreeBlock*, kNumClasses> heads_{};
  std::array<size_t, kNumClasses> counts_{};
};

thread_local bool FreeLists::destroyed = false;
thread_local FreeLists free_lists;

// Objects whose count reached zero while another object was being destroyed
// on this thread wait here; the outermost release drains them in a loop, so
// a long list or tree is freed without recursing once per node.
struct PendingReleases {
  ~PendingReleases() { destroyed = true; }

  // Set once this thread's list is gone: at exit, thread-local objects are
  // destroyed before static ones, and those (a test's parameters holding
  // tensors) still release objects; they are then deleted at once.
  static thread_local bool destroyed;

  std::vector<const Object*> objects;
  bool draining = false;
};

thread_local bool PendingReleases::destroyed = false;
thread_local PendingReleases pending_releases;

// The class of an object of `size` bytes, or kNumClasses when it is too big.
size_t SizeClass(size_t size) {
  return size == 0 ? 0 : std::min((size - 1) / kGranule, kNumClasses);
}

}  // namespace

void* Object::operator new(size_t size) {
  const size_t size_class = SizeClass(size);
  if (size_class == kNumClasses) return ::operator new(size);
  // Always a whole class, since another thread's lists may take it back.
  if (FreeLists::destroyed) return ::operator new((size_class + 1) * kGranule);
  return free_lists.Allocate(size_class);
}

void Object::operator delete(void* pointer, size_t size) {
  const size_t size_class = SizeClass(size);
  if (size_class == kNumClasses || FreeLists::destroyed) {
    ::operator delete(pointer);
    return;
  }
  free_lists.Free(pointer, size_class);
}

void Object::Release(const Object* object) {
  if (PendingReleases::destroyed) {
    delete object;
    return;
  }
  if (pending_releases.draining) {
    pending_releases.objects.push_back(object);
    return;
  }
  pending_releases.draining = true;
  delete object;
  while (!pending_releases.objects.empty()) {
    const Object* next = pending_releases.objects.back();
    pending_releases.objects.pop_back();
    delete next;
  }
  pending_releases.draining = false;
}

}  // namespace nimble
