// `nimble-bench microbench dispatch`: the paper's Figure 3 measured on this
// host (harness/bench/dispatch_microbench.h) and recorded in results.db as a
// run of kind 'microbench', model 'dispatch', which the report's Figure 3
// reads. An agent runs it for a `microbench` job of suite `dispatch`.
#pragma once

#include <CLI/CLI.hpp>
#include <utility>
#include <vector>

#include "harness/cli/fleet_commands.h"

namespace nimble::bench {

// Adds `microbench` and its subcommands to `app`; returns, for each, the
// subcommand and what runs it.
std::vector<std::pair<CLI::App*, CommandRunner>> AddMicrobenchCommands(CLI::App& app);

}  // namespace nimble::bench
