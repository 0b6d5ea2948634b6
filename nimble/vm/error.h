// Errors raised by the runtime and the compiler. Everything user-facing throws
// nimble::Error with a message that names the cause; nothing aborts.
#pragma once

#include <stdexcept>
#include <string>

namespace nimble {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace nimble
