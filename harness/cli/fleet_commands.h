// The fleet's commands of nimble-bench: `coordinator`, `agent`, `probe`,
// `submit`, `status`, `agents start|stop`. Each adds its subcommand and
// options to the app; the returned callable runs it (the CLI's exit status)
// after parsing. The work is in harness/coordinator, harness/agent and
// harness/fleet; this file only wires options to them.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>

namespace nimble::bench {

using CommandRunner = std::function<int()>;

// Adds every fleet subcommand to `app`; returns, for each, the subcommand
// and what runs it.
std::vector<std::pair<CLI::App*, CommandRunner>> AddFleetCommands(CLI::App& app);

}  // namespace nimble::bench
