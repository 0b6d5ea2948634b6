// Which globals may run more than once per run: recursion and what it
// reaches, closures and functions passed as values; not what only a
// straight-line path reaches.
#include "nimble/compiler/transform/repeated_code.h"

#include <gtest/gtest.h>

#include "nimble/compiler/text/parser.h"

namespace nimble::transform {
namespace {

TEST(RepeatedCode, RecursionWhatItCallsAndFunctionsPassedAsValues) {
  const ir::IRModule module = text::ParseModule(R"(#[version = "0.0.5"]
def @step(%x: int32) -> int32 { add(%x, 1) }

def @loop(%x: int32, %n: int32) -> int32 {
  if (less(%n, 1)) { %x } else { @loop(@step(%x), subtract(%n, 1)) }
}

def @ping(%n: int32) -> int32 { if (less(%n, 1)) { %n } else { @pong(subtract(%n, 1)) } }

def @pong(%n: int32) -> int32 { @ping(%n) }

def @once(%x: int32) -> int32 { multiply(%x, 2) }

def @passed(%x: int32) -> int32 { negative(%x) }

def @apply(%f: fn (int32) -> int32, %x: int32) -> int32 { %f(%x) }

def @main(%x: int32) -> (int32, int32, int32, int32) {
  (@loop(%x, 3), @ping(%x), @once(%x), @apply(@passed, %x))
}
)",
                                                "test.relay");
  const RepeatedCode repeated(module);
  for (const char* name : {"step", "loop", "ping", "pong", "passed"}) {
    EXPECT_TRUE(repeated.Global(name)) << name;
  }
  for (const char* name : {"once", "apply", "main"}) EXPECT_FALSE(repeated.Global(name)) << name;
}

}  // namespace
}  // namespace nimble::transform
