// Seeded synthetic stand-ins for the real corpora, written in the real
// formats so that the same loaders read them (the defaults must work
// without ../shared/data). Their distributions follow figures measured on
// the real files; docs/datasets.md lists the figures and how they were
// measured:
// * MRPC: a vocabulary (BERT's layout: [PAD], [unused*], [UNK], [CLS],
//   [SEP], [MASK], words, "##" pieces) and a test TSV whose pairs have the
//   real split's WordPiece length distribution ([CLS] s1 [SEP] s2 [SEP]:
//   mean 53, min 19, p50 53, p95 74, max 104) and sentence word counts
//   (mean 23.4, min 8, max 45).
// * SST: STree.txt, SOStr.txt and datasetSplit.txt with random binary
//   parses whose sentence lengths follow the real treebank's (mean about
//   19 words).
// The same seed gives byte-identical files.
#pragma once

#include <cstdint>
#include <string>

namespace nimble::datasets {

struct SyntheticMrpcFiles {
  std::string vocab;  // path of vocab.txt
  std::string pairs;  // path of the TSV
};

// Writes `pairs` pairs into `directory` (created if needed).
SyntheticMrpcFiles WriteSyntheticMrpc(const std::string& directory, int pairs, uint64_t seed);

// Writes `sentences` test-split sentences (plus a few train/dev ones, so the
// split file is exercised) into `directory`.
void WriteSyntheticSst(const std::string& directory, int sentences, uint64_t seed);

}  // namespace nimble::datasets
