// Text plumbing the dataset loaders share: reading a file as lines, splitting
// a line into fields, strict integer parsing, UTF-8 decoding and the
// "path:LINE: message" errors every loader reports. Internal to
// harness/datasets.
#pragma once

#include <charconv>
#include <cstdint>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "nimble/vm/error.h"

namespace nimble::datasets::text {

// `where` is "path:LINE" (or any other location); the message follows it.
[[noreturn]] inline void Fail(const std::string& where, const std::string& message) {
  throw Error(where + ": " + message);
}

inline std::string Location(const std::string& path, size_t line) {
  return path + ":" + std::to_string(line);
}

// The lines of `path` without their terminators ("\n" or "\r\n"), a leading
// UTF-8 byte-order mark dropped, and without the empty lines that end the file
// (the real SOStr.txt and STree.txt end in one).
inline std::vector<std::string> ReadLines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open " + path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw Error("cannot read " + path);
  std::string content = std::move(buffer).str();
  constexpr std::string_view kByteOrderMark = "\xEF\xBB\xBF";
  if (content.starts_with(kByteOrderMark)) content.erase(0, kByteOrderMark.size());
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < content.size()) {
    size_t end = content.find('\n', start);
    if (end == std::string::npos) end = content.size();
    size_t stop = end;
    if (stop > start && content[stop - 1] == '\r') --stop;
    lines.emplace_back(content, start, stop - start);
    start = end + 1;
  }
  while (!lines.empty() && lines.back().empty()) lines.pop_back();
  return lines;
}

inline std::vector<std::string_view> Split(std::string_view line, char separator) {
  std::vector<std::string_view> fields;
  size_t start = 0;
  while (true) {
    size_t end = line.find(separator, start);
    if (end == std::string_view::npos) {
      fields.push_back(line.substr(start));
      return fields;
    }
    fields.push_back(line.substr(start, end - start));
    start = end + 1;
  }
}

// The whole of `field` as a decimal integer, or nothing (no sign, spaces or
// trailing characters accepted).
inline std::optional<int64_t> ParseInt(std::string_view field) {
  int64_t value = 0;
  auto [end, error] = std::from_chars(field.data(), field.data() + field.size(), value);
  if (field.empty() || field[0] == '-' || error != std::errc() ||
      end != field.data() + field.size()) {
    return std::nullopt;
  }
  return value;
}

// Decodes the code point at `text[pos]` and advances `pos` past it. Returns
// false (leaving `pos`) on a malformed sequence: a stray continuation byte, a
// truncated sequence, an overlong form, a surrogate or a value past U+10FFFF.
inline bool DecodeUtf8(std::string_view text, size_t& pos, char32_t& code_point) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  unsigned char lead = byte(pos);
  size_t length = 0;
  char32_t value = 0;
  char32_t smallest = 0;
  if (lead < 0x80) {
    code_point = lead;
    ++pos;
    return true;
  } else if ((lead & 0xE0) == 0xC0) {
    length = 2, value = lead & 0x1F, smallest = 0x80;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3, value = lead & 0x0F, smallest = 0x800;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4, value = lead & 0x07, smallest = 0x10000;
  } else {
    return false;
  }
  if (pos + length > text.size()) return false;
  for (size_t i = 1; i < length; ++i) {
    if ((byte(pos + i) & 0xC0) != 0x80) return false;
    value = (value << 6) | (byte(pos + i) & 0x3F);
  }
  if (value < smallest || value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF)) return false;
  code_point = value;
  pos += length;
  return true;
}

// The byte offset of the first malformed UTF-8 sequence, or nothing.
inline std::optional<size_t> FindInvalidUtf8(std::string_view text) {
  size_t pos = 0;
  char32_t ignored;
  while (pos < text.size()) {
    if (!DecodeUtf8(text, pos, ignored)) return pos;
  }
  return std::nullopt;
}

inline void AppendUtf8(char32_t code_point, std::string& out) {
  if (code_point < 0x80) {
    out += static_cast<char>(code_point);
  } else if (code_point < 0x800) {
    out += static_cast<char>(0xC0 | (code_point >> 6));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  } else if (code_point < 0x10000) {
    out += static_cast<char>(0xE0 | (code_point >> 12));
    out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (code_point >> 18));
    out += static_cast<char>(0x80 | ((code_point >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  }
}

}  // namespace nimble::datasets::text
