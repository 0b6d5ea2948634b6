#include "nimble/vm/object.h"

#include <vector>

namespace nimble {

void Object::Release(const Object* object) {
  // Objects whose count reached zero while another object was being destroyed
  // on this thread wait here; the outermost release drains them in a loop.
  thread_local std::vector<const Object*> pending;
  thread_local bool draining = false;
  if (draining) {
    pending.push_back(object);
    return;
  }
  draining = true;
  delete object;
  while (!pending.empty()) {
    const Object* next = pending.back();
    pending.pop_back();
    delete next;
  }
  draining = false;
}

}  // namespace nimble
