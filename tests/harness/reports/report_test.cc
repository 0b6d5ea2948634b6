// BuildReport on runs read back from a real results.db (a temporary file
// filled through ResultsDb): measured figures traced to their runs beside
// the paper's, peers compared with Nimble on the same host, emulated runs
// and missing systems shown as gaps, Table 4 and the memory table derived
// from their figures, the sources exactly the runs cited; and RenderMarkdown
// laying that out.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "harness/reports/report.h"
#include "harness/reports/run_selection.h"
#include "tests/harness/reports/reports_test_util.h"

namespace nimble::reports {
namespace {

using test_util::RunInfoOf;
using ::testing::DoubleNear;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::Optional;
using ::testing::SizeIs;
using ::testing::UnorderedElementsAre;

constexpr const char* kLstmAtPaperSizes =
    R"({"input_size":300,"hidden_size":512,"layers":1,"seed":1})";
constexpr const char* kBertBase =
    R"({"hidden_size":768,"layers":12,"heads":12,"ffn_size":3072,"seed":1})";

bench::RunInfo PyTorch(const std::string& variant) {
  bench::RunInfo info =
      RunInfoOf("lstm", R"({"input_size":300,"hidden_size":512,"layers":1,"seed":1,)"
                        R"("variant":")" +
                            variant + R"("})");
  info.framework = "pytorch";
  return info;
}

class ReportTest : public test_util::ResultsDbTest {
 protected:
  int64_t Record(const bench::RunInfo& info, const std::vector<bench::Measurement>& figures) {
    return db_->RecordRun(info, figures);
  }
  int64_t Record(const bench::RunInfo& info, double us_per_token) {
    return Record(info, {{"us_per_token", us_per_token, "us"}});
  }
  Report Build() const {
    return BuildReport(SelectRuns(*db_, {}), db_->path(), "all finished runs");
  }
};

const Table& TableOf(const Report& report, const std::string& id) {
  for (const Table& table : report.tables) {
    if (table.id == id) return table;
  }
  ADD_FAILURE() << "no table " << id;
  static const Table none;
  return none;
}

// The cell of `row` under the `nth` header named `column`.
const Cell& At(const Table& table, const std::vector<Cell>& row, const std::string& column,
               int nth = 1) {
  for (size_t i = 0; i < table.header.size() && i < row.size(); ++i) {
    if (table.header[i] == column && --nth == 0) return row[i];
  }
  ADD_FAILURE() << table.id << " has no column " << column;
  static const Cell none;
  return none;
}

// The cell of `row` that lists its runs ("Runs", or "Run" in the tables of
// counts that show the latest run).
const Cell& RunsOf(const Table& table, const std::vector<Cell>& row) {
  const bool one = std::find(table.header.begin(), table.header.end(), "Run") != table.header.end();
  return At(table, row, one ? "Run" : "Runs");
}

// The row whose runs include `run`, or nullptr.
const std::vector<Cell>* RowOfRun(const Table& table, int64_t run) {
  for (const std::vector<Cell>& row : table.rows) {
    const Cell& runs = RunsOf(table, row);
    if (runs.run == run || std::find(runs.runs.begin(), runs.runs.end(), run) != runs.runs.end())
      return &row;
  }
  return nullptr;
}

// The row whose System is `system`, or nullptr.
const std::vector<Cell>* RowOfSystem(const Table& table, const std::string& system) {
  for (const std::vector<Cell>& row : table.rows) {
    if (At(table, row, "System").text == system) return &row;
  }
  return nullptr;
}

size_t Count(const std::string& text, const std::string& needle) {
  size_t count = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
    ++count;
  }
  return count;
}

TEST_F(ReportTest, TablesComeInThePapersOrder) {
  Record(RunInfoOf("lstm", kLstmAtPaperSizes), 52.0);
  const Report report = Build();
  std::vector<std::string> ids;
  for (const Table& table : report.tables) ids.push_back(table.id);
  EXPECT_THAT(ids, ElementsAre("table1", "table2", "table3", "table4", "memory", "figure3",
                               "instructions", "onnx"));
  EXPECT_EQ(report.database, db_->path());
  EXPECT_EQ(report.filter, "all finished runs");
  EXPECT_THAT(report.as_of, ::testing::MatchesRegex(
                               "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z"));
}

// A report is a function of its database: built again later, the same
// bytes (so a committed report can be checked against its database).
TEST_F(ReportTest, TheSameDatabaseGivesTheSameReport) {
  Record(RunInfoOf("lstm", kLstmAtPaperSizes), 52.0);
  const std::string first = RenderMarkdown(Build());
  usleep(5000);
  EXPECT_EQ(RenderMarkdown(Build()), first);
}

TEST_F(ReportTest, ANimbleRunAtThePapersSizesStandsBesideThePapersFigure) {
  const int64_t run = Record(RunInfoOf("lstm", kLstmAtPaperSizes), 52.0);
  const Report report = Build();
  const Table& table = TableOf(report, "table1");
  ASSERT_THAT(table.rows, SizeIs(1));
  const std::vector<Cell>* row = RowOfRun(table, run);
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(At(table, *row, "System").text, "Nimble");
  EXPECT_EQ(At(table, *row, "Layers").text, "1");
  EXPECT_EQ(At(table, *row, "Target").text, "intel");
  EXPECT_EQ(At(table, *row, "Host").text, "box-1");
  EXPECT_THAT(report.hosts, ElementsAre("box-1 (Xeon Platinum 8259CL)"));
  EXPECT_EQ(At(table, *row, "Model, data, threads").text, "300/512, synthetic, 1 thread");
  const Cell& figure = At(table, *row, "µs/token");
  EXPECT_EQ(figure.text, "52.0");
  EXPECT_THAT(figure.value, Optional(52.0));
  EXPECT_FALSE(figure.gap);
  EXPECT_EQ(At(table, *row, "95% interval, runs").text, "1 run: no interval");
  EXPECT_EQ(At(table, *row, "Paper (ours / paper)").text, "47.8 (1.09x)");
  EXPECT_EQ(At(table, *row, "Nimble's speed-up").text, "");
  EXPECT_EQ(At(table, *row, "Verdict").text, "");
  EXPECT_EQ(At(table, *row, "Runs").text, "run " + std::to_string(run));
  EXPECT_THAT(At(table, *row, "Runs").runs, ElementsAre(run));
  // Measured, so the paper's Nimble at 1 layer on Intel leaves the folded line.
  EXPECT_THAT(table.not_measured, HasSubstr("Nimble (paper: 1 layer: 93.0 µs/token on nvidia, "
                                            "182.2 µs/token on arm; 2 layers: 97.2 µs/token on "
                                            "intel"));
  EXPECT_THAT(table.not_measured, Not(HasSubstr("47.8")));
  // Nimble alone has no speed-up to chart.
  EXPECT_THAT(table.chart, IsEmpty());
}

TEST_F(ReportTest, RoundsOfOneConfigurationAreOneRowWithTheirMedianAndInterval) {
  std::vector<int64_t> runs;
  for (const double us : {55.0, 51.0, 60.0, 52.0, 50.0, 58.0, 53.0, 54.0, 57.0, 56.0}) {
    runs.push_back(Record(RunInfoOf("lstm", kLstmAtPaperSizes), us));
  }
  const Report report = Build();
  const Table& table = TableOf(report, "table1");
  ASSERT_THAT(table.rows, SizeIs(1));
  const std::vector<Cell>& row = table.rows[0];
  EXPECT_EQ(At(table, row, "µs/token").text, "54.5");
  EXPECT_THAT(At(table, row, "µs/token").value, Optional(54.5));
  // Ten values: the 2nd and 9th smallest, 51 and 58 (coverage 97.9%).
  EXPECT_EQ(At(table, row, "95% interval, runs").text, "51.0–58.0, 10 runs");
  EXPECT_EQ(At(table, row, "Paper (ours / paper)").text, "47.8 (1.14x)");
  EXPECT_EQ(At(table, row, "Runs").runs, runs);
}

