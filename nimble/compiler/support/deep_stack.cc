#include "nimble/compiler/support/deep_stack.h"

#include <pthread.h>

#include <cstdint>
#include <cstring>

#include "nimble/vm/error.h"

namespace nimble {

namespace {

thread_local bool on_deep_stack = false;
// The lowest address the deep stack may grow to before DeepStackNearlyFull;
// 0 off the deep stack.
thread_local uintptr_t stack_floor = 0;

struct ThreadTask {
  const std::function<void()>* body;
  std::exception_ptr error;
};

void* RunTask(void* argument) {
  auto* task = static_cast<ThreadTask*>(argument);
  on_deep_stack = true;
  pthread_attr_t attributes;
  if (pthread_getattr_np(pthread_self(), &attributes) == 0) {
    void* lowest = nullptr;
    size_t size = 0;
    if (pthread_attr_getstack(&attributes, &lowest, &size) == 0) {
      stack_floor = reinterpret_cast<uintptr_t>(lowest) + kDeepStackReserve;
    }
    pthread_attr_destroy(&attributes);
  }
  try {
    (*task->body)();
  } catch (...) {
    task->error = std::current_exception();
  }
  return nullptr;
}

}  // namespace

bool DeepStackNearlyFull() {
  return reinterpret_cast<uintptr_t>(__builtin_frame_address(0)) < stack_floor;
}

void RunOnDeepStack(const std::function<void()>& body) {
  if (on_deep_stack) {
    body();
    return;
  }
  ThreadTask task{&body, nullptr};
  pthread_attr_t attributes;
  pthread_attr_init(&attributes);
  pthread_attr_setstacksize(&attributes, kDeepStackBytes);
  pthread_t thread;
  const int status = pthread_create(&thread, &attributes, RunTask, &task);
  pthread_attr_destroy(&attributes);
  if (status != 0) {
    throw Error(std::string("cannot start the compiler thread: ") + std::strerror(status));
  }
  pthread_join(thread, nullptr);
  if (task.error) std::rethrow_exception(task.error);
}

}  // namespace nimble
