#include "nimble/compiler/text/lexer.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "nimble/vm/error.h"

namespace nimble::text {

std::string Token::Describe() const {
  if (kind == TokenKind::kEnd) return "end of input";
  return "'" + text + "'";
}

void ThrowSyntaxError(const std::string& source_name, int line, int column,
                      const std::string& message) {
  throw Error(source_name + ":" + std::to_string(line) + ":" + std::to_string(column) + ": " +
              message);
}

namespace {

bool IsNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}
bool IsDigit(char c) {
  return std::isdigit(static_cast<unsigned char>(c)) != 0;
}
bool IsLetter(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) != 0;
}

class Lexer {
 public:
  Lexer(const std::string& source, const std::string& source_name)
      : source_(source), source_name_(source_name) {}

  std::vector<Token> Run() {
    std::vector<Token> tokens;
    while (true) {
      SkipSpaceAndComments();
      Token token;
      token.line = line_;
      token.column = column_;
      const size_t start = pos_;
      if (pos_ >= source_.size()) {
        tokens.push_back(token);
        return tokens;
      }
      const bool after_dot = !tokens.empty() && tokens.back().IsPunct(".");
      LexToken(&token, after_dot);
      token.text = source_.substr(start, pos_ - start);
      tokens.push_back(std::move(token));
    }
  }

 private:
  char At(size_t offset = 0) const {
    return pos_ + offset < source_.size() ? source_[pos_ + offset] : '\0';
  }

  void Advance(size_t count = 1) {
    for (size_t i = 0; i < count && pos_ < source_.size(); ++i) {
      if (source_[pos_] == '\n') {
        ++line_;
        column_ = 1;
      } else {
        ++column_;
      }
      ++pos_;
    }
  }

  [[noreturn]] void Fail(int line, int column, const std::string& message) const {
    ThrowSyntaxError(source_name_, line, column, message);
  }

  void SkipSpaceAndComments() {
    while (pos_ < source_.size()) {
      if (std::isspace(static_cast<unsigned char>(At()))) {
        Advance();
      } else if (At() == '/' && At(1) == '/') {
        while (pos_ < source_.size() && At() != '\n') Advance();
      } else if (At() == '/' && At(1) == '*') {
        SkipBlockComment();
      } else {
        return;
      }
    }
  }

  // Block comments nest, so a commented-out region may itself hold comments.
  void SkipBlockComment() {
    const int line = line_;
    const int column = column_;
    int depth = 0;
    do {
      if (pos_ >= source_.size()) Fail(line, column, "unterminated comment");
      if (At() == '/' && At(1) == '*') {
        ++depth;
        Advance(2);
      } else if (At() == '*' && At(1) == '/') {
        --depth;
        Advance(2);
      } else {
        Advance();
      }
    } while (depth > 0);
  }

  void LexToken(Token* token, bool after_dot) {
    const char c = At();
    if (c == '%' || c == '@') {
      token->kind = c == '%' ? TokenKind::kLocal : TokenKind::kGlobal;
      Advance();
      token->value = TakeName();
      if (token->value.empty()) {
        Fail(token->line, token->column, std::string("expected a name after '") + c + "'");
      }
    } else if (IsLetter(c) || c == '_') {
      token->kind = TokenKind::kIdentifier;
      token->value = TakeIdentifier();
    } else if (IsDigit(c) || (c == '-' && IsDigit(At(1)))) {
      LexNumber(token, after_dot);
    } else if (c == '"') {
      LexString(token);
    } else {
      LexPunct(token);
    }
  }

  std::string TakeName() {
    const size_t start = pos_;
    while (IsNameChar(At())) Advance();
    return source_.substr(start, pos_ - start);
  }

  // Dotted names (`nn.softmax`, `relay.Constant`) are one identifier.
  std::string TakeIdentifier() {
    std::string name = TakeName();
    while (At() == '.' && IsNameChar(At(1))) {
      Advance();
      name += "." + TakeName();
    }
    return name;
  }