TEST_F(ReportTest, MarkdownLinksEachRunOfARow) {
  const int64_t first = Record(RunInfoOf("lstm", kLstmAtPaperSizes), 50.0);
  const int64_t second = Record(RunInfoOf("lstm", kLstmAtPaperSizes), 54.0);
  const std::string a = std::to_string(first), b = std::to_string(second);
  EXPECT_THAT(RenderMarkdown(Build()),
              HasSubstr("| runs [" + a + "](#run-" + a + "), [" + b + "](#run-" + b + ") |\n"));
}

TEST_F(ReportTest, FewerThanSixRunsShowTheirRangeMarked) {
  for (const double us : {50.0, 54.0, 52.0}) Record(RunInfoOf("lstm", kLstmAtPaperSizes), us);
  const Report report = Build();
  const Table& table = TableOf(report, "table1");
  ASSERT_THAT(table.rows, SizeIs(1));
  EXPECT_EQ(At(table, table.rows[0], "µs/token").text, "52.0");
  EXPECT_EQ(At(table, table.rows[0], "95% interval, runs").text,
            "range 50.0–54.0, 3 runs (n too small for a 95% interval)");
}

TEST_F(ReportTest, ARunAtOtherSizesHasNoPaperFigure) {
  const int64_t run =
      Record(RunInfoOf("lstm", R"({"input_size":64,"hidden_size":128,"layers":1,"seed":1})"), 12.5);
  const Report report = Build();
  const Table& table = TableOf(report, "table1");
  const std::vector<Cell>* row = RowOfRun(table, run);
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(At(table, *row, "µs/token").text, "12.5");
  EXPECT_EQ(At(table, *row, "Model, data, threads").text, "64/128, synthetic, 1 thread");
  EXPECT_EQ(At(table, *row, "Paper (ours / paper)").text, "");
  // The paper's Nimble figure still has no run at its sizes.
  EXPECT_THAT(table.not_measured, HasSubstr("1 layer: 47.8 µs/token on intel"));
}

TEST_F(ReportTest, APeerRunShowsNimblesSpeedUpOnTheSameHost) {
  const int64_t nimble = Record(RunInfoOf("lstm", kLstmAtPaperSizes), 52.0);
  const int64_t pytorch = Record(PyTorch("mv_script"), 104.0);
  bench::RunInfo elsewhere_info = PyTorch("eager");
  elsewhere_info.host = "box-2";
  const int64_t elsewhere = Record(elsewhere_info, 130.0);
  const Report report = Build();
  const Table& table = TableOf(report, "table1");

  const std::vector<Cell>* row = RowOfRun(table, pytorch);
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(At(table, *row, "System").text, "PyTorch (mv_script)");
  EXPECT_EQ(At(table, *row, "µs/token").text, "104.0");
  EXPECT_EQ(At(table, *row, "Paper (ours / paper)").text, "79.3 (1.31x)");
  EXPECT_EQ(At(table, *row, "Nimble's speed-up").text, "2.00x");
  EXPECT_THAT(At(table, *row, "Nimble's speed-up").value, Optional(2.0));
  EXPECT_EQ(At(table, *row, "95% interval, rounds").text, "1 round: no interval");
  EXPECT_EQ(At(table, *row, "Paper's speed-up").text, "1.66x");  // 79.3 / 47.8
  EXPECT_EQ(At(table, *row, "Verdict").text, "inconclusive: 5 more rounds needed");
  // No Nimble run on box-2 to compare with.
  ASSERT_NE(RowOfRun(table, elsewhere), nullptr);
  const Cell& unpaired = At(table, *RowOfRun(table, elsewhere), "Nimble's speed-up");
  EXPECT_EQ(unpaired.text, "no Nimble run to pair with");
  EXPECT_TRUE(unpaired.gap);
  EXPECT_FALSE(unpaired.value.has_value());
  EXPECT_EQ(At(table, *RowOfRun(table, elsewhere), "Verdict").text, "");
  ASSERT_NE(RowOfRun(table, nimble), nullptr);
  EXPECT_EQ(At(table, *RowOfRun(table, nimble), "Nimble's speed-up").text, "");
  EXPECT_THAT(table.not_measured, Not(HasSubstr("PyTorch (paper: 1 layer: 1.66x on intel")));
  EXPECT_THAT(table.not_measured, HasSubstr("PyTorch (paper: 1 layer: 1.19x on nvidia"));
  // The chart: ours with its range, beside the paper's speed-up.
  ASSERT_THAT(table.chart, SizeIs(2));
  EXPECT_EQ(table.chart[0].label, "PyTorch (mv_script)");
  EXPECT_DOUBLE_EQ(table.chart[0].value, 2.0);
  EXPECT_FALSE(table.chart[0].paper);
  EXPECT_THAT(table.chart[0].low, Optional(2.0));
  EXPECT_EQ(table.chart[1].label, "paper: PyTorch");
  EXPECT_NEAR(table.chart[1].value, 79.3 / 47.8, 1e-12);
  EXPECT_TRUE(table.chart[1].paper);
  EXPECT_EQ(table.chart[0].group, table.chart[1].group);
}

// Rounds as scripts/paper-runs.sh runs them: Nimble, then the peer; each
// peer run is divided by the Nimble run that finished last before it.
TEST_F(ReportTest, PeerRunsPairWithTheNimbleRunOfTheirRound) {
  const int64_t early = Record(PyTorch("eager"), 999.0);  // before any Nimble run
  const std::vector<std::pair<double, double>> rounds = {{50, 100}, {40, 100}, {25, 75},
                                                         {60, 90},  {50, 110}, {50, 90}};
  for (const auto& [nimble_us, peer_us] : rounds) {
    Record(RunInfoOf("lstm", kLstmAtPaperSizes), nimble_us);
    // Neither another host's Nimble nor another Nimble configuration starts a round.
    Record(RunInfoOf("lstm", kLstmAtPaperSizes, "box-2"), 1);
    Record(RunInfoOf("lstm", R"({"input_size":300,"hidden_size":512,"layers":1,"seed":1,)"
                             R"("kernels":"generated"})"),
           1);
    // Nor a Nimble run on other threads.
    bench::RunInfo two_threads = RunInfoOf("lstm", kLstmAtPaperSizes);
    two_threads.threads = 2;
    Record(two_threads, 1);
    Record(PyTorch("eager"), peer_us);
  }
  const Report report = Build();
  const Table& table = TableOf(report, "table1");
  const std::vector<Cell>* row = RowOfRun(table, early);
  ASSERT_NE(row, nullptr);
  // Ratios 2.0, 2.5, 3.0, 1.5, 2.2, 1.8: median 2.1, six rounds span [1.5, 3.0].
  EXPECT_EQ(At(table, *row, "Nimble's speed-up").text, "2.10x");
  EXPECT_THAT(At(table, *row, "Nimble's speed-up").value, Optional(DoubleNear(2.1, 1e-12)));
  EXPECT_EQ(At(table, *row, "95% interval, rounds").text,
            "1.50–3.00, 6 rounds; unpaired (no Nimble run before): run " + std::to_string(early));
  EXPECT_EQ(At(table, *row, "Verdict").text, "holds");
  // The unpaired run still counts among the peer's timings.
  EXPECT_EQ(At(table, *row, "µs/token").text, "100.0");
  EXPECT_EQ(At(table, *row, "95% interval, runs").text, "75.0–999.0, 7 runs");
  EXPECT_THAT(At(table, *row, "Runs").runs, SizeIs(7));
}

