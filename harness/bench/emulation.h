// Running the aarch64 nimble-bench on an x86-64 host: the cross-built binary
// (scripts/build-arm.sh) under qemu-aarch64, invoked explicitly because our
// containers have no binfmt_misc. The child records its runs as emulated.
#pragma once

#include <string>
#include <vector>

namespace nimble::bench {

// The cross-built aarch64 nimble-bench (NIMBLE_ARM_BUILD env var, else
// NIMBLE_SOURCE_DIR/build-arm) and the qemu-aarch64 to run it with (PATH).
// Throws nimble::Error saying how to get them (scripts/build-arm.sh) when absent.
struct Emulator {
  std::string qemu;
  std::string arm_nimble_bench;
};
Emulator FindArmEmulator();

// Runs the ARM nimble-bench with `args` (its argv after argv[0]) under qemu-aarch64,
// with NIMBLE_EMULATOR=qemu-aarch64 in its environment (it records the run as emulated),
// stdio inherited; returns its exit status (128+signal when killed).
int RunUnderEmulator(const Emulator& emulator, const std::vector<std::string>& args);

}  // namespace nimble::bench
