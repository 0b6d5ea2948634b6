// The report page in a real browser: headless Chromium draws it (the
// screenshot must show a page, not a blank) and serialises the DOM it built
// (every measured figure must be there, in its table's section). Skipped
// where Chromium is not installed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "harness/bench/results_db.h"
#include "harness/reports/report.h"
#include "harness/reports/run_selection.h"
#include "tests/harness/reports/reports_test_util.h"

namespace nimble::reports {
namespace {

namespace fs = std::filesystem;
using test_util::GapCell;
using test_util::MeasuredCell;
using test_util::PlainCell;
using ::testing::HasSubstr;

// A stand-in for the CLI's report: the paper's kind of tables, one charted
// with measured and paper bars, gaps, and sources.
Report SampleReport() {
  Table lstm;
  lstm.id = "table1";
  lstm.title = "Table 1: LSTM, µs/token";
  lstm.caption = "Latency per token on the Intel and ARM hosts; lower is better.";
  lstm.header = {"Model", "Target", "Nimble", "PyTorch (mv_script)", "paper: Nimble"};
  lstm.rows = {{PlainCell("LSTM 1 layer"), PlainCell("intel"), MeasuredCell("47.13", 47.125, 11),
                MeasuredCell("156.8", 156.84, 12), PlainCell("47.8")},
               {PlainCell("LSTM 2 layers"), PlainCell("intel"), MeasuredCell("97.60", 97.6, 11),
                MeasuredCell("312.4", 312.41, 12), PlainCell("97.2")},
               {PlainCell("LSTM 1 layer"), PlainCell("arm"), MeasuredCell("203.9", 203.875, 13),
                GapCell("emulated"), PlainCell("182.2")}};
  lstm.chart_unit = "µs/token";
  lstm.chart = {{"LSTM 1 layer, intel", "Nimble", 47.125, false, 45.5, 49.0},
                {"LSTM 1 layer, intel", "PyTorch (mv_script)", 156.84, false, {}, {}},
                {"LSTM 1 layer, intel", "paper: Nimble", 47.8, true, {}, {}},
                {"LSTM 2 layers, intel", "Nimble", 97.6, false, {}, {}},
                {"LSTM 2 layers, intel", "PyTorch (mv_script)", 312.41, false, {}, {}},
                {"LSTM 2 layers, intel", "paper: Nimble", 97.2, true, {}, {}},
                {"LSTM 1 layer, arm", "Nimble", 203.875, false, {}, {}},
                {"LSTM 1 layer, arm", "paper: Nimble", 182.2, true, {}, {}}};
  Table memory;
  memory.id = "memory";
  memory.title = "Memory: peak resident, MiB";
  memory.caption = "Peak resident set size of one inference process.";
  memory.header = {"Model", "Nimble", "TVM graph runtime"};
  memory.rows = {{PlainCell("BERT base"), MeasuredCell("1,204.5", 1204.5, 11), GapCell("no data")},
                 {PlainCell("Tree-LSTM"), MeasuredCell("88.25", 88.25, 12), GapCell("")}};

  Report report;
  report.database = "results.db";
  report.filter = "the latest run per configuration and host";
  report.as_of = "2021-04-05T06:07:08Z";
  report.tables = {lstm, memory};
  report.sources = {
      {11, "3f2a9c1", "bench-intel-1", "Intel(R) Xeon(R) Platinum 8259CL", "2021-04-01T10:00:00Z"},
      {12, "3f2a9c1", "bench-intel-2", "Intel(R) Xeon(R) Platinum 8259CL", "2021-04-01T11:00:00Z"},
      {13, "3f2a9c1", "bench-arm-1", "Neoverse-N1", "2021-04-02T09:00:00Z"}};
  return report;
}

bool ChromiumInstalled() {
  std::istringstream path(std::getenv("PATH") ? std::getenv("PATH") : "");
  for (std::string dir; std::getline(path, dir, ':');) {
    if (!dir.empty() && access((fs::path(dir) / "chromium").c_str(), X_OK) == 0) return true;
  }
  return false;
}

std::string Quoted(const std::string& word) {
  std::string quoted = "'";
  for (const char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Runs headless Chromium on `page` with `arguments`, its stdout to `output`.
// HOME and the XDG folders point into `dir` because Chromium writes crash
// report settings and dconf files there even with its own --user-data-dir;
// `timeout` bounds a browser that hangs. Its stderr (D-Bus complaints on a
// machine without one, harmless) is shown only when it fails.
void RunChromium(const fs::path& dir, const fs::path& page, const std::string& arguments,
                 const fs::path& output) {
  const fs::path log = dir / "chromium.log";
  const std::string command =
      "HOME=" + Quoted(dir) + " XDG_CONFIG_HOME=" + Quoted(dir / "config") +
      " XDG_CACHE_HOME=" + Quoted(dir / "cache") +
      " timeout 60 chromium --headless --no-sandbox --disable-gpu --user-data-dir=" +
      Quoted(dir / "profile") + " " + arguments + " " + Quoted("file://" + page.string()) + " >" +
      Quoted(output) + " 2>" + Quoted(log);
  const int status = std::system(command.c_str());
  if (status != 0) {
    throw std::runtime_error(command + "\nexited with " + std::to_string(status) + ":\n" +
                             ReadFile(log));
  }
}

struct Image {
  uint32_t width = 0;
  uint32_t height = 0;
  std::vector<uint32_t> pixels;  // 0xRRGGBB, row by row
};

uint32_t BigEndian32(const std::string& bytes, size_t at) {
  const auto byte = [&](size_t i) { return static_cast<uint32_t>(uint8_t(bytes.at(at + i))); };
  return byte(0) << 24 | byte(1) << 16 | byte(2) << 8 | byte(3);
}

// PNG's Paeth predictor (PNG specification, 9.4).
uint8_t Paeth(int left, int up, int up_left) {
  const int estimate = left + up - up_left;
  const int to_left = std::abs(estimate - left);
  const int to_up = std::abs(estimate - up);
  const int to_up_left = std::abs(estimate - up_left);
  if (to_left <= to_up && to_left <= to_up_left) return left;
  return to_up <= to_up_left ? up : up_left;
}

// Decodes a PNG as Chromium writes screenshots: 8 bits per channel, RGB or
// RGBA (opaque: alpha is ignored), not interlaced. Anything else throws.
Image DecodePng(const std::string& png) {
  if (png.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0) throw std::runtime_error("not a PNG");
  Image image;
  int bit_depth = 0;
  int colour_type = 0;
  int interlace = 0;
  std::string compressed;
  for (size_t at = 8; at + 8 <= png.size();) {
    const uint32_t length = BigEndian32(png, at);
    const std::string type = png.substr(at + 4, 4);
    const size_t data = at + 8;
    if (data + length + 4 > png.size()) throw std::runtime_error("truncated PNG chunk " + type);
    if (type == "IHDR") {
      image.width = BigEndian32(png, data);
      image.height = BigEndian32(png, data + 4);
      bit_depth = uint8_t(png[data + 8]);
      colour_type = uint8_t(png[data + 9]);
      interlace = uint8_t(png[data + 12]);
    } else if (type == "IDAT") {
      compressed.append(png, data, length);
    } else if (type == "IEND") {
      break;
    }
    at = data + length + 4;  // past the CRC
  }
  if (bit_depth != 8 || (colour_type != 2 && colour_type != 6) || interlace != 0) {
    throw std::runtime_error("unsupported PNG: depth " + std::to_string(bit_depth) + ", colour " +
                             std::to_string(colour_type) + ", interlace " +
                             std::to_string(interlace));
  }
  const size_t channels = colour_type == 6 ? 4 : 3;
  const size_t stride = image.width * channels;
  std::vector<uint8_t> filtered(image.height * (stride + 1));
  uLongf filtered_size = filtered.size();
  if (uncompress(filtered.data(), &filtered_size, reinterpret_cast<const Bytef*>(compressed.data()),
                 compressed.size()) != Z_OK ||
      filtered_size != filtered.size()) {
    throw std::runtime_error("corrupt PNG image data");
  }

  // Each row is a filter type byte, then bytes predicted from the pixel to
  // the left, the one above and the one above-left (PNG specification, 9.2).
  std::vector<uint8_t> above(stride, 0);
  std::vector<uint8_t> row(stride);
  image.pixels.reserve(size_t(image.width) * image.height);
  for (size_t y = 0; y < image.height; ++y) {
    const uint8_t* line = &filtered[y * (stride + 1)];
    for (size_t i = 0; i < stride; ++i) {
      const int left = i >= channels ? row[i - channels] : 0;
      const int up = above[i];
      const int up_left = i >= channels ? above[i - channels] : 0;
      int prediction = 0;
      switch (line[0]) {
        case 0:
          prediction = 0;
          break;
        case 1:
          prediction = left;
          break;
        case 2:
          prediction = up;
          break;
        case 3:
          prediction = (left + up) / 2;
          break;
        case 4:
          prediction = Paeth(left, up, up_left);
          break;
        default:
          throw std::runtime_error("bad PNG filter " + std::to_string(line[0]));
      }
      row[i] = uint8_t(line[1 + i] + prediction);
    }
    for (size_t x = 0; x < stride; x += channels) {
      image.pixels.push_back(uint32_t(row[x]) << 16 | uint32_t(row[x + 1]) << 8 | row[x + 2]);
    }
    std::swap(above, row);
  }
  return image;
}

struct RenderedPage {
  Image screenshot;  // 1200x1600 CSS pixels of the top of the page
  std::string dom;   // the document Chromium built, serialised
};

// Writes `html` as `dir`/index.html and has headless Chromium draw it and
// dump its DOM. `html` may come from any renderer: the CLI's index.html too.
RenderedPage RenderPage(const std::string& html, const fs::path& dir) {
  const fs::path page = dir / "index.html";
  std::ofstream(page, std::ios::binary) << html;
  const fs::path screenshot = dir / "screenshot.png";
  RunChromium(dir, page, "--window-size=1200,1600 --screenshot=" + Quoted(screenshot),
              dir / "screenshot.log");
  RunChromium(dir, page, "--dump-dom", dir / "dom.html");
  return {DecodePng(ReadFile(screenshot)), ReadFile(dir / "dom.html")};
}

// `text` as a DOM serialiser writes a text node.
std::string SerialisedText(const std::string& text) {
  std::string serialised;
  for (const char c : text) {
    switch (c) {
      case '&':
        serialised += "&amp;";
        break;
      case '<':
        serialised += "&lt;";
        break;
      case '>':
        serialised += "&gt;";
        break;
      default:
        serialised += c;
    }
  }
  return serialised;
}

// The serialised DOM of `<section id="id">`, empty when there is none.
std::string Section(const std::string& dom, const std::string& id) {
  const size_t begin = dom.find("<section id=\"" + id + "\">");
  if (begin == std::string::npos) return "";
  return dom.substr(begin, dom.find("</section>", begin) - begin);
}

class ReportPage : public test_util::ScratchTest {
 protected:
  void SetUp() override {
    if (!ChromiumInstalled()) GTEST_SKIP() << "chromium is not installed: apt-get install chromium";
    ScratchTest::SetUp();
  }
};

// The screenshot is a drawn page: mostly white paper, a fair share of ink
// (text, rules, zebra rows, bars) in many colours (anti-aliased text, the
// chart's two kinds of bar). A blank or failed render is one colour.
TEST_F(ReportPage, ChromiumDrawsThePage) {
  const RenderedPage page = RenderPage(RenderHtml(SampleReport()), dir_);
  ASSERT_EQ(page.screenshot.width, 1200u);
  ASSERT_EQ(page.screenshot.height, 1600u);
  size_t white = 0;
  std::unordered_set<uint32_t> colours;
  for (const uint32_t pixel : page.screenshot.pixels) {
    white += pixel == 0xFFFFFF;
    colours.insert(pixel);
  }
  const double ink = 1 - double(white) / page.screenshot.pixels.size();
  EXPECT_GT(ink, 0.03) << "the page looks blank; screenshot kept in " << dir_;
  EXPECT_LT(ink, 0.5) << "the page is not on white; screenshot kept in " << dir_;
  EXPECT_GT(colours.size(), 3u) << "screenshot kept in " << dir_;
}

// Every measured figure the report shows reached the DOM Chromium built,
// inside its own table's section, and every source is a link target.
TEST_F(ReportPage, EveryMeasuredFigureIsInItsSection) {
  const Report report = SampleReport();
  const RenderedPage page = RenderPage(RenderHtml(report), dir_);
  for (const Table& table : report.tables) {
    const std::string section = Section(page.dom, table.id);
    ASSERT_FALSE(section.empty()) << "no section " << table.id << " in\n" << page.dom;
    if (!table.chart_unit.empty()) {
      EXPECT_THAT(section, HasSubstr("<svg")) << table.id;
    }
    for (const std::vector<Cell>& row : table.rows) {
      for (const Cell& cell : row) {
        if (cell.value) {
          EXPECT_THAT(section, HasSubstr(">" + SerialisedText(cell.text) + "<"));
        }
      }
    }
  }
  const std::string sources = Section(page.dom, "sources");
  for (const Provenance& source : report.sources) {
    EXPECT_THAT(sources, HasSubstr("<li id=\"run-" + std::to_string(source.run_id) + "\">"));
  }
}

// The page of a real results.db: every figure of Tables 1 and 3 that Chromium
// shows carries the database's own value, and the paper's figure sits beside
// Nimble's.
TEST_F(ReportPage, NumbersInThePageAreTheDatabases) {
  bench::ResultsDb db((dir_ / "results.db").string());
  const auto record = [&](const std::string& framework, const std::string& model,
                          const std::string& configuration, double us_per_token) {
    bench::RunInfo info;
    info.commit_id = "0123abc";
    info.host = "bench-1";
    info.cpu_model = "AMD EPYC";
    info.threads = 2;
    info.target = "intel";
    info.model = model;
    info.configuration = configuration;
    info.dataset = "synthetic";
    info.split = "test";
    info.arch = "x86_64";
    info.framework = framework;
    return db.RecordRun(info, {{"us_per_token", us_per_token, "us"},
                               {"alloc_storage_per_sentence_planned", 91.75, "count"},
                               {"alloc_storage_per_sentence_unplanned", 159.5, "count"}});
  };
  const std::string lstm = R"({"input_size":300,"hidden_size":512,"layers":1,"seed":1})";
  const std::string bert =
      R"({"vocab_size":30522,"hidden_size":768,"layers":12,"heads":12,"ffn_size":3072,"seed":1})";
  const int64_t nimble_lstm = record("nimble", "lstm", lstm, 61.4375);
  const int64_t peer_lstm =
      record("pytorch", "lstm",
             R"({"input_size":300,"hidden_size":512,"layers":1,"variant":"mv_script"})", 120.6875);
  const int64_t nimble_bert = record("nimble", "bert", bert, 1942.125);
  const Report report = BuildReport(SelectRuns(db, {}), "results.db", "all");
  const RenderedPage page = RenderPage(RenderHtml(report), dir_);
  const std::string table1 = Section(page.dom, "table1");
  const std::string table3 = Section(page.dom, "table3");
  for (const auto& [section, run] : {std::pair{table1, nimble_lstm}, std::pair{table1, peer_lstm},
                                     std::pair{table3, nimble_bert}}) {
    const bench::Measurement figure = db.Measurements(run)[2];
    ASSERT_EQ(figure.name, "us_per_token");
    char exact[32];
    char shown[32];
    std::snprintf(exact, sizeof exact, "%.17g", figure.value);
    std::snprintf(shown, sizeof shown, "%.1f", figure.value);
    EXPECT_THAT(section, HasSubstr("data-value=\"" + std::string(exact) + "\"")) << "run " << run;
    EXPECT_THAT(section, HasSubstr(">" + std::string(shown) + "<")) << "run " << run;
    EXPECT_THAT(section, HasSubstr("href=\"#run-" + std::to_string(run) + "\""));
  }
  // The paper's Nimble, LSTM 1 layer, Intel, and ours over it (61.4375 / 47.8, rounded).
  EXPECT_THAT(table1, HasSubstr(">47.8 (1.29x)<"));
  EXPECT_THAT(table1, HasSubstr(">1.96x<"));          // PyTorch / Nimble of the same round
  EXPECT_THAT(table1, HasSubstr(">1.66x<"));          // the paper's PyTorch / Nimble
  EXPECT_THAT(table3, HasSubstr(">307.0 (6.33x)<"));  // the paper's Nimble, BERT, Intel
  EXPECT_THAT(Section(page.dom, "memory"), HasSubstr(">91.8<"));
}

}  // namespace
}  // namespace nimble::reports
