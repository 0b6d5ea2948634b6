// ReadMrpc on the real test split and on malformed files.
#include "harness/datasets/mrpc.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/harness/datasets/dataset_test_util.h"

namespace nimble::datasets {
namespace {

using testing::ErrorOf;
using ::testing::HasSubstr;
using testing::ScratchDirectory;
using testing::WriteFile;

const std::string kHeader = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n";

TEST(Mrpc, RealTestSplit) {
  SKIP_WITHOUT_SHARED_DATA();
  std::vector<MrpcPair> pairs = ReadMrpc(testing::SharedData("mrpc/msr_paraphrase_test.txt"));
  ASSERT_EQ(pairs.size(), 1725u);
  EXPECT_EQ(pairs[0].quality, 1);
  EXPECT_EQ(pairs[0].id1, "1089874");
  EXPECT_EQ(pairs[0].id2, "1089925");
  EXPECT_THAT(pairs[0].sentence1, ::testing::StartsWith("PCCW's chief operating officer"));
  EXPECT_EQ(pairs.back().sentence2.back(), '.');
  EXPECT_EQ(std::count_if(pairs.begin(), pairs.end(), [](const MrpcPair& p) { return p.quality; }),
            1147);
}

TEST(Mrpc, AcceptsByteOrderMarkAndCrLf) {
  std::string dir = ScratchDirectory();
  std::string path = WriteFile(dir, "a.tsv",
                               "\xEF\xBB\xBF"
                               "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\r\n"
                               "0\t1\t2\tCaf\xC3\xA9 \"quoted\".\tSecond one.\r\n");
  std::vector<MrpcPair> pairs = ReadMrpc(path);
  ASSERT_EQ(pairs.size(), 1u);
  EXPECT_EQ(pairs[0].quality, 0);
  EXPECT_EQ(pairs[0].sentence1, "Caf\xC3\xA9 \"quoted\".");
  EXPECT_EQ(pairs[0].sentence2, "Second one.");
}

TEST(Mrpc, MalformedLinesNameFileAndLine) {
  std::string dir = ScratchDirectory();
  const auto error_for = [&](const std::string& content) {
    std::string path = WriteFile(dir, "bad.tsv", content);
    return ErrorOf([&] { ReadMrpc(path); });
  };
  const std::string good = "1\t1\t2\tA.\tB.\n";
  EXPECT_THAT(error_for("Quality\tID\n" + good), HasSubstr("bad.tsv:1: expected the MRPC header"));
  EXPECT_THAT(error_for(""), HasSubstr("bad.tsv:1: expected the MRPC header"));
  EXPECT_THAT(error_for(kHeader + good + "1\t1\t2\tonly four\n"),
              HasSubstr("bad.tsv:3: expected 5 tab-separated fields, found 4"));
  EXPECT_THAT(error_for(kHeader + good + "\n" + good),
              HasSubstr("bad.tsv:3: expected 5 tab-separated fields, found 1"));
  EXPECT_THAT(error_for(kHeader + "2\t1\t2\tA.\tB.\n"),
              HasSubstr("bad.tsv:2: quality must be 0 or 1, not \"2\""));
  EXPECT_THAT(error_for(kHeader + "1\t1\t2\t\tB.\n"), HasSubstr("bad.tsv:2: empty sentence #1"));
  EXPECT_THAT(error_for(kHeader + good + good + "1\t1\t2\tA\xC3(.\tB.\n"),
              HasSubstr("bad.tsv:4: invalid UTF-8 at byte 8"));
  EXPECT_THAT(ErrorOf([&] { ReadMrpc(dir + "/missing.tsv"); }),
              HasSubstr("cannot open " + dir + "/missing.tsv"));
}

}  // namespace
}  // namespace nimble::datasets
