#include "nimble/vm/file_io.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "nimble/vm/error.h"

namespace nimble {

std::vector<std::byte> ReadFileBytes(const std::string& path) {
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path.c_str(), "rb"), std::fclose);
  if (!file) throw Error("cannot open '" + path + "': " + std::strerror(errno));
  std::vector<std::byte> bytes;
  std::byte chunk[1 << 16];
  size_t count;
  while ((count = std::fread(chunk, 1, sizeof(chunk), file.get())) > 0) {
    bytes.insert(bytes.end(), chunk, chunk + count);
  }
  if (std::ferror(file.get())) throw Error("cannot read '" + path + "': " + std::strerror(errno));
  return bytes;
}

void WriteFileBytes(const std::string& path, std::span<const std::byte> bytes) {
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path.c_str(), "wb"), std::fclose);
  if (!file) throw Error("cannot create '" + path + "': " + std::strerror(errno));
  if (std::fwrite(bytes.data(), 1, bytes.size(), file.get()) != bytes.size() ||
      std::fclose(file.release()) != 0) {
    throw Error("cannot write '" + path + "': " + std::strerror(errno));
  }
}

}  // namespace nimble
