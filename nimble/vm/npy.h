// NumPy .npy / .npz files: how model weights and inputs reach the compiler and
// the VM, and how outputs leave them.
//
// Reading accepts format versions 1.0, 2.0 and 3.0 and the dtypes bool
// ('|b1'), int8 ('|i1'), uint8 ('|u1'), int32 ('<i4'), int64 ('<i8'), float16
// ('<f2'), float32 ('<f4') and float64 ('<f8'); '=' (native, i.e. little
// endian here) and, for one-byte types, '|' '<' '>' are accepted as byte-order
// marks. Fortran-order arrays are transposed into C order. Big-endian data
// and other dtypes are rejected. Every malformed input throws nimble::Error
// naming the file and the cause; sizes are checked against the data present
// before anything is allocated.
//
// Writing produces version 1.0 files (2.0 only if the header needs more than
// 64 KiB) with the header padded to a multiple of 64 bytes, as numpy does.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "nimble/vm/tensor.h"

namespace nimble {

Tensor ReadNpy(const std::string& path);
// Parses the bytes of a .npy file; `name_for_errors` names it in messages.
Tensor ParseNpy(std::span<const std::byte> bytes, const std::string& name_for_errors);

void WriteNpy(const std::string& path, const Tensor& tensor);
std::vector<std::byte> SerializeNpy(const Tensor& tensor);

// The arrays of an .npz archive (stored or deflated entries) in file order,
// named without the ".npy" suffix.
std::vector<std::pair<std::string, Tensor>> ReadNpz(const std::string& path);
// Writes an uncompressed archive, like numpy.savez; entry names get ".npy".
void WriteNpz(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors);

}  // namespace nimble
