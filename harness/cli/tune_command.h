// `nimble-bench tune`: tunes the matrix-product template on a model's sites
// (harness/tuning/tuner.h) here or through a coordinator, into the tuning
// database that later compiles read; `nimble-bench tune-task`: one measuring
// task (JSON on stdin, records as JSON on stdout), the child `tune` starts.
#pragma once

#include <CLI/CLI.hpp>
#include <utility>
#include <vector>

#include "harness/cli/fleet_commands.h"

namespace nimble::bench {

// Adds `tune` and `tune-task` to `app`; returns, for each, the subcommand
// and what runs it.
std::vector<std::pair<CLI::App*, CommandRunner>> AddTuneCommands(CLI::App& app);

}  // namespace nimble::bench
