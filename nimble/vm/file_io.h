// Whole-file reads and writes with errors that name the path and the cause.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace nimble {

std::vector<std::byte> ReadFileBytes(const std::string& path);
void WriteFileBytes(const std::string& path, std::span<const std::byte> bytes);
inline void WriteFileText(const std::string& path, std::string_view text) {
  WriteFileBytes(path, std::as_bytes(std::span(text.data(), text.size())));
}

}  // namespace nimble
