// The Stanford Sentiment Treebank, in its original form (STree.txt: one
// binarised parse per line as `|`-separated 1-based parent pointers, 0 for
// the root, leaves first; SOStr.txt: the `|`-separated tokens of each
// sentence, one per leaf; datasetSplit.txt: "sentence_index,splitset_label"
// with 1 train, 2 test, 3 dev) and as PTB bracketed trees
// ("(3 (2 It) (4 (2 's) (3 good)))", labels optional).
#pragma once

#include <string>
#include <vector>

#include "models/treelstm/treelstm.h"

namespace nimble::datasets {

struct SstSentence {
  std::vector<std::string> tokens;  // the leaves, left to right
  models::BinaryTree tree;          // post-order, leaves numbered as `tokens`
};

enum class SstSplit { kTrain = 1, kTest = 2, kDev = 3 };

// Reads the three files from `directory` and returns the sentences of
// `split`, in file order. Every error names its file and line: a parent
// pointer out of range, a node with other than two children, a cycle, a
// token count that does not match the leaves, a missing split entry.
std::vector<SstSentence> ReadSst(const std::string& directory, SstSplit split);

// One tree in PTB bracket form; errors name `where` (e.g. "file:line") and
// the column.
SstSentence ParsePtbTree(const std::string& text, const std::string& where);

// Every line of a PTB file (blank lines skipped).
std::vector<SstSentence> ReadPtbTrees(const std::string& path);

}  // namespace nimble::datasets
