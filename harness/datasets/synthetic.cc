// The synthetic MRPC and SST files. Every random choice comes from one
// SplitMix64 stream per file set (the std:: distributions differ between
// standard libraries), so a seed names the same bytes everywhere.
#include "harness/datasets/synthetic.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <span>
#include <string_view>
#include <vector>

#include "models/splitmix64.h"
#include "nimble/vm/error.h"

namespace nimble::datasets {

namespace {

// Measured on ../shared/data; docs/datasets.md gives the method and summary
// figures. MRPC test split, 1725 pairs: WordPiece tokens of
// "[CLS] s1 [SEP] s2 [SEP]" (19..104), BERT basic tokens (words and
// punctuation) per sentence (8..45), and per pair the pieces beyond one per
// basic token (0..36).
constexpr int kFirstPairPieces = 19;
constexpr std::array<uint32_t, 86> kPairPieces = {
    1,  0,  1,  1,  1,  4,  6,  6,  2,  9,  11, 10, 21, 13, 30, 27, 33, 28, 44, 35, 24, 25,
    31, 40, 49, 49, 45, 41, 38, 37, 49, 43, 33, 50, 48, 49, 40, 43, 35, 41, 55, 53, 46, 50,
    43, 33, 51, 26, 26, 23, 29, 25, 28, 26, 23, 15, 11, 16, 12, 9,  3,  6,  8,  2,  0,  2,
    2,  2,  1,  0,  0,  0,  3,  0,  1,  0,  0,  0,  0,  0,  0,  1,  0,  0,  0,  1};
constexpr int kFirstSentenceWords = 8;
constexpr std::array<uint32_t, 38> kSentenceWords = {
    6,   5,   20,  39,  58,  75,  93, 132, 145, 130, 162, 172, 175, 182, 195, 184, 196, 159, 176,
    173, 141, 151, 139, 161, 102, 87, 51,  51,  25,  18,  19,  12,  6,   6,   1,   2,   0,   1};
constexpr std::array<uint32_t, 37> kExtraPieces = {
    482, 160, 305, 108, 198, 97, 127, 44, 75, 34, 41, 10, 15, 7, 11, 3, 3, 0, 2,
    1,   0,   1,   0,   0,   0,  0,   0,  0,  0,  0,  0,  0,  0, 0,  0, 0, 1};
constexpr uint64_t kParaphrases = 1147;  // of 1725 pairs with quality 1
constexpr uint64_t kMrpcPairs = 1725;
// SST, all 11855 sentences of SOStr.txt: tokens per sentence (2..56).
constexpr int kFirstSstLength = 2;
constexpr std::array<uint32_t, 55> kSstLengths = {
    48,  114, 182, 209, 319, 310, 354, 377, 401, 401, 428, 442, 465, 494, 458, 467, 484, 490, 450,
    430, 451, 424, 402, 359, 331, 330, 310, 248, 214, 215, 205, 186, 155, 126, 101, 81,  84,  51,
    44,  49,  32,  33,  28,  22,  14,  5,   11,  9,   4,   4,   3,   0,   0,   0,   1};

constexpr size_t kBertVocabSize = 30522;

// The seeded generator, with the draws the generators need.
class Random : public models::SplitMix64 {
 public:
  using SplitMix64::SplitMix64;

  // An index drawn with probability weights[i] / sum(weights).
  size_t Weighted(std::span<const uint64_t> weights) {
    uint64_t total = 0;
    for (uint64_t w : weights) total += w;
    uint64_t pick = Below(total);
    size_t i = 0;
    while (pick >= weights[i]) pick -= weights[i++];
    return i;
  }

