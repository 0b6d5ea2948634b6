// Tokens of the Relay text format (version 0.0.5). The lexer turns the whole
// source into tokens up front, each with its 1-based line and column, so the
// parser can look ahead freely and every error can point at the text.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nimble/vm/dtype.h"

namespace nimble::text {

enum class TokenKind : uint8_t {
  kEnd,         // end of input
  kIdentifier,  // `add`, `nn.softmax`, `Cons`, `float32`, keywords (`let`, `fn`, ...)
  kLocal,       // `%x`, `%0`
  kGlobal,      // `@main`
  kInteger,     // `3`, `-1`, `3i64`
  kFloat,       // `1f`, `1.5`, `-2e-05f`, `1f64`
  kString,      // `"int64"`
  kPunct,       // ( ) [ ] { } , ; : = . => -> ? #
};

struct Token {
  TokenKind kind = TokenKind::kEnd;
  std::string text;   // the source text of the token
  std::string value;  // name without its sigil, decoded string contents, or punctuation
  int line = 0;
  int column = 0;
  // Numbers: the value, and the dtype given by the suffix (or the default,
  // int32 / float32). `number` holds the literal as a double for both kinds.
  double number = 0;
  int64_t integer = 0;
  DataType dtype;
  bool has_suffix = false;

  bool Is(TokenKind k, const char* v) const { return kind == k && value == v; }
  bool IsPunct(const char* p) const { return Is(TokenKind::kPunct, p); }
  bool IsWord(const char* word) const { return Is(TokenKind::kIdentifier, word); }
  // How an error message names the token: `';'`, `'%y'`, `end of input`.
  std::string Describe() const;
};

// Splits `source` into tokens, dropping whitespace and `//` and `/* */`
// comments; the last token is kEnd. Throws nimble::Error
// "source_name:line:col: message" on a character or literal it cannot read.
std::vector<Token> Lex(const std::string& source, const std::string& source_name);

// The error every text-format failure throws: "source_name:line:col: message".
[[noreturn]] void ThrowSyntaxError(const std::string& source_name, int line, int column,
                                   const std::string& message);

}  // namespace nimble::text