TEST_F(ReportTest, APeerFasterInEveryRoundDoesNotHoldThePapersSpeedUp) {
  for (int round = 0; round < 6; ++round) {
    Record(RunInfoOf("lstm", kLstmAtPaperSizes), 50 + round);
    Record(PyTorch("mv_script"), 40 + round);
  }
  const Report report = Build();
  const Table& table = TableOf(report, "table1");
  ASSERT_THAT(table.rows, SizeIs(2));
  const std::vector<Cell>* peer = RowOfSystem(table, "PyTorch (mv_script)");
  ASSERT_NE(peer, nullptr);
  EXPECT_EQ(At(table, *peer, "Verdict").text, "does not hold");
}

TEST_F(ReportTest, ARoundsIntervalSpanningOneIsInconclusive) {
  for (const auto& [nimble_us, peer_us] : std::vector<std::pair<double, double>>{
           {50, 60}, {50, 45}, {50, 55}, {50, 48}, {50, 52}, {50, 49}}) {
    Record(RunInfoOf("lstm", kLstmAtPaperSizes), nimble_us);
    Record(PyTorch("mv_script"), peer_us);
  }
  const Report report = Build();
  const Table& table = TableOf(report, "table1");
  const std::vector<Cell>* peer = RowOfSystem(table, "PyTorch (mv_script)");
  ASSERT_NE(peer, nullptr);
  EXPECT_EQ(At(table, *peer, "Verdict").text, "inconclusive: the interval spans 1");
}

TEST_F(ReportTest, OnnxRuntimeHasASpeedUpButNoPaperFigure) {
  Record(RunInfoOf("lstm", kLstmAtPaperSizes), 50);
  bench::RunInfo onnx = RunInfoOf("lstm", kLstmAtPaperSizes);
  onnx.framework = "onnxruntime";
  Record(onnx, 60);
  const Report report = Build();
  const Table& table = TableOf(report, "table1");
  ASSERT_THAT(table.rows, SizeIs(2));
  const std::vector<Cell>* row = RowOfSystem(table, "ONNX Runtime");
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(At(table, *row, "Nimble's speed-up").text, "1.20x");
  EXPECT_EQ(At(table, *row, "Paper's speed-up").text, "");
  EXPECT_EQ(At(table, *row, "Verdict").text, "no paper figure");
}

// A peer run of `framework`'s `variant` at the paper's sizes of `model`,
// computed in `precision`, as `nimble-bench baseline` records it.
bench::RunInfo Peer(const std::string& framework, const std::string& variant,
                    const std::string& model = "lstm", const std::string& precision = "f32") {
  const std::string sizes = model == "lstm" ? R"("input_size":300,"hidden_size":512,"layers":1)"
                            : model == "treelstm" ? R"("input_size":300,"hidden_size":150)"
                                                  : R"("hidden_size":768,"layers":12,"heads":12,)"
                                                    R"("ffn_size":3072)";
  bench::RunInfo info = RunInfoOf(model, "{" + sizes + R"(,"seed":1,"variant":")" + variant +
                                             R"(","precision":")" + precision + R"("})");
  info.framework = framework;
  return info;
}

constexpr const char* kTreeLstmAtPaperSizes = R"({"input_size":300,"hidden_size":150,"seed":1})";

TEST_F(ReportTest, EveryPeerFrameworkHasANamedRowWithItsSpeedUp) {
  Record(RunInfoOf("lstm", kLstmAtPaperSizes), 50);
  Record(Peer("openvino", "f32"), 60);
  Record(Peer("tensorflow", "keras_function"), 300);
  Record(Peer("mxnet", "gluon_hybrid"), 200);
  Record(Peer("dynet", "vanilla_lstm"), 100);
  Record(RunInfoOf("bert", kBertBase), 300);
  Record(Peer("tvm", "relax_vm", "bert"), 450);
  Record(Peer("tensorflow", "xla", "bert"), 600);
  Record(Peer("mxnet", "gluon_hybrid", "bert"), 600);
  const Report report = Build();
  const Table& lstm = TableOf(report, "table1");
  ASSERT_THAT(lstm.rows, SizeIs(5));
  const std::vector<Cell>* openvino = RowOfSystem(lstm, "OpenVINO (f32)");
  ASSERT_NE(openvino, nullptr);
  EXPECT_EQ(At(lstm, *openvino, "Nimble's speed-up").text, "1.20x");
  EXPECT_EQ(At(lstm, *openvino, "95% interval, rounds").text, "1 round: no interval");
  EXPECT_EQ(At(lstm, *openvino, "Paper (ours / paper)").text, "");
  EXPECT_EQ(At(lstm, *openvino, "Paper's speed-up").text, "");
  EXPECT_EQ(At(lstm, *openvino, "Verdict").text, "no paper figure");
  const std::vector<Cell>* dynet = RowOfSystem(lstm, "DyNet (vanilla_lstm)");
  ASSERT_NE(dynet, nullptr);
  EXPECT_EQ(At(lstm, *dynet, "Nimble's speed-up").text, "2.00x");
  EXPECT_EQ(At(lstm, *dynet, "Verdict").text, "no paper figure");
  // MXNet and TensorFlow stand beside the paper's figures of the same name.
  const std::vector<Cell>* tensorflow = RowOfSystem(lstm, "TensorFlow (keras_function)");
  ASSERT_NE(tensorflow, nullptr);
  EXPECT_EQ(At(lstm, *tensorflow, "Paper (ours / paper)").text, "301.4 (1.00x)");
  EXPECT_EQ(At(lstm, *tensorflow, "Nimble's speed-up").text, "6.00x");
  EXPECT_EQ(At(lstm, *tensorflow, "Paper's speed-up").text, "6.31x");  // 301.4 / 47.8
  EXPECT_EQ(At(lstm, *tensorflow, "Verdict").text, "inconclusive: 5 more rounds needed");
  const std::vector<Cell>* mxnet = RowOfSystem(lstm, "MXNet (gluon_hybrid)");
  ASSERT_NE(mxnet, nullptr);
  EXPECT_EQ(At(lstm, *mxnet, "Paper (ours / paper)").text, "212.9 (0.94x)");
  EXPECT_EQ(At(lstm, *mxnet, "Paper's speed-up").text, "4.45x");  // 212.9 / 47.8
  EXPECT_EQ(At(lstm, *mxnet, "Verdict").text, "inconclusive: 5 more rounds needed");
  // Measured, their 1-layer Intel figures leave the folded line.
  EXPECT_THAT(lstm.not_measured, HasSubstr("MXNet (paper: 1 layer: 1.46x on nvidia"));
  EXPECT_THAT(lstm.not_measured, HasSubstr("TensorFlow (paper: 1 layer: 3.28x on nvidia"));
  std::vector<std::string> labels;
  for (const Bar& bar : lstm.chart) labels.push_back(bar.label);
  EXPECT_THAT(labels, UnorderedElementsAre("OpenVINO (f32)", "TensorFlow (keras_function)",
                                           "paper: TensorFlow", "MXNet (gluon_hybrid)",
                                           "paper: MXNet", "DyNet (vanilla_lstm)"));

  const Table& bert = TableOf(report, "table3");
  const std::vector<Cell>* tvm = RowOfSystem(bert, "TVM Relax VM");
  ASSERT_NE(tvm, nullptr);
  EXPECT_EQ(At(bert, *tvm, "Nimble's speed-up").text, "1.50x");
  EXPECT_EQ(At(bert, *tvm, "Verdict").text, "no paper figure");
  const std::vector<Cell>* xla = RowOfSystem(bert, "TensorFlow (xla)");
  ASSERT_NE(xla, nullptr);
  EXPECT_EQ(At(bert, *xla, "Paper's speed-up").text, "2.50x");  // 768.7 / 307.0
  EXPECT_EQ(At(bert, *xla, "Verdict").text, "inconclusive: 5 more rounds needed");
  const std::vector<Cell>* mxnet_bert = RowOfSystem(bert, "MXNet (gluon_hybrid)");
  ASSERT_NE(mxnet_bert, nullptr);
  EXPECT_EQ(At(bert, *mxnet_bert, "Paper's speed-up").text, "1.48x");  // 455.8 / 307.0
  EXPECT_THAT(bert.not_measured, Not(HasSubstr("MXNet (paper: 1.48x on intel")));
}

