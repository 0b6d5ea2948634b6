// nimble-bench's `report` and `gate`: options wired to harness/reports,
// returned as fleet_commands.h's commands are (the subcommand and what runs
// it after parsing).
#pragma once

#include <CLI/CLI.hpp>
#include <vector>

#include "harness/cli/fleet_commands.h"

namespace nimble::bench {

std::vector<std::pair<CLI::App*, CommandRunner>> AddReportCommands(CLI::App& app);

}  // namespace nimble::bench
