// The synthetic MRPC and SST files: read back by the real loaders, shaped like
// the real files (the figures of docs/datasets.md), byte-identical per seed.
#include "harness/datasets/synthetic.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "harness/datasets/mrpc.h"
#include "harness/datasets/sst.h"
#include "harness/datasets/wordpiece.h"
#include "tests/harness/datasets/dataset_test_util.h"

namespace nimble::datasets {
namespace {

using testing::ReadFile;
using testing::ScratchDirectory;

TEST(Synthetic, MrpcFollowsTheRealLengthDistribution) {
  const std::string dir = ScratchDirectory();
  SyntheticMrpcFiles files = WriteSyntheticMrpc(dir + "/mrpc", 1725, 1);
  std::vector<MrpcPair> pairs = ReadMrpc(files.pairs);
  ASSERT_EQ(pairs.size(), 1725u);
  WordPieceTokenizer tokenizer = WordPieceTokenizer::FromVocabFile(files.vocab);
  // BERT-base's embedding table and BERT's special ids.
  EXPECT_EQ(tokenizer.vocab_size(), 30522u);
  EXPECT_EQ(tokenizer.IdOf("[PAD]"), 0);
  EXPECT_EQ(tokenizer.IdOf("[UNK]"), 100);
  EXPECT_EQ(tokenizer.IdOf("[CLS]"), 101);
  EXPECT_EQ(tokenizer.IdOf("[SEP]"), 102);
  EXPECT_EQ(tokenizer.IdOf("[MASK]"), 103);
  std::vector<int> pair_lengths;
  std::vector<int> basic_tokens;
  int paraphrases = 0;
  for (const MrpcPair& pair : pairs) {
    paraphrases += pair.quality;
    pair_lengths.push_back(
        static_cast<int>(tokenizer.EncodePair(pair.sentence1, pair.sentence2).ids.size()));
    for (const std::string& sentence : {pair.sentence1, pair.sentence2}) {
      std::vector<std::string> pieces = tokenizer.Tokenize(sentence);
      EXPECT_THAT(pieces, ::testing::Not(::testing::Contains("[UNK]"))) << sentence;
      basic_tokens.push_back(static_cast<int>(BasicTokenize(sentence).size()));
    }
  }
  // Real: mean 52.98, min 19, p50 53, p95 74, max 104.
  testing::Summary lengths = testing::Summarize(pair_lengths);
  EXPECT_NEAR(lengths.mean, 52.98, 1.0);
  EXPECT_GE(lengths.min, 19);
  EXPECT_NEAR(lengths.p50, 53, 2);
  EXPECT_NEAR(lengths.p95, 74, 2);
  EXPECT_LE(lengths.max, 104);
  // Real: mean 23.40, min 8, max 45; 1147 of 1725 pairs are paraphrases.
  testing::Summary words = testing::Summarize(basic_tokens);
  EXPECT_NEAR(words.mean, 23.40, 0.6);
  EXPECT_GE(words.min, 8);
  EXPECT_LE(words.max, 45);
  EXPECT_NEAR(paraphrases, 1147, 60);
}

TEST(Synthetic, SstFollowsTheRealSentenceLengths) {
  const std::string dir = ScratchDirectory();
  WriteSyntheticSst(dir, 2210, 7);
  std::vector<SstSentence> test = ReadSst(dir, SstSplit::kTest);
  ASSERT_EQ(test.size(), 2210u);
  EXPECT_EQ(ReadSst(dir, SstSplit::kTrain).size(), 221u);
  EXPECT_EQ(ReadSst(dir, SstSplit::kDev).size(), 221u);
  std::vector<int> lengths;
  for (const SstSentence& sentence : test) {
    lengths.push_back(static_cast<int>(sentence.tokens.size()));
    EXPECT_EQ(sentence.tree.left.size(), 2 * sentence.tokens.size() - 1);
  }
  // Real, all splits: mean 19.17, min 2, max 56.
  testing::Summary summary = testing::Summarize(lengths);
  EXPECT_NEAR(summary.mean, 19.17, 0.6);
  EXPECT_GE(summary.min, 2);
  EXPECT_LE(summary.max, 56);
}

TEST(Synthetic, SameSeedSameBytes) {
  const std::string dir = ScratchDirectory();
  const auto mrpc = [&](const std::string& name, uint64_t seed) {
    return ReadFile(WriteSyntheticMrpc(dir + "/" + name, 50, seed).pairs);
  };
  const auto sst = [&](const std::string& name, uint64_t seed) {
    WriteSyntheticSst(dir + "/" + name, 50, seed);
    return ReadFile(dir + "/" + name + "/STree.txt") + ReadFile(dir + "/" + name + "/SOStr.txt") +
           ReadFile(dir + "/" + name + "/datasetSplit.txt");
  };
  EXPECT_EQ(mrpc("m1", 42), mrpc("m2", 42));
  EXPECT_NE(mrpc("m1", 42), mrpc("m3", 43));
  EXPECT_EQ(ReadFile(dir + "/m1/vocab.txt"), ReadFile(dir + "/m3/vocab.txt"));
  EXPECT_EQ(sst("s1", 42), sst("s2", 42));
  EXPECT_NE(sst("s1", 42), sst("s3", 43));
  // Fixed bytes: the generators may not drift silently between builds.
  EXPECT_THAT(mrpc("m4", 1), ::testing::StartsWith("\xEF\xBB\xBFQuality\t"));
}

TEST(Synthetic, Errors) {
  EXPECT_THAT(testing::ErrorOf([] { WriteSyntheticMrpc("/proc/nimble-no", 3, 1); }),
              ::testing::HasSubstr("cannot create /proc/nimble-no"));
  EXPECT_THAT(testing::ErrorOf([] { WriteSyntheticSst(ScratchDirectory(), -1, 1); }),
              ::testing::HasSubstr("negative sentence count -1"));
}

}  // namespace
}  // namespace nimble::datasets
