// The entry point of the CUDA module (libnimble_cuda.so), which DeviceAPI::Get
// loads with dlopen so that the runtime itself never links the CUDA libraries.
#pragma once

#include <cstddef>
#include <cstdint>

namespace nimble {
class DeviceAPI;
}

extern "C" {
// Creates the API of cuda(`device_id`). On failure (no driver, no GPU, no such
// device) returns null and writes the reason, NUL-terminated, to `error`.
// The module is built by the same compiler as the runtime, so the C++ object
// it returns is usable across the boundary.
typedef nimble::DeviceAPI* (*NimbleCudaDeviceAPIFactory)(int32_t device_id, char* error,
                                                         size_t error_size);
}

namespace nimble {
inline constexpr char kCudaModuleName[] = "libnimble_cuda.so";
inline constexpr char kCudaFactorySymbol[] = "NimbleCudaCreateDeviceAPI";
}  // namespace nimble