TEST_F(ReportTest, MxnetAndTensorFlowHoldOrNotAgainstThePapersSpeedUp) {
  for (const double nimble_us : {50.0, 51.0, 49.0, 50.5, 49.5, 50.0}) {
    Record(RunInfoOf("lstm", kLstmAtPaperSizes), nimble_us);
    Record(Peer("mxnet", "gluon"), 4 * nimble_us);       // slower, as in the paper
    Record(Peer("tensorflow", "keras_function"), 40.0);  // faster than Nimble: against it
  }
  const Report report = Build();
  const Table& table = TableOf(report, "table1");
  const std::vector<Cell>* mxnet = RowOfSystem(table, "MXNet (gluon)");
  ASSERT_NE(mxnet, nullptr);
  EXPECT_EQ(At(table, *mxnet, "95% interval, rounds").text, "4.00–4.00, 6 rounds");
  EXPECT_EQ(At(table, *mxnet, "Verdict").text, "holds");
  const std::vector<Cell>* tensorflow = RowOfSystem(table, "TensorFlow (keras_function)");
  ASSERT_NE(tensorflow, nullptr);
  EXPECT_EQ(At(table, *tensorflow, "Verdict").text, "does not hold");
}

TEST_F(ReportTest, TheWhileLoopTreeLstmIsComparedWithTfFold) {
  Record(RunInfoOf("treelstm", kTreeLstmAtPaperSizes), 40);
  Record(Peer("tensorflow", "while_loop", "treelstm"), 200);
  Record(Peer("tensorflow", "eager_recursive", "treelstm"), 800);
  Record(Peer("dynet", "recursive", "treelstm"), 120);
  const Report report = Build();
  const Table& table = TableOf(report, "table2");
  const std::vector<Cell>* fold = RowOfSystem(table, "TensorFlow (while_loop, for TF Fold)");
  ASSERT_NE(fold, nullptr);
  EXPECT_EQ(At(table, *fold, "Paper (ours / paper)").text, "209.9 (0.95x)");
  EXPECT_EQ(At(table, *fold, "Nimble's speed-up").text, "5.00x");
  EXPECT_EQ(At(table, *fold, "Paper's speed-up").text, "5.21x");  // 209.9 / 40.3
  EXPECT_EQ(At(table, *fold, "Verdict").text, "inconclusive: 5 more rounds needed");
  std::vector<std::string> labels;
  for (const Bar& bar : table.chart) labels.push_back(bar.label);
  EXPECT_THAT(labels, UnorderedElementsAre("TensorFlow (while_loop, for TF Fold)", "paper: TF Fold",
                                           "TensorFlow (eager_recursive)", "DyNet (recursive)"));
  // The paper has no TensorFlow Tree-LSTM but TF Fold's.
  const std::vector<Cell>* eager = RowOfSystem(table, "TensorFlow (eager_recursive)");
  ASSERT_NE(eager, nullptr);
  EXPECT_EQ(At(table, *eager, "Nimble's speed-up").text, "20.00x");
  EXPECT_EQ(At(table, *eager, "Paper's speed-up").text, "");
  EXPECT_EQ(At(table, *eager, "Verdict").text, "no paper figure");
  const std::vector<Cell>* dynet = RowOfSystem(table, "DyNet (recursive)");
  ASSERT_NE(dynet, nullptr);
  EXPECT_EQ(At(table, *dynet, "Verdict").text, "no paper figure");
  // TF Fold's figure is measured; why TF Fold itself is not is said once.
  EXPECT_THAT(table.not_measured, Not(HasSubstr("TF Fold (paper:")));
  EXPECT_EQ(Count(table.not_measured, "archived"), 1u);
  EXPECT_THAT(table.not_measured,
              HasSubstr("TF Fold itself is archived and needs TensorFlow 1.x on Python <= 3.6"));
}

TEST_F(ReportTest, ARunBelowFp32IsMarkedAndNotJudgedAgainstThePaper) {
  Record(RunInfoOf("lstm", kLstmAtPaperSizes), 50);
  const int64_t bf16 = Record(Peer("openvino", "default", "lstm", "bf16"), 40);
  // A framework the paper measured, at reduced precision: no paper figure either.
  Record(Peer("mxnet", "gluon", "lstm", "bf16"), 150);
  const Report report = Build();
  const Table& table = TableOf(report, "table1");
  const std::vector<Cell>* row = RowOfRun(table, bf16);
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(At(table, *row, "System").text, "OpenVINO (default, bf16)");
  EXPECT_EQ(At(table, *row, "Nimble's speed-up").text, "0.80x");
  EXPECT_EQ(At(table, *row, "Verdict").text, "not comparable: bf16, the paper's figures are fp32");
  const std::vector<Cell>* mxnet = RowOfSystem(table, "MXNet (gluon, bf16)");
  ASSERT_NE(mxnet, nullptr);
  EXPECT_EQ(At(table, *mxnet, "Nimble's speed-up").text, "3.00x");
  EXPECT_EQ(At(table, *mxnet, "Paper (ours / paper)").text, "");
  EXPECT_EQ(At(table, *mxnet, "Paper's speed-up").text, "");
  EXPECT_EQ(At(table, *mxnet, "Verdict").text,
            "not comparable: bf16, the paper's figures are fp32");
  // It measured none of the paper's figures, and the chart has no paper bar for it.
  EXPECT_THAT(table.not_measured, HasSubstr("MXNet (paper: 1 layer: 4.45x on intel"));
  for (const Bar& bar : table.chart) EXPECT_FALSE(bar.paper) << bar.label;
}

TEST_F(ReportTest, AnEmulatedRunShowsAGapNeverItsLatency) {
  bench::RunInfo info = RunInfoOf("lstm", kLstmAtPaperSizes);
  info.target = "arm";
  info.arch = "aarch64";
  info.emulated = true;
  info.emulator = "qemu-aarch64";
  const int64_t run = Record(info, 999.5);
  const Report report = Build();
  const Table& table = TableOf(report, "table1");
  const std::vector<Cell>* row = RowOfRun(table, run);
  ASSERT_NE(row, nullptr);
  const Cell& figure = At(table, *row, "µs/token");
  EXPECT_TRUE(figure.gap);
  EXPECT_THAT(figure.text, HasSubstr("emulated (qemu-aarch64)"));
  EXPECT_FALSE(figure.value.has_value());
  EXPECT_EQ(At(table, *row, "Paper (ours / paper)").text, "182.2");  // no latency to divide
  for (const Bar& bar : table.chart) EXPECT_NE(bar.value, 999.5) << bar.label;
  // The paper's ARM figure still waits for a real measurement.
  EXPECT_THAT(table.not_measured, HasSubstr("182.2 µs/token on arm"));
  EXPECT_THAT(RenderMarkdown(report), Not(HasSubstr("999.5")));
  EXPECT_THAT(RenderHtml(report), Not(HasSubstr("999.5")));
}