  template <typename T>
  const T& Choose(const std::vector<T>& items) {
    return items[Below(items.size())];
  }
};

int SampleHistogram(Random& random, int first, std::span<const uint32_t> counts) {
  std::vector<uint64_t> weights(counts.begin(), counts.end());
  return first + static_cast<int>(random.Weighted(weights));
}

// The first `count` pseudo-words of consonant-vowel syllables over
// `consonants` x `vowels`: all words of one syllable, then of two, ...
std::vector<std::string> SyllableWords(std::string_view consonants, std::string_view vowels,
                                       size_t count) {
  std::vector<std::string> syllables;
  for (char c : consonants) {
    for (char v : vowels) syllables.push_back({c, v});
  }
  std::vector<std::string> words;
  for (const std::string& syllable : syllables) {
    if (words.size() < count) words.push_back(syllable);
  }
  // Each word, in order, is the stem of the words one syllable longer.
  for (size_t stem = 0; words.size() < count; ++stem) {
    for (size_t i = 0; i < syllables.size() && words.size() < count; ++i) {
      words.push_back(words[stem] + syllables[i]);
    }
  }
  return words;
}

// The synthetic WordPiece vocabulary. Whole words use only the letters a-m and
// continuation pieces only n-z (all three letters long), so greedy
// longest-match splits "word" + "suffix" + "suffix" exactly back into those
// pieces and each sentence's token count is known when it is written.
struct SyntheticVocab {
  std::vector<std::string> entries;  // vocab.txt, in id order
  std::vector<std::string> words;
  std::vector<std::string> suffixes;  // without their "##"
};

SyntheticVocab MakeVocab() {
  SyntheticVocab vocab;
  std::vector<std::string>& entries = vocab.entries;
  entries.push_back("[PAD]");
  for (int i = 0; i < 99; ++i) entries.push_back("[unused" + std::to_string(i) + "]");
  for (const char* special : {"[UNK]", "[CLS]", "[SEP]", "[MASK]"}) entries.push_back(special);
  for (char c = '!'; c <= '~'; ++c) {
    if (!std::isalnum(static_cast<unsigned char>(c))) entries.push_back(std::string(1, c));
  }
  for (char c = '0'; c <= '9'; ++c) entries.push_back(std::string(1, c));
  for (char c = 'a'; c <= 'z'; ++c) entries.push_back(std::string(1, c));
  for (char c = 'a'; c <= 'z'; ++c) entries.push_back("##" + std::string(1, c));
  for (const std::string& stem : SyllableWords("npqrstvwxz", "ouy", 30)) {
    for (char last : std::string_view("npqrstvwxz")) vocab.suffixes.push_back(stem + last);
  }
  vocab.words =
      SyllableWords("bcdfghjklm", "aei", kBertVocabSize - entries.size() - vocab.suffixes.size());
  entries.insert(entries.end(), vocab.words.begin(), vocab.words.end());
  for (const std::string& suffix : vocab.suffixes) entries.push_back("##" + suffix);
  return vocab;
}

// (words and punctuation of sentence 1, of sentence 2, extra pieces) for a
// pair of `pieces` WordPiece tokens, drawn from the product of the measured
// histograms restricted to the combinations that add up.
std::array<int, 3> SamplePairShape(Random& random, int pieces) {
  std::vector<std::array<int, 3>> shapes;
  std::vector<uint64_t> weights;
  for (size_t a = 0; a < kSentenceWords.size(); ++a) {
    for (size_t b = 0; b < kSentenceWords.size(); ++b) {
      const int first = kFirstSentenceWords + static_cast<int>(a);
      const int second = kFirstSentenceWords + static_cast<int>(b);
      const int extra = pieces - 3 - first - second;
      if (extra < 0 || extra >= static_cast<int>(kExtraPieces.size())) continue;
      shapes.push_back({first, second, extra});
      weights.push_back(uint64_t{kSentenceWords[a]} * kSentenceWords[b] * kExtraPieces[extra]);
    }
  }
  return shapes[random.Weighted(weights)];
}

// A sentence of `basic_tokens` words and punctuation marks whose word i
// carries suffixes[i] continuation pieces.
std::string MakeSentence(Random& random, const SyntheticVocab& vocab, int basic_tokens,
                         const std::vector<int>& suffixes) {
  const int words = static_cast<int>(suffixes.size());
  // One comma in the longer sentences, after a word in the middle half.
  const int comma_after =
      basic_tokens - words == 2 ? words / 4 + static_cast<int>(random.Below(words / 2)) : -1;
  std::string sentence;
  for (int i = 0; i < words; ++i) {
    if (i > 0) sentence += ' ';
    std::string word = random.Choose(vocab.words);
    // Now and then an "e" with an acute accent or a capital, which the
    // tokenizer folds back into the vocabulary word.
    size_t e = word.find('e');
    if (e != std::string::npos && random.Below(32) == 0) word.replace(e, 1, "\xC3\xA9");
    if (i == 0) word[0] = static_cast<char>(word[0] - 'a' + 'A');
    sentence += word;
    for (int s = 0; s < suffixes[i]; ++s) sentence += random.Choose(vocab.suffixes);
    if (i == comma_after) sentence += ',';
  }
  return sentence + '.';
}

std::ofstream OpenForWriting(const std::string& path) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error("cannot write " + path);
  return out;
}

void Finish(std::ofstream& out, const std::string& path) {
  out.close();
  if (!out) throw Error("cannot write " + path);
}

std::filesystem::path MakeDirectory(const std::string& directory) {
  std::error_code error;
  std::filesystem::create_directories(directory, error);
  if (error) throw Error("cannot create " + directory + ": " + error.message());
  return directory;
}

}  // namespace

