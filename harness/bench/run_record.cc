#include "harness/bench/run_record.h"

#include "nimble/vm/error.h"

namespace nimble::bench {

nlohmann::json ToJson(const RunRecord& record) {
  const RunInfo& info = record.info;
  nlohmann::json measurements = nlohmann::json::array();
  for (const Measurement& figure : record.measurements) {
    measurements.push_back({{"name", figure.name}, {"value", figure.value}, {"unit", figure.unit}});
  }
  return {{"started_at", info.started_at},
          {"commit", info.commit_id},
          {"host", info.host},
          {"cpu_model", info.cpu_model},
          {"cpu_flags", info.cpu_flags},
          {"cores", info.cores},
          {"threads", info.threads},
          {"target", info.target},
          {"model", info.model},
          {"configuration", info.configuration},
          {"dataset", info.dataset},
          {"split", info.split},
          {"sentences", info.sentences},
          {"warmup", info.warmup},
          {"repeat", info.repeat},
          {"kind", info.kind},
          {"arch", info.arch},
          {"emulated", info.emulated},
          {"emulator", info.emulator},
          {"job_id", info.job_id},
          {"agent", info.agent},
          {"framework", info.framework},
          {"gpu", info.gpu},
          {"measurements", measurements}};
}

RunRecord RunRecordFromJson(const nlohmann::json& json) {
  try {
    RunRecord record;
    RunInfo& info = record.info;
    info.started_at = json.at("started_at").get<std::string>();
    info.commit_id = json.at("commit").get<std::string>();
    info.host = json.at("host").get<std::string>();
    info.cpu_model = json.at("cpu_model").get<std::string>();
    info.cpu_flags = json.at("cpu_flags").get<std::string>();
    info.cores = json.at("cores").get<int64_t>();
    info.threads = json.at("threads").get<int64_t>();
    info.target = json.at("target").get<std::string>();
    info.model = json.at("model").get<std::string>();
    info.configuration = json.at("configuration").get<std::string>();
    info.dataset = json.at("dataset").get<std::string>();
    info.split = json.at("split").get<std::string>();
    info.sentences = json.at("sentences").get<int64_t>();
    info.warmup = json.at("warmup").get<int64_t>();
    info.repeat = json.at("repeat").get<int64_t>();
    info.kind = json.at("kind").get<std::string>();
    info.arch = json.at("arch").get<std::string>();
    info.emulated = json.at("emulated").get<bool>();
    info.emulator = json.at("emulator").get<std::string>();
    // Set by the coordinator when it records a job's run, never by an agent.
    info.job_id = json.value("job_id", int64_t{0});
    info.agent = json.value("agent", std::string());
    info.framework = json.value("framework", std::string("nimble"));
    info.gpu = json.value("gpu", std::string());
    for (const nlohmann::json& figure : json.at("measurements")) {
      record.measurements.push_back({figure.at("name").get<std::string>(),
                                     figure.at("value").get<double>(),
                                     figure.at("unit").get<std::string>()});
    }
    return record;
  } catch (const nlohmann::json::exception& error) {
    throw Error(std::string("a malformed run record: ") + error.what());
  }
}

}  // namespace nimble::bench