TEST_F(ReportTest, PaperFiguresWithoutARunFoldIntoOneLinePerTable) {
  const Report report = Build();
  const Table& lstm = TableOf(report, "table1");
  EXPECT_THAT(lstm.rows, IsEmpty());
  EXPECT_EQ(lstm.not_measured,
            "Not measured here: "
            "Nimble (paper: 1 layer: 47.8 µs/token on intel, 93.0 µs/token on nvidia, 182.2 "
            "µs/token on arm; 2 layers: 97.2 µs/token on intel, 150.9 µs/token on nvidia, 686.4 "
            "µs/token on arm), "
            "PyTorch (paper: 1 layer: 1.66x on intel, 1.19x on nvidia, 9.49x on arm; 2 layers: "
            "1.63x on intel, 1.42x on nvidia, 4.92x on arm), "
            "MXNet (paper: 1 layer: 4.45x on intel, 1.46x on nvidia, 20.28x on arm; 2 layers: "
            "4.13x on intel, 1.48x on nvidia, 11.32x on arm), "
            "TensorFlow (paper: 1 layer: 6.31x on intel, 3.28x on nvidia, 5.37x on arm; 2 layers: "
            "7.07x on intel, 2.70x on nvidia, 3.19x on arm).");
  const Table& treelstm = TableOf(report, "table2");
  EXPECT_EQ(treelstm.not_measured,
            "Not measured here: Nimble (paper: 40.3 µs/token on intel, 86.3 µs/token on arm), "
            "PyTorch (paper: 17.41x on intel, 19.90x on arm), TF Fold (paper: 5.21x on intel). "
            "TF Fold itself is archived and needs TensorFlow 1.x on Python <= 3.6: TensorFlow's "
            "while_loop Tree-LSTM, its successor, is compared with its figure.");
  const Table& bert = TableOf(report, "table3");
  EXPECT_THAT(bert.not_measured, HasSubstr("PyTorch (paper: 1.56x on intel, 2.32x on nvidia"));
  EXPECT_THAT(bert.not_measured, HasSubstr("MXNet (paper: 1.48x on intel"));
  EXPECT_THAT(bert.not_measured, HasSubstr("TensorFlow (paper: 2.50x on intel"));
  EXPECT_THAT(report.sources, IsEmpty());
}

TEST_F(ReportTest, TableFourGivesMillisecondsAtTheRunsLength) {
  const int64_t run =
      Record(RunInfoOf("bert", R"({"hidden_size":768,"layers":12,"heads":12,"ffn_size":3072,)"
                               R"("static_seq_len":128})"),
             {{"us_per_token", 180, "us"},
              {"fixed_len_static_us_per_token", 150, "us"},
              {"fixed_len_dynamic_us_per_token", 190, "us"},
              {"fixed_len_dynamic_kernel_us_per_token", 164.5, "us"},
              {"fixed_len_dynamic_other_us_per_token", 25.5, "us"},
              {"fixed_len_dynamic_over_static", 1.0234, "ratio"}});
  Record(RunInfoOf("bert", kBertBase), 200);  // no static length: not in Table 4
  const Report report = Build();
  const Table& table = TableOf(report, "table4");
  ASSERT_THAT(table.rows, SizeIs(1));
  const std::vector<Cell>* row = RowOfRun(table, run);
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(At(table, *row, "Target").text, "intel");
  EXPECT_EQ(At(table, *row, "L").text, "128");
  EXPECT_EQ(At(table, *row, "Static (ms)").text, "19.20");
  EXPECT_THAT(At(table, *row, "Static (ms)").value, Optional(DoubleNear(150.0 * 128 / 1000, 1e-9)));
  EXPECT_EQ(At(table, *row, "Dynamic (ms)").text, "24.32");
  EXPECT_EQ(At(table, *row, "Kernels (ms)").text, "21.06");
  EXPECT_EQ(At(table, *row, "Others (ms)").text, "3.26");
  EXPECT_THAT(At(table, *row, "Others (ms)").value, Optional(DoubleNear(3.264, 1e-9)));
  EXPECT_EQ(At(table, *row, "Dynamic / static").text, "1.023");
  EXPECT_EQ(At(table, *row, "95% interval, runs").text, "1 run: no interval");
  EXPECT_EQ(At(table, *row, "Paper's dynamic / static").text, "1.255");  // 24.32 / 19.38
  EXPECT_EQ(At(table, *row, "Verdict").text, "inconclusive: 5 more runs needed");
  EXPECT_EQ(At(table, *row, "Paper: static / dynamic / kernels / others").text,
            "19.38 / 24.32 / 21.06 / 3.26");
  EXPECT_THAT(At(table, *row, "Runs").runs, ElementsAre(run));
  // The other targets fold into one line.
  EXPECT_EQ(table.not_measured,
            "Not measured here (the paper's BERT-base at L = 128, static / dynamic / kernels / "
            "others in ms): arm 223.50 / 237.41 / 228.59 / 8.82 (dynamic / static 1.062), nvidia "
            "5.58 / 5.86 / 5.60 / 0.26 (dynamic / static 1.050).");
  // In Table 3 it is a row apart from the plain run's.
  const Table& table3 = TableOf(report, "table3");
  const std::vector<Cell>* in_table3 = RowOfRun(table3, run);
  ASSERT_NE(in_table3, nullptr);
  EXPECT_EQ(At(table3, *in_table3, "System").text, "Nimble (with static L=128)");
}

TEST_F(ReportTest, TableFourTakesTheMedianRatioOverRunsAndJudgesIt) {
  const std::string bert_128 =
      R"({"hidden_size":768,"layers":12,"heads":12,"ffn_size":3072,"static_seq_len":128})";
  for (const double ratio : {1.10, 1.04, 1.08, 1.06, 1.12, 1.07}) {
    Record(RunInfoOf("bert", bert_128), {{"fixed_len_static_us_per_token", 150, "us"},
                                         {"fixed_len_dynamic_us_per_token", 150 * ratio, "us"},
                                         {"fixed_len_dynamic_over_static", ratio, "ratio"}});
  }
  const Report report = Build();
  const Table& table = TableOf(report, "table4");
  ASSERT_THAT(table.rows, SizeIs(1));
  EXPECT_EQ(At(table, table.rows[0], "Dynamic / static").text, "1.075");
  EXPECT_EQ(At(table, table.rows[0], "95% interval, runs").text, "1.040–1.120, 6 runs");
  EXPECT_EQ(At(table, table.rows[0], "Verdict").text, "holds");  // slower, as in the paper
  EXPECT_EQ(At(table, table.rows[0], "Static (ms)").text, "19.20");
  ASSERT_THAT(table.chart, SizeIs(2));
  EXPECT_DOUBLE_EQ(table.chart[0].value, 1.075);
  EXPECT_THAT(table.chart[0].high, Optional(1.12));
  EXPECT_TRUE(table.chart[1].paper);
}

