// Sets an environment variable for a scope (a test that reads the process's
// settings: NIMBLE_NUM_THREADS, NIMBLE_CPU_FEATURES_OFF), then restores it,
// or unsets it where it was unset, so that a value set from outside stays.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

namespace nimble::testing {

class ScopedEnv {
 public:
  // A null `value` unsets the variable for the scope.
  ScopedEnv(std::string name, const char* value) : name_(std::move(name)) {
    if (const char* old = std::getenv(name_.c_str())) old_ = old;
    if (value) {
      setenv(name_.c_str(), value, /*overwrite=*/1);
    } else {
      unsetenv(name_.c_str());
    }
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_.c_str(), old_->c_str(), /*overwrite=*/1);
    } else {
      unsetenv(name_.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

}  // namespace nimble::testing
