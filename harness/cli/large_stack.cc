#include "harness/cli/large_stack.h"

#include <pthread.h>

#include <exception>

namespace nimble::cli {
namespace {

struct Call {
  const std::function<int()>* fn = nullptr;
  int result = 1;
  std::exception_ptr error;
};

void* RunCall(void* argument) {
  auto* call = static_cast<Call*>(argument);
  try {
    call->result = (*call->fn)();
  } catch (...) {
    call->error = std::current_exception();
  }
  return nullptr;
}

}  // namespace

int RunWithStack(size_t bytes, const std::function<int()>& fn) {
  pthread_attr_t attributes;
  if (pthread_attr_init(&attributes) != 0) return fn();
  Call call;
  call.fn = &fn;
  pthread_t thread;
  const bool started = pthread_attr_setstacksize(&attributes, bytes) == 0 &&
                       pthread_create(&thread, &attributes, RunCall, &call) == 0;
  pthread_attr_destroy(&attributes);
  if (!started) return fn();
  pthread_join(thread, nullptr);
  if (call.error) std::rethrow_exception(call.error);
  return call.result;
}

}  // namespace nimble::cli
