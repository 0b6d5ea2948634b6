#include "nimble/vm/object.h"

#include <algorithm>
#include <array>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

namespace nimble {
namespace {

// Size classes of 16 bytes up to 256; larger objects go to ::operator new.
constexpr size_t kGranule = 16;
constexpr size_t kNumClasses = 16;
// Blocks come from chunks of this size.
constexpr size_t kChunkBytes = size_t{64} << 10;
// A thread keeps at most this many free bytes per class; beyond that its
// whole list goes to the shared pool, where threads that run out look first.
constexpr size_t kMaxFreeBytesPerClass = size_t{4} << 20;

struct FreeBlock {
  FreeBlock* next;
};

// A free list of one class.
struct Batch {
  FreeBlock* head = nullptr;
  size_t count = 0;

  void Push(void* pointer) {
    head = new (pointer) FreeBlock{head};
    ++count;
  }
  // Asks for the next block's line as it hands one out: that block's link is
  // read at the next allocation of the class and its object written, and
  // once freed blocks have left the caches (a list of 200,000 tensors), the
  // miss then overlaps the work in between instead of stalling it.
  void* Pop() {
    --count;
    void* block = std::exchange(head, head->next);
    if (head) __builtin_prefetch(head, 1);
    return block;
  }
};

size_t BlockBytes(size_t size_class) {
  return (size_class + 1) * kGranule;
}

// Chunks are never given back: a block may be freed on any thread, long after
// the thread that carved it has gone. Free blocks beyond a thread's cap wait
// here, so memory stays bounded by the peak of live objects plus the caps.
class SharedPool {
 public:
  // A batch of free blocks of `size_class` to allocate from, or an empty one.
  Batch Take(size_t size_class) {
    std::lock_guard lock(mutex_);
    std::vector<Batch>& batches = batches_[size_class];
    if (batches.empty()) return {};
    Batch batch = batches.back();
    batches.pop_back();
    return batch;
  }
  void Give(size_t size_class, Batch batch) {
    if (batch.count == 0) return;
    std::lock_guard lock(mutex_);
    batches_[size_class].push_back(batch);
  }
  // Take, or else a fresh chunk carved into blocks in address order, so that
  // objects made one after another sit side by side in memory whatever
  // glibc's heap looks like after earlier runs.
  Batch TakeOrCarve(size_t size_class) {
    Batch batch = Take(size_class);
    if (batch.count != 0) return batch;
    // Line-aligned, so that a 64-byte object (a tensor) is one cache line.
    char* chunk = static_cast<char*>(::operator new (kChunkBytes, std::align_val_t{64}));
    {
      std::lock_guard lock(mutex_);
      chunks_.push_back(chunk);  // keeps the chunk reachable for leak checkers
    }
    const size_t bytes = BlockBytes(size_class);
    for (size_t offset = (kChunkBytes / bytes - 1) * bytes;; offset -= bytes) {
      batch.Push(chunk + offset);
      if (offset == 0) break;
    }
    return batch;
  }

 private:
  std::mutex mutex_;
  std::array<std::vector<Batch>, kNumClasses> batches_;
  std::vector<char*> chunks_;
};

// Made on first use, as objects are made by other files' static initialisers,
// and never destroyed, as static destructors still free objects at exit.
SharedPool& TheSharedPool() {
  static SharedPool* pool = new SharedPool;
  return *pool;
}

// One thread's free lists. Memory freed on another thread than the one that
// allocated it simply joins that thread's lists.
class FreeLists {
 public:
  ~FreeLists() {
    destroyed = true;
    for (size_t size_class = 0; size_class < kNumClasses; ++size_class) {
      TheSharedPool().Give(size_class, lists_[size_class]);
    }
  }

  void* Allocate(size_t size_class) {
    Batch& list = lists_[size_class];
    if (list.count == 0) list = TheSharedPool().TakeOrCarve(size_class);
    return list.Pop();
  }

  void Free(void* pointer, size_t size_class) {
    Batch& list = lists_[size_class];
    if (list.count * BlockBytes(size_class) >= kMaxFreeBytesPerClass) {
      TheSharedPool().Give(size_class, std::exchange(list, {}));
    }
    list.Push(pointer);
  }

  // Set once this thread's lists are gone (objects allocated or freed by later
  // thread-exit or static destructors go through the shared pool).
  static thread_local bool destroyed;

 private:
  std::array<Batch, kNumClasses> lists_{};
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
  if (FreeLists::destroyed) {
    Batch batch = TheSharedPool().TakeOrCarve(size_class);
    void* block = batch.Pop();
    TheSharedPool().Give(size_class, batch);
    return block;
  }
  return free_lists.Allocate(size_class);
}

void Object::operator delete(void* pointer, size_t size) {
  const size_t size_class = SizeClass(size);
  if (size_class == kNumClasses) {
    ::operator delete(pointer);
  } else if (FreeLists::destroyed) {
    Batch batch;
    batch.Push(pointer);
    TheSharedPool().Give(size_class, batch);
  } else {
    free_lists.Free(pointer, size_class);
  }
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
