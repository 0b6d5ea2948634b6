// WordPieceTokenizer: a port of BERT's tokenization.py (BasicTokenizer with
// do_lower_case, then WordpieceTokenizer) over code points decoded here, with
// the character classes Python's unicodedata gives it looked up in
// unicode_data.h.
#include "harness/datasets/wordpiece.h"

#include <algorithm>
#include <iterator>
#include <span>

#include "harness/datasets/text.h"
#include "harness/datasets/unicode_data.h"

namespace nimble::datasets {

namespace {

namespace ud = unicode_data;

constexpr size_t kMaxWordChars = 100;  // BERT's max_input_chars_per_word
constexpr char32_t kCapitalSigma = 0x03A3;
constexpr char32_t kFinalSigma = 0x03C2;

bool InRanges(std::span<const ud::CodePointRange> ranges, char32_t code_point) {
  auto after = std::upper_bound(
      ranges.begin(), ranges.end(), code_point,
      [](char32_t value, const ud::CodePointRange& range) { return value < range.first; });
  return after != ranges.begin() && code_point <= std::prev(after)->last;
}

// Python's str.split() separators that survive the control-character removal:
// BERT's whitespace (\t, \n, \r, Zs) and the line/paragraph separators.
bool IsSeparator(char32_t c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == 0x2028 || c == 0x2029 ||
         InRanges(ud::kSpaceSeparators, c);
}

bool IsRemoved(char32_t c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  return c == 0 || c == 0xFFFD || InRanges(ud::kControl, c);
}

// BERT treats all non-alphanumeric ASCII as punctuation, "$" and "^" included.
bool IsPunctuation(char32_t c) {
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
      (c >= 123 && c <= 126)) {
    return true;
  }
  return InRanges(ud::kPunctuation, c);
}

bool IsCjkIdeograph(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

// BERT's lower() + NFD + drop Mn for one character; 0 when it is dropped.
// Python lower-cases a capital sigma that ends a word to the final form.
char32_t Fold(char32_t c, bool ends_word_after_letter) {
  if (c >= 'A' && c <= 'Z') return c + ('a' - 'A');
  if (c < 0x80) return c;
  if (c == kCapitalSigma && ends_word_after_letter) return kFinalSigma;
  auto fold =
      std::lower_bound(std::begin(ud::kFolds), std::end(ud::kFolds), c,
                       [](const ud::Fold& entry, char32_t value) { return entry.from < value; });
  if (fold != std::end(ud::kFolds) && fold->from == c) return fold->to;
  return InRanges(ud::kCombiningMarks, c) ? 0 : c;
}

// One whitespace-separated word: folded, then split at punctuation, each
// punctuation character a token of its own.
void SplitWord(const std::u32string& word, std::vector<std::u32string>& tokens) {
  std::u32string current;
  for (size_t i = 0; i < word.size(); ++i) {
    // Python's Final_Sigma rule, reduced to the adjacent characters.
    bool ends_word_after_letter = i > 0 && InRanges(ud::kCased, word[i - 1]) &&
                                  (i + 1 == word.size() || !InRanges(ud::kCased, word[i + 1]));
    char32_t c = Fold(word[i], ends_word_after_letter);
    if (c == 0) continue;
    if (IsPunctuation(c)) {
      if (!current.empty()) tokens.push_back(std::move(current));
      current.clear();
      tokens.push_back(std::u32string(1, c));
    } else {
      current += c;
    }
  }
  if (!current.empty()) tokens.push_back(std::move(current));
}

// BERT's BasicTokenizer: the uncased words and punctuation of `text`.
std::vector<std::u32string> BasicTokens(const std::string& text) {
  std::vector<std::u32string> tokens;
  std::u32string word;
  const auto end_word = [&] {
    if (!word.empty()) SplitWord(word, tokens);
    word.clear();
  };
  size_t pos = 0;
  while (pos < text.size()) {
    char32_t c;
    if (!text::DecodeUtf8(text, pos, c)) {
      ++pos;  // BERT decodes with errors="ignore": the bad byte is dropped
      continue;
    }
    if (IsRemoved(c)) continue;
    if (IsSeparator(c)) {
      end_word();
    } else if (IsCjkIdeograph(c)) {
      end_word();
      tokens.push_back(std::u32string(1, c));
    } else {
      word += c;
    }
  }
  end_word();
  return tokens;
}

std::string ToUtf8(std::u32string_view code_points) {
  std::string out;
  for (char32_t c : code_points) text::AppendUtf8(c, out);
  return out;
}

std::unordered_map<std::string, int32_t> IndexVocab(const std::vector<std::string>& vocab,
                                                    const std::string& source) {
  std::unordered_map<std::string, int32_t> ids;
  for (size_t i = 0; i < vocab.size(); ++i) {
    const std::string where = text::Location(source, i + 1);
    if (vocab[i].empty()) text::Fail(where, "empty vocabulary entry");
    if (std::optional<size_t> offset = text::FindInvalidUtf8(vocab[i])) {
      text::Fail(where, "invalid UTF-8 at byte " + std::to_string(*offset + 1));
    }
    auto [it, inserted] = ids.emplace(vocab[i], static_cast<int32_t>(i));
    if (!inserted) {
      text::Fail(where, "duplicate token \"" + vocab[i] + "\" (first at line " +
                            std::to_string(it->second + 1) + ")");
    }
  }
  for (const char* required : {"[CLS]", "[SEP]", "[UNK]"}) {
    if (!ids.contains(required)) {
      throw Error(source + ": the vocabulary has no " + std::string(required) + " token");
    }
  }
  return ids;
}

}  // namespace

std::vector<std::string> BasicTokenize(const std::string& text) {
  std::vector<std::string> words;
  for (const std::u32string& word : BasicTokens(text)) words.push_back(ToUtf8(word));
  return words;
}

WordPieceTokenizer WordPieceTokenizer::FromVocabFile(const std::string& path) {
  return WordPieceTokenizer(text::ReadLines(path), path);
}

WordPieceTokenizer::WordPieceTokenizer(std::vector<std::string> vocab)
    : WordPieceTokenizer(std::move(vocab), "vocabulary") {}

WordPieceTokenizer::WordPieceTokenizer(std::vector<std::string> vocab, const std::string& source)
    : vocab_(std::move(vocab)), ids_(IndexVocab(vocab_, source)) {}

int32_t WordPieceTokenizer::IdOf(const std::string& token) const {
  auto it = ids_.find(token);
  return it == ids_.end() ? -1 : it->second;
}

std::vector<std::string> WordPieceTokenizer::Tokenize(const std::string& text) const {
  std::vector<std::string> pieces;
  for (const std::u32string& word : BasicTokens(text)) {
    if (word.size() > kMaxWordChars) {
      pieces.push_back("[UNK]");
      continue;
    }
    // Greedy longest match first; one piece without a match makes the whole
    // word [UNK].
    std::vector<std::string> word_pieces;
    for (size_t start = 0; start < word.size();) {
      std::string match;
      size_t end = word.size();
      for (; end > start; --end) {
        std::string candidate =
            (start > 0 ? "##" : "") + ToUtf8(std::u32string_view(word).substr(start, end - start));
        if (ids_.contains(candidate)) {
          match = std::move(candidate);
          break;
        }
      }
      if (match.empty()) {
        word_pieces = {"[UNK]"};
        break;
      }
      word_pieces.push_back(std::move(match));
      start = end;
    }
    std::move(word_pieces.begin(), word_pieces.end(), std::back_inserter(pieces));
  }
  return pieces;
}

std::vector<int32_t> WordPieceTokenizer::Encode(const std::string& text) const {
  std::vector<int32_t> ids;
  for (const std::string& piece : Tokenize(text)) ids.push_back(ids_.at(piece));
  return ids;
}

WordPieceTokenizer::Encoded WordPieceTokenizer::EncodePair(const std::string& a,
                                                           const std::string& b) const {
  const int32_t cls = ids_.at("[CLS]");
  const int32_t sep = ids_.at("[SEP]");
  Encoded encoded;
  encoded.ids.push_back(cls);
  for (int32_t id : Encode(a)) encoded.ids.push_back(id);
  encoded.ids.push_back(sep);
  encoded.type_ids.assign(encoded.ids.size(), 0);
  for (int32_t id : Encode(b)) encoded.ids.push_back(id);
  encoded.ids.push_back(sep);
  encoded.type_ids.resize(encoded.ids.size(), 1);
  return encoded;
}

}  // namespace nimble::datasets
