// ReadSst on the real treebank and on hand-made files, ParsePtbTree and
// ReadPtbTrees, and the errors for malformed trees.
#include "harness/datasets/sst.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <iostream>

#include "tests/harness/datasets/dataset_test_util.h"

namespace nimble::datasets {
namespace {

using ::testing::ElementsAre;
using testing::ErrorOf;
using ::testing::HasSubstr;
using testing::ScratchDirectory;
using testing::WriteFile;

// The BinaryTree invariants: post-order (children before their parent, root
// last, every node but the root a child exactly once), two children or none,
// and as many leaves as tokens.
void ExpectValidTree(const SstSentence& sentence) {
  const models::BinaryTree& tree = sentence.tree;
  ASSERT_EQ(tree.left.size(), tree.right.size());
  ASSERT_EQ(tree.left.size(), 2 * sentence.tokens.size() - 1);
  std::vector<int> parents(tree.left.size(), 0);
  size_t leaves = 0;
  for (size_t node = 0; node < tree.left.size(); ++node) {
    ASSERT_EQ(tree.left[node] < 0, tree.right[node] < 0) << "node " << node;
    if (tree.left[node] < 0) {
      ++leaves;
      continue;
    }
    ASSERT_LT(tree.left[node], static_cast<int32_t>(node));
    ASSERT_LT(tree.right[node], static_cast<int32_t>(node));
    ++parents[tree.left[node]];
    ++parents[tree.right[node]];
  }
  EXPECT_EQ(leaves, sentence.tokens.size());
  for (size_t node = 0; node + 1 < parents.size(); ++node) EXPECT_EQ(parents[node], 1);
  EXPECT_EQ(parents.back(), 0);
}

// "Effective but too-tepid biopic" as in the real STree.txt: ((1 2) (3 4)),
// the right pair numbered before the left.
constexpr const char* kTree = "6|6|5|5|7|7|0\n";
constexpr const char* kTokens = "Effective|but|too-tepid|biopic\n";

std::string SstDirectory(const std::string& trees, const std::string& tokens,
                         const std::string& split) {
  std::string dir = ScratchDirectory();
  WriteFile(dir, "STree.txt", trees);
  WriteFile(dir, "SOStr.txt", tokens);
  WriteFile(dir, "datasetSplit.txt", "sentence_index,splitset_label\n" + split);
  return dir;
}

TEST(Sst, ParentPointersBecomePostOrder) {
  std::string dir = SstDirectory(std::string(kTree) + "0\n" + kTree,
                                 std::string(kTokens) + "x\n" + kTokens, "1,2\n2,1\n3,2\n");
  std::vector<SstSentence> test = ReadSst(dir, SstSplit::kTest);
  ASSERT_EQ(test.size(), 2u);
  EXPECT_THAT(test[0].tokens, ElementsAre("Effective", "but", "too-tepid", "biopic"));
  EXPECT_THAT(test[0].tree.left, ElementsAre(-1, -1, 0, -1, -1, 3, 2));
  EXPECT_THAT(test[0].tree.right, ElementsAre(-1, -1, 1, -1, -1, 4, 5));
  ExpectValidTree(test[0]);
  EXPECT_TRUE(ReadSst(dir, SstSplit::kDev).empty());
  std::vector<SstSentence> train = ReadSst(dir, SstSplit::kTrain);
  ASSERT_EQ(train.size(), 1u);  // a one-token sentence: one leaf, no parent
  EXPECT_THAT(train[0].tree.left, ElementsAre(-1));
}

TEST(Sst, RealTreebank) {
  SKIP_WITHOUT_SHARED_DATA();
  const std::string dir = testing::SharedData("sst");
  std::vector<SstSentence> test = ReadSst(dir, SstSplit::kTest);
  ASSERT_EQ(test.size(), 2210u);
  std::vector<int> lengths;
  for (const SstSentence& sentence : test) {
    ExpectValidTree(sentence);
    lengths.push_back(static_cast<int>(sentence.tokens.size()));
  }
  EXPECT_NEAR(testing::Summarize(lengths).mean, 19.19, 0.005);
  EXPECT_EQ(ReadSst(dir, SstSplit::kDev).size(), 1101u);
  std::vector<SstSentence> train = ReadSst(dir, SstSplit::kTrain);
  EXPECT_EQ(train.size(), 8544u);
  // The figures of docs/datasets.md: all three splits.
  for (const SstSentence& sentence : train) lengths.push_back(sentence.tokens.size());
  for (const SstSentence& sentence : ReadSst(dir, SstSplit::kDev)) {
    lengths.push_back(sentence.tokens.size());
  }
  testing::Summary all = testing::Summarize(lengths);
  EXPECT_NEAR(all.mean, 19.17, 0.005);
  EXPECT_EQ(all.min, 2);
  EXPECT_EQ(all.max, 56);
  std::cout << "SST tokens per sentence " << testing::Histogram(lengths) << "\n";
}

TEST(Sst, MalformedFilesNameFileAndLine) {
  const auto error_for = [](const std::string& trees, const std::string& tokens,
                            const std::string& split) {
    std::string dir = SstDirectory(trees, tokens, split);
    return ErrorOf([&] { ReadSst(dir, SstSplit::kTest); });
  };
  const std::string tokens2 = std::string(kTokens) + kTokens;
  EXPECT_THAT(error_for(std::string(kTree) + "6|6|5|5|9|7|0\n", tokens2, "1,2\n2,2\n"),
              HasSubstr("STree.txt:2: node 5: parent pointer \"9\" is not in 0..7"));
  EXPECT_THAT(error_for(std::string(kTree) + "6|6|x|5|7|7|0\n", tokens2, "1,2\n2,2\n"),
              HasSubstr("STree.txt:2: node 3: parent pointer \"x\" is not in 0..7"));
  EXPECT_THAT(error_for("6|6|6|5|7|7|0\n", kTokens, "1,2\n"),
              HasSubstr("STree.txt:1: node 6 has more than two children"));
  EXPECT_THAT(error_for("6|6|5|7|7|0|0\n", kTokens, "1,2\n"),
              HasSubstr("STree.txt:1: two roots: nodes 6 and 7"));
  // A self-loop: counting child slots, it always overfills a node first.
  EXPECT_THAT(error_for("6|6|5|5|7|7|7\n", kTokens, "1,2\n"),
              HasSubstr("STree.txt:1: node 7 has more than two children"));
  EXPECT_THAT(error_for("6|6|5|5|1|7|0\n", kTokens, "1,2\n"),
              HasSubstr("STree.txt:1: node 5 has leaf 1 as its parent"));
  // Node 3 is its own parent: a cycle the root never reaches.
  EXPECT_THAT(error_for("3|0|3\n", "a|b\n", "1,2\n"),
              HasSubstr("STree.txt:1: the root reaches 1 of 3 nodes (a cycle"));
  EXPECT_THAT(error_for("5|6|5|6|7|7|0\n", kTokens, "1,2\n"),
              HasSubstr("STree.txt:1: branches cross: leaf 3 is at position 2"));
  EXPECT_THAT(error_for(kTree, "a|b|c\n", "1,2\n"),
              HasSubstr("STree.txt:1: 7 nodes cannot be a binary tree over the 3 tokens of "));
  EXPECT_THAT(error_for(kTree, "a||b|c\n", "1,2\n"), HasSubstr("SOStr.txt:1: empty token"));
  EXPECT_THAT(error_for(kTree, tokens2, "1,2\n"), HasSubstr("lines but"));
  EXPECT_THAT(error_for(std::string(kTree) + kTree, tokens2, "1,2\n"),
              HasSubstr("datasetSplit.txt: no entry for sentence 2"));
  EXPECT_THAT(error_for(kTree, kTokens, "1,4\n"),
              HasSubstr("datasetSplit.txt:2: split label 4 is not 1 (train), 2 (test) or 3 (dev)"));
  EXPECT_THAT(error_for(kTree, kTokens, "2,1\n"),
              HasSubstr("datasetSplit.txt:2: sentence index 2 is not in 1..1"));
  EXPECT_THAT(error_for(kTree, kTokens, "1,2\n1,1\n"),
              HasSubstr("datasetSplit.txt:3: a second entry for sentence 1"));
  EXPECT_THAT(error_for(kTree, kTokens, "1;2\n"),
              HasSubstr("datasetSplit.txt:2: expected \"sentence_index,splitset_label\""));
  EXPECT_THAT(ErrorOf([] { ReadSst("/nonexistent-sst", SstSplit::kTest); }),
              HasSubstr("cannot open /nonexistent-sst/STree.txt"));
}

TEST(Ptb, LabelledAndUnlabelledTrees) {
  SstSentence labelled = ParsePtbTree("(3 (2 It) (4 (2 's) (3 good)))", "x:1");
  EXPECT_THAT(labelled.tokens, ElementsAre("It", "'s", "good"));
  EXPECT_THAT(labelled.tree.left, ElementsAre(-1, -1, -1, 1, 0));
  EXPECT_THAT(labelled.tree.right, ElementsAre(-1, -1, -1, 2, 3));
  SstSentence unlabelled = ParsePtbTree("  (((It) ('s)) (good))  ", "x:2");
  EXPECT_THAT(unlabelled.tokens, ElementsAre("It", "'s", "good"));
  EXPECT_THAT(unlabelled.tree.left, ElementsAre(-1, -1, 0, -1, 2));
  EXPECT_THAT(unlabelled.tree.right, ElementsAre(-1, -1, 1, -1, 3));
  EXPECT_THAT(ParsePtbTree("(NN word)", "x:3").tokens, ElementsAre("word"));
  ExpectValidTree(labelled);
  ExpectValidTree(unlabelled);
}

TEST(Ptb, MalformedTreesNamePlaceAndColumn) {
  EXPECT_THAT(ErrorOf([] { ParsePtbTree("(3 (2 It) (2 good)", "t.txt:4"); }),
              HasSubstr("t.txt:4:1: unbalanced '(': 1 bracket(s) still open"));
  EXPECT_THAT(ErrorOf([] { ParsePtbTree("(3 (2 It) (2 good)))", "t.txt:4"); }),
              HasSubstr("t.txt:4:20: text after the end of the tree"));
  EXPECT_THAT(ErrorOf([] { ParsePtbTree("(2 It))", "t.txt:4"); }),
              HasSubstr("t.txt:4:7: text after the end of the tree"));
  EXPECT_THAT(ErrorOf([] { ParsePtbTree(") (2 It)", "t.txt:4"); }),
              HasSubstr("t.txt:4:1: unbalanced ')'"));
  EXPECT_THAT(ErrorOf([] { ParsePtbTree("(3 (2 a) (2 b) (2 c))", "t.txt:4"); }),
              HasSubstr("t.txt:4:1: a bracket must hold one word or two subtrees"));
  EXPECT_THAT(ErrorOf([] { ParsePtbTree("(3 (2 a b c) (2 d))", "t.txt:4"); }),
              HasSubstr("t.txt:4:4: a bracket must hold one word or two subtrees"));
  EXPECT_THAT(ErrorOf([] { ParsePtbTree("(3 (2 a) (4 (2 b)))", "t.txt:4"); }),
              HasSubstr("t.txt:4:10: a bracket must hold"));
  EXPECT_THAT(ErrorOf([] { ParsePtbTree("word", "t.txt:4"); }),
              HasSubstr("t.txt:4:1: a word outside any bracket"));
  EXPECT_THAT(ErrorOf([] { ParsePtbTree("(2 caf\xC3)", "t.txt:4"); }),
              HasSubstr("t.txt:4:7: invalid UTF-8"));
  EXPECT_THAT(ErrorOf([] { ParsePtbTree("   ", "t.txt:4"); }), HasSubstr("t.txt:4:1: no tree"));
  // Deep nesting is no stack hazard: it is an error of the brackets, not a crash.
  EXPECT_THAT(ErrorOf([] { ParsePtbTree(std::string(200000, '('), "t.txt:4"); }),
              HasSubstr("200000 bracket(s) still open"));
}

TEST(Ptb, ReadPtbTreesSkipsBlankLinesAndNamesLines) {
  std::string dir = ScratchDirectory();
  std::string good =
      WriteFile(dir, "good.txt", "(3 (2 It) (3 works))\n\n  \n(1 (1 Not) (2 really))\n");
  std::vector<SstSentence> trees = ReadPtbTrees(good);
  ASSERT_EQ(trees.size(), 2u);
  EXPECT_THAT(trees[1].tokens, ElementsAre("Not", "really"));
  std::string bad = WriteFile(dir, "bad.txt", "(3 (2 It) (3 works))\n\n(1 (1 Not) (2 really)\n");
  EXPECT_THAT(ErrorOf([&] { ReadPtbTrees(bad); }), HasSubstr("bad.txt:3:1: unbalanced '('"));
}

}  // namespace
}  // namespace nimble::datasets
