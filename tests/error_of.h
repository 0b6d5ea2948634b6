// The message of the nimble::Error a callable throws, for tests that check
// error texts; fails the test when nothing is thrown.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "nimble/vm/error.h"

namespace nimble {

template <typename Fn>
std::string ErrorOf(Fn&& fn) {
  try {
    fn();
  } catch (const Error& error) {
    return error.what();
  }
  ADD_FAILURE() << "expected a nimble::Error, but none was thrown";
  return "";
}

}  // namespace nimble
