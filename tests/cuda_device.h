// What tests of the nvidia target need to know about this machine: whether a
// CUDA device runs here, and whether the toolkit's PTX assembler accepts the
// PTX code generation writes.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <span>
#include <string>

#include "nimble/vm/device.h"
#include "nimble/vm/error.h"

namespace nimble::testing {

// Why the CUDA device cannot be used here ("no CUDA device: ..."), or "" when
// it can.
inline std::string CudaMissing() {
  try {
    DeviceAPI::Get(Device{DeviceType::kCUDA, 0});
    return "";
  } catch (const Error& error) {
    return error.what();
  }
}

// The CUDA toolkit's ptxas, or "" when it is not installed.
inline std::string Ptxas() {
  for (const char* path : {"/usr/local/cuda/bin/ptxas", "/usr/bin/ptxas"}) {
    if (access(path, X_OK) == 0) return path;
  }
  return "";
}

// What ptxas says when it rejects `ptx` for `arch` ("sm_80"), or "" when it
// assembles it.
inline std::string PtxasRejects(std::span<const std::byte> ptx, const std::string& arch) {
  char dir[] = "/tmp/nimble-ptxas-XXXXXX";
  if (!mkdtemp(dir)) return "cannot make a temporary directory";
  const std::string input = std::string(dir) + "/kernels.ptx";
  const std::string log = std::string(dir) + "/log";
  std::ofstream(input, std::ios::binary)
      .write(reinterpret_cast<const char*>(ptx.data()), static_cast<std::streamsize>(ptx.size()));
  const std::string command =
      Ptxas() + " -arch=" + arch + " " + input + " -o " + dir + "/kernels.cubin > " + log + " 2>&1";
  const int status = std::system(command.c_str());
  std::ifstream in(log);
  std::string output((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::system(("rm -rf " + std::string(dir)).c_str());
  return status == 0 ? "" : "ptxas -arch=" + arch + " failed: " + output;
}

}  // namespace nimble::testing