TEST_F(ReportTest, TableFourShowsAnUnrecordedFigureAsAGap) {
  const int64_t run =
      Record(RunInfoOf("bert", R"({"hidden_size":64,"layers":2,"heads":2,"static_seq_len":32})"),
             {{"fixed_len_dynamic_us_per_token", 100, "us"}});
  const Report report = Build();
  const Table& table = TableOf(report, "table4");
  const std::vector<Cell>* row = RowOfRun(table, run);
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(At(table, *row, "Dynamic (ms)").text, "3.20");
  EXPECT_TRUE(At(table, *row, "Static (ms)").gap);
  EXPECT_EQ(At(table, *row, "Static (ms)").text, "not recorded");
  EXPECT_EQ(At(table, *row, "Dynamic / static").text, "not recorded");
  EXPECT_EQ(At(table, *row, "Paper: static / dynamic / kernels / others").text, "");
  EXPECT_EQ(At(table, *row, "Verdict").text, "");
  EXPECT_THAT(table.not_measured, HasSubstr("intel 19.38 / 24.32"));  // L = 32 is not the paper's
}

TEST_F(ReportTest, TableFourShowsAnEmulatedRunAsGaps) {
  bench::RunInfo info =
      RunInfoOf("bert", R"({"hidden_size":768,"layers":12,"heads":12,"ffn_size":3072,)"
                        R"("static_seq_len":128})");
  info.target = "arm";
  info.arch = "aarch64";
  info.emulated = true;
  info.emulator = "qemu-aarch64";
  const int64_t run = Record(info, {{"fixed_len_static_us_per_token", 777.5, "us"},
                                    {"fixed_len_dynamic_us_per_token", 888.5, "us"}});
  const Report report = Build();
  const Table& table = TableOf(report, "table4");
  const std::vector<Cell>* row = RowOfRun(table, run);
  ASSERT_NE(row, nullptr);
  for (const std::string column :
       {"Static (ms)", "Dynamic (ms)", "Kernels (ms)", "Others (ms)", "Dynamic / static"}) {
    EXPECT_TRUE(At(table, *row, column).gap) << column;
    EXPECT_EQ(At(table, *row, column).text, "emulated") << column;
    EXPECT_FALSE(At(table, *row, column).value.has_value()) << column;
  }
  EXPECT_THAT(RenderMarkdown(report), Not(HasSubstr("99.52")));   // 777.5 * 128 / 1000
  EXPECT_THAT(RenderMarkdown(report), Not(HasSubstr("113.73")));  // 888.5 * 128 / 1000
}

TEST_F(ReportTest, TheMemoryTableSaysHowManyFewerAllocations) {
  const int64_t lstm = Record(RunInfoOf("lstm", kLstmAtPaperSizes),
                              {{"allocations_written_planned", 12, "count"},
                               {"allocations_written_unplanned", 20, "count"},
                               {"alloc_storage_per_sentence_planned", 30, "count"},
                               {"alloc_storage_per_sentence_unplanned", 40, "count"},
                               {"peak_bytes_planned", 2 * 1024 * 1024, "bytes"},
                               {"peak_bytes_unplanned", 3 * 1024 * 1024, "bytes"}});
  const int64_t bert = Record(RunInfoOf("bert", kBertBase),
                              {{"alloc_storage_per_sentence_planned", 53, "count"},
                               {"alloc_storage_per_sentence_unplanned", 100, "count"}});
  bench::RunInfo peer = PyTorch("eager");
  const int64_t pytorch = Record(peer, {{"alloc_storage_per_sentence_planned", 1, "count"},
                                        {"alloc_storage_per_sentence_unplanned", 2, "count"}});
  const int64_t timing_only = Record(RunInfoOf("treelstm", R"({"input_size":300})"), 40);
  const int64_t unfused =
      Record(RunInfoOf("lstm", R"({"input_size":300,"hidden_size":512,"layers":1,"fusion":false})"),
             {{"alloc_storage_per_sentence_planned", 50, "count"},
              {"alloc_storage_per_sentence_unplanned", 60, "count"}});
  const Report report = Build();
  const Table& table = TableOf(report, "memory");
  EXPECT_THAT(table.rows, SizeIs(3));
  ASSERT_NE(RowOfRun(table, unfused), nullptr);
  EXPECT_EQ(At(table, *RowOfRun(table, unfused), "Model").text, "lstm (no fusion)");
  EXPECT_EQ(RowOfRun(table, pytorch), nullptr);
  EXPECT_EQ(RowOfRun(table, timing_only), nullptr);

  const std::vector<Cell>* row = RowOfRun(table, lstm);
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(At(table, *row, "Model").text, "lstm");
  EXPECT_EQ(At(table, *row, "Written: planned / unplanned").text, "12 / 20");
  EXPECT_EQ(At(table, *row, "Executed per sentence: planned").text, "30.0");
  EXPECT_THAT(At(table, *row, "Executed per sentence: planned").run, Optional(lstm));
  EXPECT_EQ(At(table, *row, "unplanned", 1).text, "40.0");
  EXPECT_EQ(At(table, *row, "Fewer").text, "25%");
  EXPECT_EQ(At(table, *row, "Peak MB: planned").text, "2.00");
  EXPECT_EQ(At(table, *row, "unplanned", 2).text, "3.00");
  EXPECT_EQ(At(table, *row, "Weights MB").text, "not recorded");
  EXPECT_TRUE(At(table, *row, "Weights MB").gap);

  row = RowOfRun(table, bert);
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(At(table, *row, "Fewer").text, "47% (paper 47%)");
  EXPECT_EQ(At(table, *row, "Written: planned / unplanned").text, "not recorded");
}

TEST_F(ReportTest, ACountedRunIsInTheInstructionTableOnly) {
  const std::string counted =
      R"({"input_size":300,"hidden_size":512,"layers":1,"counted_by":"callgrind"})";
  const int64_t run =
      Record(RunInfoOf("lstm", counted), {{"sentences", 8, "count"},
                                          {"tokens", 160, "count"},
                                          {"cpu_instructions", 3200000, "count"},
                                          {"cpu_instructions_per_token", 20000, "count"}});
  const int64_t timed = Record(RunInfoOf("lstm", kLstmAtPaperSizes), 52.0);
  const Report report = Build();
  const Table& table = TableOf(report, "instructions");
  ASSERT_THAT(table.rows, SizeIs(1));
  const std::vector<Cell>* row = RowOfRun(table, run);
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(At(table, *row, "Model").text, "lstm");
  EXPECT_EQ(At(table, *row, "Sentences").text, "8");
  EXPECT_EQ(At(table, *row, "Instructions").text, "3200000");
  EXPECT_THAT(At(table, *row, "Instructions").run, Optional(run));
  EXPECT_EQ(At(table, *row, "Per token").text, "20000");
  // Table 1 shows the timed run, and no gap for the counted one.
  const Table& table1 = TableOf(report, "table1");
  EXPECT_NE(RowOfRun(table1, timed), nullptr);
  EXPECT_EQ(RowOfRun(table1, run), nullptr);
}

