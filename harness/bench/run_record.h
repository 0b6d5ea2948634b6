// A finished run as JSON: what `nimble-bench run --record-json` prints and
// an agent sends the coordinator, which writes it into results.db as the
// agent's host produced it.
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "harness/bench/results_db.h"

namespace nimble::bench {

nlohmann::json ToJson(const RunRecord& record);
// Throws nimble::Error naming a missing or mistyped member.
RunRecord RunRecordFromJson(const nlohmann::json& json);

}  // namespace nimble::bench
