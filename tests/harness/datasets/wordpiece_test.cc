// WordPieceTokenizer: BERT's uncased tokenization rules on a small vocabulary,
// vocabulary errors, and the real vocabulary over the real MRPC test split.
#include "harness/datasets/wordpiece.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <iostream>

#include "harness/datasets/mrpc.h"
#include "tests/harness/datasets/dataset_test_util.h"

namespace nimble::datasets {
namespace {

using ::testing::ElementsAre;
using testing::ErrorOf;
using ::testing::HasSubstr;
using testing::ScratchDirectory;
using testing::WriteFile;

using Tokens = std::vector<std::string>;

WordPieceTokenizer SmallTokenizer() {
  return WordPieceTokenizer({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "un", "##aff",     "##able",
                             "hello", "world", "cafe",  "naive", "i",  "##stanbul", "οδος",
                             "οδοσ",  "елка",  ",",     "!",     "'",  "s",         "—",
                             "“",     "”",     "日",    "本",    "a",  "##a"});
}

TEST(WordPiece, GreedyLongestMatchFirst) {
  WordPieceTokenizer tokenizer = SmallTokenizer();
  EXPECT_THAT(tokenizer.Tokenize("unaffable"), ElementsAre("un", "##aff", "##able"));
  EXPECT_THAT(tokenizer.Tokenize("unaffablex hello"), ElementsAre("[UNK]", "hello"));
  EXPECT_THAT(tokenizer.Tokenize(std::string(100, 'a')), ::testing::SizeIs(100));
  EXPECT_THAT(tokenizer.Tokenize(std::string(101, 'a') + " hello"), ElementsAre("[UNK]", "hello"));
  EXPECT_THAT(tokenizer.Tokenize(""), ElementsAre());
  EXPECT_THAT(tokenizer.Tokenize(" \t\n "), ElementsAre());
}

TEST(WordPiece, LowerCasesStripsAccentsAndSplitsPunctuation) {
  WordPieceTokenizer tokenizer = SmallTokenizer();
  EXPECT_THAT(tokenizer.Tokenize("HeLLo,World!"), ElementsAre("hello", ",", "world", "!"));
  EXPECT_THAT(tokenizer.Tokenize("Caf\xC3\xA9 NA\xC3\x8FVE"), ElementsAre("cafe", "naive"));
  // İ lower-cases to i + U+0307, whose combining dot is stripped.
  EXPECT_THAT(tokenizer.Tokenize("\xC4\xB0stanbul"), ElementsAre("i", "##stanbul"));
  // Greek capitals, final sigma at the end of a word; Cyrillic Ё -> е.
  EXPECT_THAT(tokenizer.Tokenize("\xCE\x9F\xCE\x94\xCE\x9F\xCE\xA3"), ElementsAre("οδος"));
  EXPECT_THAT(tokenizer.Tokenize("\xCE\x9F\xCE\x94\xCE\x9F\xCE\xA3\xCE\x91"), ElementsAre("[UNK]"));
  EXPECT_THAT(tokenizer.Tokenize("\xD0\x81\xD0\xBB\xD0\xBA\xD0\xB0"), ElementsAre("елка"));
  // Unicode punctuation (dash, quotes) and ASCII apostrophe.
  EXPECT_THAT(tokenizer.Tokenize("naive\xE2\x80\x94\xE2\x80\x9Chello\xE2\x80\x9D's"),
              ElementsAre("naive", "—", "“", "hello", "”", "'", "s"));
  // A combining accent already decomposed is dropped too.
  EXPECT_THAT(tokenizer.Tokenize("cafe\xCC\x81"), ElementsAre("cafe"));
}

TEST(WordPiece, WhitespaceControlCjkAndInvalidBytes) {
  WordPieceTokenizer tokenizer = SmallTokenizer();
  // No-break space and ideographic space separate; CJK ideographs are words.
  EXPECT_THAT(tokenizer.Tokenize("hello\xC2\xA0world\xE3\x80\x80\xE6\x97\xA5\xE6\x9C\xAC"),
              ElementsAre("hello", "world", "日", "本"));
  // NUL, zero-width space (Cf), U+FFFD and invalid UTF-8 bytes vanish.
  EXPECT_THAT(tokenizer.Tokenize(std::string("hel\0lo", 6) + "\xE2\x80\x8B" + "wor\xEF\xBF\xBDld"),
              ElementsAre("[UNK]"));  // "helloworld": "##world" is not a piece
  EXPECT_THAT(tokenizer.Tokenize(std::string("hel\0lo", 6) + " w\xE2\x80\x8Borl\xEF\xBF\xBD" + "d"),
              ElementsAre("hello", "world"));
  EXPECT_THAT(tokenizer.Tokenize("hel\xFFlo wo\xC3rld \xE2\x82"), ElementsAre("hello", "world"));
}

TEST(WordPiece, BasicTokenizeStopsBeforeWordPiece) {
  EXPECT_THAT(BasicTokenize("PCCW's Caf\xC3\xA9, \xE6\x97\xA5\xE6\x9C\xAC!"),
              ElementsAre("pccw", "'", "s", "cafe", ",", "日", "本", "!"));
}

TEST(WordPiece, EncodePairMarksSegments) {
  WordPieceTokenizer tokenizer = SmallTokenizer();
  EXPECT_EQ(tokenizer.vocab_size(), 27u);
  EXPECT_EQ(tokenizer.IdOf("hello"), 7);
  EXPECT_EQ(tokenizer.IdOf("missing"), -1);
  EXPECT_THAT(tokenizer.Encode("Hello world!"), ElementsAre(7, 8, 17));
  WordPieceTokenizer::Encoded pair = tokenizer.EncodePair("hello", "unaffable world");
  EXPECT_THAT(pair.ids, ElementsAre(2, 7, 3, 4, 5, 6, 8, 3));
  EXPECT_THAT(pair.type_ids, ElementsAre(0, 0, 0, 1, 1, 1, 1, 1));
}

TEST(WordPiece, VocabularyErrors) {
  std::string dir = ScratchDirectory();
  const auto error_for = [&](const std::string& content) {
    std::string path = WriteFile(dir, "vocab.txt", content);
    return ErrorOf([&] { WordPieceTokenizer::FromVocabFile(path); });
  };
  EXPECT_THAT(error_for("[CLS]\n[SEP]\na\n"),
              HasSubstr("vocab.txt: the vocabulary has no [UNK] token"));
  EXPECT_THAT(error_for("[CLS]\n[SEP]\n[UNK]\na\n\nb\n"),
              HasSubstr("vocab.txt:5: empty vocabulary entry"));
  EXPECT_THAT(error_for("[CLS]\n[SEP]\n[UNK]\na\na\n"),
              HasSubstr("vocab.txt:5: duplicate token \"a\" (first at line 4)"));
  EXPECT_THAT(error_for("[CLS]\n[SEP]\n[UNK]\n\xC0\xAF\n"),
              HasSubstr("vocab.txt:4: invalid UTF-8 at byte 1"));
  EXPECT_THAT(ErrorOf([&] { WordPieceTokenizer::FromVocabFile(dir + "/none.txt"); }),
              HasSubstr("cannot open " + dir + "/none.txt"));
  EXPECT_THAT(ErrorOf([] {
                WordPieceTokenizer({"[CLS]", "[SEP]", "[UNK]", "[SEP]"});
              }),
              HasSubstr("vocabulary:4: duplicate token \"[SEP]\""));
}

// Expected pieces from BERT's reference tokenization.py (uncased) on the same
// vocabulary.
TEST(WordPiece, RealVocabularyKnownTokenizations) {
  SKIP_WITHOUT_SHARED_DATA();
  WordPieceTokenizer tokenizer =
      WordPieceTokenizer::FromVocabFile(testing::SharedData("bert/vocab.txt"));
  ASSERT_EQ(tokenizer.vocab_size(), 30522u);
  EXPECT_EQ(tokenizer.IdOf("[CLS]"), 101);
  EXPECT_EQ(tokenizer.IdOf("[SEP]"), 102);
  EXPECT_THAT(tokenizer.Tokenize("PCCW's chief"),
              ElementsAre("pc", "##c", "##w", "'", "s", "chief"));
  EXPECT_THAT(tokenizer.Tokenize("NASIRIYA, Iraq\xE2\x80\x94Iraqi doctors"),
              ElementsAre("nas", "##iri", "##ya", ",", "iraq", "—", "iraqi", "doctors"));
  EXPECT_THAT(tokenizer.Tokenize("Conchita Mart\xC3\xADnez \"I\xC2\xB4m"),
              ElementsAre("con", "##chi", "##ta", "martinez", "\"", "i", "##´", "##m"));
  EXPECT_THAT(tokenizer.Tokenize("2 \xC2\xBD 8-ounce servings. The \xC2\xA3"
                                 "5m"),
              ElementsAre("2", "½", "8", "-", "ounce", "serving", "##s", ".", "the", "£5", "##m"));
  EXPECT_THAT(tokenizer.Tokenize("\xE2\x80\x98\xE2\x80\x98taikong,\xE2\x80\x99\xE2\x80\x99"),
              ElementsAre("‘", "‘", "tai", "##kong", ",", "’", "’"));
  EXPECT_THAT(tokenizer.Tokenize("Stra\xC3\x9F"
                                 "e \xC5\x81\xC3\x93\x44\xC5\xB9"),
              ElementsAre("st", "##raße", "łodz"));
}

// The figures docs/datasets.md quotes; the histograms are printed for it.
TEST(WordPiece, RealMrpcPairLengths) {
  SKIP_WITHOUT_SHARED_DATA();
  WordPieceTokenizer tokenizer =
      WordPieceTokenizer::FromVocabFile(testing::SharedData("bert/vocab.txt"));
  std::vector<int> pair_lengths;
  std::vector<int> basic_tokens;  // words and punctuation of each sentence
  std::vector<int> extra_pieces;  // pieces beyond one per basic token, per pair
  for (const MrpcPair& pair : ReadMrpc(testing::SharedData("mrpc/msr_paraphrase_test.txt"))) {
    WordPieceTokenizer::Encoded encoded = tokenizer.EncodePair(pair.sentence1, pair.sentence2);
    pair_lengths.push_back(static_cast<int>(encoded.ids.size()));
    int pair_basic = 0;
    for (const std::string& sentence : {pair.sentence1, pair.sentence2}) {
      int words = static_cast<int>(BasicTokenize(sentence).size());
      basic_tokens.push_back(words);
      pair_basic += words;
    }
    extra_pieces.push_back(static_cast<int>(encoded.ids.size()) - 3 - pair_basic);
  }
  testing::Summary pairs = testing::Summarize(pair_lengths);
  EXPECT_NEAR(pairs.mean, 52.98, 0.005);
  EXPECT_EQ(pairs.min, 19);
  EXPECT_EQ(pairs.p50, 53);
  EXPECT_EQ(pairs.p95, 74);
  EXPECT_EQ(pairs.max, 104);
  testing::Summary words = testing::Summarize(basic_tokens);
  EXPECT_NEAR(words.mean, 23.40, 0.005);
  EXPECT_EQ(words.min, 8);
  EXPECT_EQ(words.max, 45);
  std::cout << "pair pieces " << testing::Histogram(pair_lengths) << "\n"
            << "sentence basic tokens " << testing::Histogram(basic_tokens) << "\n"
            << "extra pieces per pair " << testing::Histogram(extra_pieces) << "\n";
}

}  // namespace
}  // namespace nimble::datasets