TEST_F(ReportTest, TheOnnxTableComparesAnImportWithTheNativeBuilder) {
  bench::RunInfo bounded =
      RunInfoOf("onnx", R"({"onnx":"/tmp/x/bert_base.onnx","dim_bounds":{"sequence":512}})");
  const int64_t against = Record(bounded, {{"us_per_token", 1600, "us"},
                                           {"against_native_onnx_us_per_token", 1611.74, "us"},
                                           {"against_native_native_us_per_token", 1635.66, "us"},
                                           {"onnx_over_native", 0.9814, "ratio"}});
  const int64_t alone = Record(RunInfoOf("onnx", R"({"onnx":"lstm.onnx"})"), 60.0);
  Record(RunInfoOf("bert", kBertBase), 200);  // not imported: not in the table
  const Report report = Build();
  const Table& table = TableOf(report, "onnx");
  ASSERT_THAT(table.rows, SizeIs(2));
  const std::vector<Cell>* row = RowOfRun(table, against);
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(At(table, *row, "Model file").text, "bert_base.onnx");
  EXPECT_EQ(At(table, *row, "Bounds").text, "sequence <= 512");
  EXPECT_EQ(At(table, *row, "ONNX µs/token").text, "1611.7");
  EXPECT_EQ(At(table, *row, "Native µs/token").text, "1635.7");
  EXPECT_EQ(At(table, *row, "ONNX / native").text, "0.981");
  EXPECT_THAT(At(table, *row, "ONNX / native").value, Optional(0.9814));
  EXPECT_EQ(At(table, *row, "95% interval, runs").text, "1 run: no interval");
  EXPECT_THAT(At(table, *row, "Runs").runs, ElementsAre(against));
  const std::vector<Cell>* other = RowOfRun(table, alone);
  ASSERT_NE(other, nullptr);
  EXPECT_EQ(At(table, *other, "Bounds").text, "none");
  EXPECT_TRUE(At(table, *other, "ONNX / native").gap);
  EXPECT_EQ(At(table, *other, "ONNX / native").text, "not measured (--against-native)");
  EXPECT_EQ(At(table, *other, "95% interval, runs").text, "");
}

TEST_F(ReportTest, FigureThreeHasNoRowsAndSaysSo) {
  Record(RunInfoOf("lstm", kLstmAtPaperSizes), 52.0);
  const Report report = Build();
  const Table& table = TableOf(report, "figure3");
  EXPECT_THAT(table.rows, IsEmpty());
  EXPECT_THAT(table.chart, IsEmpty());
  EXPECT_THAT(table.caption, HasSubstr("No data yet"));
}

TEST_F(ReportTest, FigureThreeShowsADispatchMicrobenchmarkPerShape) {
  bench::RunInfo info = RunInfoOf(
      "dispatch", R"({"shapes":[[768,768],[768,3072]],"lengths":[121,128],"degrees":[8,1]})");
  info.kind = "microbench";
  info.threads = 2;
  const int64_t run = Record(info, {{"dense_768x768.static_us", 1100, "us"},
                                    {"dense_768x768.dispatch8_us", 1111, "us"},
                                    {"dense_768x768.dispatch8_relative", 1.01, "ratio"},
                                    {"dense_768x768.dispatch8_worst_relative", 1.04, "ratio"},
                                    {"dense_768x768.dispatch1_relative", 1.25, "ratio"},
                                    {"dense_768x3072.static_us", 4600, "us"}});
  // A model run is no row of Figure 3.
  Record(RunInfoOf("lstm", kLstmAtPaperSizes), 52.0);
  RunFilter filter;
  filter.kinds = {"run", "microbench"};
  const Report report = BuildReport(SelectRuns(*db_, filter), db_->path(), "all");
  const Table& table = TableOf(report, "figure3");
  // A row per dispatch/k measured, and one saying the second shape has none.
  ASSERT_THAT(table.rows, SizeIs(3));
  const std::vector<Cell>& full = table.rows[0];
  EXPECT_EQ(At(table, full, "Shape").text, "dense_768x768");
  EXPECT_EQ(At(table, full, "Kernels").text, "dispatch/8");
  EXPECT_EQ(At(table, full, "Threads").text, "2");
  EXPECT_EQ(At(table, full, "Static (µs)").text, "1100.0");
  EXPECT_EQ(At(table, full, "× static").text, "1.010");
  EXPECT_THAT(At(table, full, "× static").value, Optional(DoubleNear(1.01, 1e-12)));
  EXPECT_EQ(At(table, full, "Worst length").text, "1.04");
  EXPECT_EQ(At(table, full, "Paper").text, "≈ 1 (as fast as static)");
  EXPECT_EQ(At(table, full, "Verdict").text, "inconclusive: 5 more runs needed");
  EXPECT_THAT(At(table, full, "Runs").runs, ElementsAre(run));
  const std::vector<Cell>& none = table.rows[1];
  EXPECT_EQ(At(table, none, "Kernels").text, "dispatch/1");
  EXPECT_EQ(At(table, none, "× static").text, "1.250");
  EXPECT_EQ(At(table, none, "Paper").text, "> 1 (up to 1.42–2.04)");
  EXPECT_TRUE(At(table, none, "Worst length").gap);
  // The second shape recorded only its static time.
  EXPECT_EQ(At(table, table.rows[2], "Shape").text, "dense_768x3072");
  EXPECT_EQ(At(table, table.rows[2], "Static (µs)").text, "4600.0");
  EXPECT_TRUE(At(table, table.rows[2], "Kernels").gap);
  ASSERT_THAT(table.chart, SizeIs(2));
  EXPECT_EQ(table.chart[0].label, "dispatch/8");
  EXPECT_EQ(table.chart[1].label, "dispatch/1");
  EXPECT_THAT(table.caption, Not(HasSubstr("No data yet")));
  // Without the microbenchmark kind selected, the figure is empty again.
  EXPECT_THAT(TableOf(Build(), "figure3").rows, IsEmpty());
}

TEST_F(ReportTest, FigureThreeJudgesFullDispatchAsNearlyStaticAndFewerKernelsAsSlower) {
  bench::RunInfo info = RunInfoOf("dispatch", R"({"shapes":[[768,768]],"degrees":[8,1]})");
  info.kind = "microbench";
  for (const double jitter : {0.0, 0.01, -0.01, 0.005, -0.005, 0.002}) {
    Record(info, {{"dense_768x768.static_us", 1100, "us"},
                  {"dense_768x768.dispatch8_relative", 1.0 + jitter, "ratio"},
                  {"dense_768x768.dispatch1_relative", 1.3 + jitter, "ratio"}});
  }
  RunFilter filter;
  filter.kinds = {"microbench"};
  const Report report = BuildReport(SelectRuns(*db_, filter), db_->path(), "all");
  const Table& table = TableOf(report, "figure3");
  ASSERT_THAT(table.rows, SizeIs(2));
  EXPECT_EQ(At(table, table.rows[0], "95% interval, runs").text, "0.990–1.010, 6 runs");
  EXPECT_EQ(At(table, table.rows[0], "Verdict").text, "holds");
  EXPECT_EQ(At(table, table.rows[1], "Verdict").text, "holds");
}

// Runs of every kind the tables show, and one no table shows.
class ReportSourcesTest : public ReportTest {
 protected:
  void SetUp() override {
    ReportTest::SetUp();
    nimble_ = Record(RunInfoOf("lstm", kLstmAtPaperSizes),
                     {{"us_per_token", 52.0, "us"},
                      {"alloc_storage_per_sentence_planned", 30, "count"},
                      {"alloc_storage_per_sentence_unplanned", 40, "count"}});
    pytorch_ = Record(PyTorch("mv_script"), 104.0);
    bench::RunInfo emulated = RunInfoOf("treelstm", R"({"input_size":300,"hidden_size":150})");
    emulated.target = "arm";
    emulated.arch = "aarch64";
    emulated.emulated = true;
    emulated.emulator = "qemu-aarch64";
    emulated_ = Record(emulated, 500);
    bench::RunInfo bert = RunInfoOf("bert", R"({"hidden_size":768,"static_seq_len":128})");
    bert.host = "rack|7";
    bert_ =
        Record(bert, {{"us_per_token", 300, "us"}, {"fixed_len_static_us_per_token", 150, "us"}});
    uncited_ = Record(RunInfoOf("resnet", "{}"), 10);
  }