SyntheticMrpcFiles WriteSyntheticMrpc(const std::string& directory, int pairs, uint64_t seed) {
  if (pairs < 0) throw Error("synthetic MRPC: negative pair count " + std::to_string(pairs));
  const std::filesystem::path root = MakeDirectory(directory);
  SyntheticMrpcFiles files{(root / "vocab.txt").string(),
                           (root / "msr_paraphrase_test.txt").string()};
  const SyntheticVocab vocab = MakeVocab();
  std::ofstream vocab_out = OpenForWriting(files.vocab);
  for (const std::string& entry : vocab.entries) vocab_out << entry << '\n';
  Finish(vocab_out, files.vocab);

  Random random(seed);
  std::ofstream out = OpenForWriting(files.pairs);
  out << "\xEF\xBB\xBFQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n";
  for (int p = 0; p < pairs; ++p) {
    const int pieces = SampleHistogram(random, kFirstPairPieces, kPairPieces);
    const auto [tokens1, tokens2, extra] = SamplePairShape(random, pieces);
    // Every sentence ends in "."; half of those of 12 basic tokens or more
    // also hold a comma.
    const int words1 = tokens1 - 1 - (tokens1 >= 12 && random.Below(2) == 0);
    const int words2 = tokens2 - 1 - (tokens2 >= 12 && random.Below(2) == 0);
    std::vector<int> suffixes(words1 + words2, 0);
    for (int i = 0; i < extra; ++i) ++suffixes[random.Below(suffixes.size())];
    const bool paraphrase = random.Below(kMrpcPairs) < kParaphrases;
    const uint64_t id1 = 1000000 + random.Below(9000000);
    const uint64_t id2 = 1000000 + random.Below(9000000);
    out << (paraphrase ? 1 : 0) << '\t' << id1 << '\t' << id2 << '\t'
        << MakeSentence(random, vocab, tokens1,
                        std::vector<int>(suffixes.begin(), suffixes.begin() + words1))
        << '\t'
        << MakeSentence(random, vocab, tokens2,
                        std::vector<int>(suffixes.begin() + words1, suffixes.end()))
        << '\n';
  }
  Finish(out, files.pairs);
  return files;
}

void WriteSyntheticSst(const std::string& directory, int sentences, uint64_t seed) {
  if (sentences < 0)
    throw Error("synthetic SST: negative sentence count " + std::to_string(sentences));
  const std::filesystem::path root = MakeDirectory(directory);
  const std::vector<std::string> words = SyllableWords("bcdfghjklmnprstvwz", "aeiou", 2000);
  Random random(seed);
  // Test sentences and a tenth as many (at least one) each of train and dev,
  // interleaved at random as in the real split file.
  const int others = std::max(1, sentences / 10);
  std::vector<uint64_t> remaining = {static_cast<uint64_t>(others),
                                     static_cast<uint64_t>(sentences),
                                     static_cast<uint64_t>(others)};
  const std::string tree_path = (root / "STree.txt").string();
  const std::string token_path = (root / "SOStr.txt").string();
  const std::string split_path = (root / "datasetSplit.txt").string();
  std::ofstream trees = OpenForWriting(tree_path);
  std::ofstream tokens = OpenForWriting(token_path);
  std::ofstream splits = OpenForWriting(split_path);
  splits << "sentence_index,splitset_label\n";
  for (int index = 1; index <= sentences + 2 * others; ++index) {
    const size_t split = random.Weighted(remaining);
    --remaining[split];
    splits << index << ',' << split + 1 << '\n';

    const int length = SampleHistogram(random, kFirstSstLength, kSstLengths);
    for (int i = 0; i < length; ++i) {
      tokens << (i > 0 ? "|" : "") << (i + 1 == length ? "." : random.Choose(words));
    }
    tokens << '\n';
    // A random binary parse: split each span at a uniform point. Leaves are
    // nodes 1..length, internal nodes are numbered in post-order after them,
    // so the root is the last node, as in the real file.
    std::vector<int> parents(2 * length - 1, 0);
    int next_node = length;
    const auto build = [&](const auto& self, int begin, int end) -> int {
      if (end - begin == 1) return begin;
      const int middle = begin + 1 + static_cast<int>(random.Below(end - begin - 1));
      const int left = self(self, begin, middle);
      const int right = self(self, middle, end);
      parents[left] = parents[right] = next_node + 1;
      return next_node++;
    };
    build(build, 0, length);
    for (size_t node = 0; node < parents.size(); ++node) {
      trees << (node > 0 ? "|" : "") << parents[node];
    }
    trees << '\n';
  }
  Finish(trees, tree_path);
  Finish(tokens, token_path);
  Finish(splits, split_path);
}

}  // namespace nimble::datasets
