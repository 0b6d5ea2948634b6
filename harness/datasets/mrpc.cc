// ReadMrpc: the MRPC TSV, checked field by field so that a malformed line is
// reported with its file and line instead of yielding a half-read pair.
#include "harness/datasets/mrpc.h"

#include "harness/datasets/text.h"

namespace nimble::datasets {

namespace {

constexpr std::string_view kHeader = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String";
constexpr size_t kFields = 5;

}  // namespace

std::vector<MrpcPair> ReadMrpc(const std::string& path) {
  std::vector<std::string> lines = text::ReadLines(path);
  if (lines.empty() || lines[0] != kHeader) {
    text::Fail(text::Location(path, 1),
               "expected the MRPC header \"Quality\\t#1 ID\\t#2 "
               "ID\\t#1 String\\t#2 String\"");
  }
  std::vector<MrpcPair> pairs;
  pairs.reserve(lines.size() - 1);
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::string where = text::Location(path, i + 1);
    if (std::optional<size_t> offset = text::FindInvalidUtf8(lines[i])) {
      text::Fail(where, "invalid UTF-8 at byte " + std::to_string(*offset + 1));
    }
    std::vector<std::string_view> fields = text::Split(lines[i], '\t');
    if (fields.size() != kFields) {
      text::Fail(where, "expected 5 tab-separated fields, found " + std::to_string(fields.size()));
    }
    MrpcPair pair;
    if (fields[0] == "0" || fields[0] == "1") {
      pair.quality = fields[0][0] - '0';
    } else {
      text::Fail(where, "quality must be 0 or 1, not \"" + std::string(fields[0]) + "\"");
    }
    pair.id1 = fields[1];
    pair.id2 = fields[2];
    pair.sentence1 = fields[3];
    pair.sentence2 = fields[4];
    if (pair.sentence1.empty() || pair.sentence2.empty()) {
      text::Fail(where, std::string("empty sentence ") + (pair.sentence1.empty() ? "#1" : "#2"));
    }
    pairs.push_back(std::move(pair));
  }
  return pairs;
}

}  // namespace nimble::datasets