  // Integers (`3`, `-1`, `3i64`, `7u8`) and floats (`1f`, `1.5`, `2e-05f`,
  // `1f64`). After a '.', only digits are read, so `%t.0.1` is two
  // projections rather than `%t.0` and `.1`.
  void LexNumber(Token* token, bool after_dot) {
    const size_t start = pos_;
    if (At() == '-') Advance();
    while (IsDigit(At())) Advance();
    bool fractional = false;
    if (!after_dot) {
      if (At() == '.' && IsDigit(At(1))) {
        fractional = true;
        Advance();
        while (IsDigit(At())) Advance();
      }
      if ((At() == 'e' || At() == 'E') &&
          (IsDigit(At(1)) || ((At(1) == '-' || At(1) == '+') && IsDigit(At(2))))) {
        fractional = true;
        Advance(2);
        while (IsDigit(At())) Advance();
      }
    }
    const std::string digits = source_.substr(start, pos_ - start);
    const size_t suffix_start = pos_;
    while (IsNameChar(At())) Advance();
    const std::string suffix = source_.substr(suffix_start, pos_ - suffix_start);

    token->kind = fractional ? TokenKind::kFloat : TokenKind::kInteger;
    token->dtype = fractional ? DataType::Float32() : DataType::Int32();
    if (!suffix.empty()) {
      token->has_suffix = true;
      token->dtype = SuffixDType(*token, digits, suffix);
      token->kind = token->dtype.is_float() ? TokenKind::kFloat : TokenKind::kInteger;
      if (fractional && !token->dtype.is_float()) {
        Fail(token->line, token->column,
             "literal '" + digits + suffix + "' has a fraction but an integer suffix");
      }
    }
    errno = 0;
    token->number = std::strtod(digits.c_str(), nullptr);
    if (token->kind == TokenKind::kInteger)
      token->integer = std::strtoll(digits.c_str(), nullptr, 10);
    if (errno == ERANGE && (token->kind == TokenKind::kInteger || std::isinf(token->number))) {
      Fail(token->line, token->column, "literal '" + digits + "' is out of range");
    }
  }

  // `f` is float32; `f16`/`f32`/`f64`, `i8`/`i32`/`i64` and `u8` name a dtype.
  DataType SuffixDType(const Token& token, const std::string& digits, const std::string& suffix) {
    static constexpr struct {
      char letter;
      const char* prefix;
    } kFamilies[] = {{'f', "float"}, {'i', "int"}, {'u', "uint"}};
    if (suffix == "f") return DataType::Float32();
    for (const auto& family : kFamilies) {
      if (suffix.size() < 2 || suffix[0] != family.letter) continue;
      DataType dtype;
      if (DataType::TryParse(family.prefix + suffix.substr(1), &dtype)) return dtype;
    }
    Fail(token.line, token.column,
         "bad literal suffix '" + suffix + "' on '" + digits +
             "' (expected f, f16, f32, f64, i8, i32, i64 or u8)");
  }

  void LexString(Token* token) {
    token->kind = TokenKind::kString;
    Advance();
    while (At() != '"') {
      if (pos_ >= source_.size() || At() == '\n') {
        Fail(token->line, token->column, "unterminated string");
      }
      if (At() == '\\') {
        Advance();
        switch (At()) {
          case 'n':
            token->value += '\n';
            break;
          case 't':
            token->value += '\t';
            break;
          case '"':
          case '\\':
            token->value += At();
            break;
          default:
            Fail(line_, column_, std::string("unknown escape '\\") + At() + "' in a string");
        }
      } else {
        token->value += At();
      }
      Advance();
    }
    Advance();
  }

  void LexPunct(Token* token) {
    static constexpr const char* kTwoChar[] = {"=>", "->", "<="};
    static constexpr const char kOneChar[] = "()[]{},;:=.?#";
    token->kind = TokenKind::kPunct;
    for (const char* punct : kTwoChar) {
      if (At() == punct[0] && At(1) == punct[1]) {
        token->value = punct;
        Advance(2);
        return;
      }
    }
    for (const char* p = kOneChar; *p; ++p) {
      if (At() == *p) {
        token->value = std::string(1, *p);
        Advance();
        return;
      }
    }
    Fail(token->line, token->column, std::string("unexpected character '") + At() + "'");
  }

  const std::string& source_;
  const std::string& source_name_;
  size_t pos_ = 0;
  int line_ = 1;
  int column_ = 1;
};

}  // namespace

std::vector<Token> Lex(const std::string& source, const std::string& source_name) {
  return Lexer(source, source_name).Run();
}

}  // namespace nimble::text