  int64_t nimble_ = 0, pytorch_ = 0, emulated_ = 0, bert_ = 0, uncited_ = 0;
};

TEST_F(ReportSourcesTest, SourcesAreExactlyTheRunsTheCellsCite) {
  const Report report = Build();
  std::set<int64_t> cited;
  for (const Table& table : report.tables) {
    for (const std::vector<Cell>& row : table.rows) {
      EXPECT_EQ(row.size(), table.header.size()) << table.id;
      for (const Cell& cell : row) {
        if (cell.run) cited.insert(*cell.run);
        cited.insert(cell.runs.begin(), cell.runs.end());
      }
    }
  }
  std::set<int64_t> listed;
  for (const Provenance& source : report.sources) listed.insert(source.run_id);
  EXPECT_EQ(listed.size(), report.sources.size());  // each run once
  EXPECT_EQ(listed, cited);
  EXPECT_EQ(listed, (std::set<int64_t>{nimble_, pytorch_, emulated_, bert_}));
  EXPECT_FALSE(listed.contains(uncited_));
}

TEST_F(ReportSourcesTest, SourcesCarryTheRunsProvenance) {
  const std::vector<SelectedRun> runs = SelectRuns(*db_, {});
  const Report report = BuildReport(runs, db_->path(), "all finished runs");
  for (const Provenance& source : report.sources) {
    const SelectedRun* run = nullptr;
    for (const SelectedRun& candidate : runs) {
      if (candidate.id == source.run_id) run = &candidate;
    }
    ASSERT_NE(run, nullptr) << source.run_id;
    EXPECT_EQ(source.commit, "abc1234");
    EXPECT_EQ(source.host, run->record.info.host);
    EXPECT_EQ(source.cpu_model, "Xeon Platinum 8259CL");
    EXPECT_EQ(source.date, run->finished_at);
    EXPECT_THAT(source.date, Not(IsEmpty()));
  }
}

TEST_F(ReportSourcesTest, MarkdownHasATablePerSectionWithItsHeaderRow) {
  const Report report = Build();
  const std::string markdown = RenderMarkdown(report);
  for (const Table& table : report.tables) {
    EXPECT_THAT(markdown, HasSubstr("<a id=\"" + table.id + "\"></a>\n\n## " + table.title + "\n"));
    if (table.header.empty()) continue;
    if (table.rows.empty()) {
      EXPECT_THAT(markdown, HasSubstr("## " + table.title + "\n\n" + table.caption +
                                      "\n\n*No runs in the selection.*\n"))
          << table.id;
      continue;
    }
    std::string header = "|";
    std::string rule = "|";
    for (const std::string& column : table.header) {
      header += " " + column + " |";
      rule += " --- |";
    }
    EXPECT_THAT(markdown, HasSubstr(header + "\n" + rule + "\n")) << table.id;
  }
  EXPECT_EQ(Count(markdown, "\n## "), report.tables.size() + 1);  // and the sources
  EXPECT_THAT(markdown, HasSubstr("## Figure 3: symbolic codegen, dispatch/k\n\nLatency of "));
  EXPECT_THAT(markdown, HasSubstr("No data yet: results.db holds no run of `nimble-bench "
                                  "microbench dispatch`."));
}

TEST_F(ReportSourcesTest, MarkdownItalicisesGapsAndLinksRuns) {
  const std::string markdown = RenderMarkdown(Build());
  EXPECT_THAT(markdown, HasSubstr("| *emulated (qemu-aarch64): correctness only* |"));
  EXPECT_THAT(markdown,
              HasSubstr("| 52.0 | 1 run: no interval | 47.8 (1.09x) |  |  |  |  | [run " +
                        std::to_string(nimble_) + "](#run-" + std::to_string(nimble_) + ") |\n"));
  EXPECT_THAT(markdown,
              HasSubstr("| 104.0 | 1 run: no interval | 79.3 (1.31x) | 2.00x | 1 round: "
                        "no interval | 1.66x | inconclusive: 5 more rounds needed | [run "));
}

TEST_F(ReportSourcesTest, MarkdownGivesTheFoldedLineAfterItsTable) {
  const Report report = Build();
  const std::string markdown = RenderMarkdown(report);
  const Table& table1 = TableOf(report, "table1");
  ASSERT_THAT(table1.not_measured, testing::StartsWith("Not measured here: Nimble (paper: "));
  const size_t line = markdown.find("\n" + table1.not_measured + "\n");
  ASSERT_NE(line, std::string::npos);
  EXPECT_GT(line, markdown.find("| PyTorch (mv_script) |"));
  EXPECT_LT(line, markdown.find("## Table 2"));
  // Table 2 (its one run emulated) has its line too.
  EXPECT_THAT(markdown, HasSubstr(TableOf(report, "table2").not_measured));
}

TEST_F(ReportSourcesTest, MarkdownEscapesAPipeInAHostName) {
  const std::string markdown = RenderMarkdown(Build());
  EXPECT_THAT(markdown, HasSubstr("| rack\\|7 |"));
  // The Hosts line names each host once with its CPU.
  const size_t hosts = markdown.find("\nHosts: ");
  ASSERT_NE(hosts, std::string::npos);
  const std::string line = markdown.substr(hosts + 1, markdown.find('\n', hosts + 1) - hosts - 1);
  EXPECT_EQ(Count(line, "rack|7 (Xeon Platinum 8259CL)"), 1u);
  EXPECT_EQ(Count(line, "box-1 (Xeon Platinum 8259CL)"), 1u);
  EXPECT_THAT(markdown, Not(HasSubstr("| rack|7")));
}

TEST_F(ReportSourcesTest, MarkdownListsTheSourcesAsAnchors) {
  const std::vector<SelectedRun> runs = SelectRuns(*db_, {});
  const std::string markdown = RenderMarkdown(BuildReport(runs, db_->path(), "all finished runs"));
  const std::string sources = markdown.substr(markdown.find("## Sources"));
  for (const SelectedRun& run : runs) {
    const std::string id = std::to_string(run.id);
    if (run.id == uncited_) {
      EXPECT_THAT(sources, Not(HasSubstr("id=\"run-" + id + "\""))) << id;
      continue;
    }
    EXPECT_THAT(sources, HasSubstr("- <a id=\"run-" + id + "\"></a>run " + id +
                                   ": commit abc1234, " + run.record.info.host +
                                   " (Xeon Platinum 8259CL), " + run.finished_at + "\n"));
  }
  EXPECT_EQ(Count(sources, "<a id=\"run-"), 4u);
}

TEST_F(ReportTest, MarkdownOfAnEmptySelectionSaysSo) {
  const std::string markdown = RenderMarkdown(Build());
  EXPECT_THAT(markdown, HasSubstr("`" + db_->path() + "` (all finished runs)"));
  EXPECT_THAT(markdown, HasSubstr("## Memory planning: allocations and peak memory"));
  EXPECT_THAT(markdown, HasSubstr("*No runs in the selection.*"));
  EXPECT_THAT(markdown, HasSubstr("## Sources\n\nNo runs in the selection.\n"));
}

}  // namespace
}  // namespace nimble::reports
