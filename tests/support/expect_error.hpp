// One assertion the tests share: a call fails with a reshard::Error of a given kind whose message names the problem.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "reshard/error.hpp"

namespace reshard::testing {

// Expects `f` to throw reshard::Error of `kind` whose message contains `needle` (any message when it is empty).
template <class F>
void expect_error(F&& f, ErrorKind kind, const std::string& needle = {}) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one of kind " << static_cast<int>(kind) << " mentioning '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << "message: " << e.what();
  }
}

}  // namespace reshard::testing
