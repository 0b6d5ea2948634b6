// BERT's tokenizer over a WordPiece vocabulary (vocab.txt: one token per
// line, id = line number, continuations prefixed "##"). Basic tokenization
// as BERT's uncased model (docs/datasets.md lists the Unicode coverage):
// invalid UTF-8 bytes and control characters removed,
// whitespace normalised, CJK ideographs split, lower-casing, accents
// stripped (Unicode decomposition, combining marks dropped), punctuation
// split into tokens; then greedy longest-match-first WordPiece per word,
// [UNK] for a word with no match or longer than 100 characters.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace nimble::datasets {

// BERT's basic tokenization alone (the steps before WordPiece): the words
// of `text`, lower-cased, accents stripped, punctuation split off.
std::vector<std::string> BasicTokenize(const std::string& text);

class WordPieceTokenizer {
 public:
  // Throws nimble::Error naming the file (and line) for an unreadable or
  // malformed vocabulary (an empty line, a duplicate token, invalid UTF-8),
  // or one without [CLS], [SEP] or [UNK]. The constructor reports the same
  // problems as "vocabulary:LINE: ...".
  static WordPieceTokenizer FromVocabFile(const std::string& path);
  explicit WordPieceTokenizer(std::vector<std::string> vocab);

  std::vector<std::string> Tokenize(const std::string& text) const;
  std::vector<int32_t> Encode(const std::string& text) const;

  // [CLS] a [SEP] b [SEP], with token type 0 through the first [SEP], 1 after.
  struct Encoded {
    std::vector<int32_t> ids;
    std::vector<int32_t> type_ids;
  };
  Encoded EncodePair(const std::string& a, const std::string& b) const;

  size_t vocab_size() const { return vocab_.size(); }
  int32_t IdOf(const std::string& token) const;  // -1 when absent

 private:
  // `source` names the vocabulary in errors ("SOURCE:LINE: ...").
  WordPieceTokenizer(std::vector<std::string> vocab, const std::string& source);

  std::vector<std::string> vocab_;
  std::unordered_map<std::string, int32_t> ids_;
};

}  // namespace nimble::datasets
