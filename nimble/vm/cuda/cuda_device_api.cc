// The CUDA device: memory through the CUDA runtime, with one stream per device
// on which copies, kernel launches and cuBLAS calls are queued. Generated PTX
// is loaded with the driver API (cuModuleLoadDataEx), whose entry points the
// runtime hands out (cudaGetDriverEntryPointByVersion), so nothing links
// libcuda. Built as the loadable module libnimble_cuda.so (see
// cuda_device_api.h); it does not link the runtime library, only its headers.
#include "nimble/vm/cuda/cuda_device_api.h"

#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "nimble/vm/device.h"
#include "nimble/vm/error.h"

namespace nimble {
namespace {

constexpr size_t kCudaMallocAlignment = 256;

std::string DeviceName(int32_t id) {
  return "cuda(" + std::to_string(id) + ")";
}

// "out of memory (cudaErrorMemoryAllocation, error 2)", plus what to do about
// the errors that mean the machine has no usable GPU.
std::string Describe(cudaError_t status) {
  std::string text = std::string(cudaGetErrorString(status)) + " (" + cudaGetErrorName(status) +
                     ", error " + std::to_string(static_cast<int>(status)) + ")";
  if (status == cudaErrorInsufficientDriver) {
    text += ": the NVIDIA driver (libcuda.so.1) is missing or older than the CUDA runtime";
  } else if (status == cudaErrorNoDevice) {
    text += ": the driver sees no GPU";
  }
  return text;
}

void Check(cudaError_t status, const std::string& what) {
  if (status != cudaSuccess) {
    cudaGetLastError();  // clears the sticky status of non-fatal errors
    throw Error("CUDA " + what + " failed: " + Describe(status));
  }
}

// Whether `host` is page-locked (cudaHostAlloc, cudaHostRegister): memory
// the GPU reads by DMA after a copy call returns. Unknown counts as locked.
bool PageLocked(const void* host) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, host) != cudaSuccess) {
    cudaGetLastError();
    return true;
  }
  return attributes.type == cudaMemoryTypeHost;
}

void Check(cublasStatus_t status, const std::string& what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw Error("cuBLAS " + what + " failed: " + cublasGetStatusString(status) + " (status " +
                std::to_string(static_cast<int>(status)) + ")");
  }
}

// The driver API functions used, from the CUDA runtime (no link to libcuda).
struct DriverApi {
  CUresult (*module_load_data_ex)(CUmodule*, const void*, unsigned, CUjit_option*, void**);
  CUresult (*module_unload)(CUmodule);
  CUresult (*module_get_function)(CUfunction*, CUmodule, const char*);
  CUresult (*launch_kernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                            unsigned, CUstream, void**, void**);
  CUresult (*get_error_string)(CUresult, const char**);

  static const DriverApi& Get() {
    static const DriverApi api = [] {
      DriverApi loaded;
      Entry("cuModuleLoadDataEx", &loaded.module_load_data_ex);
      Entry("cuModuleUnload", &loaded.module_unload);
      Entry("cuModuleGetFunction", &loaded.module_get_function);
      Entry("cuLaunchKernel", &loaded.launch_kernel);
      Entry("cuGetErrorString", &loaded.get_error_string);
      return loaded;
    }();
    return api;
  }

  void Check(CUresult status, const std::string& what) const {
    if (status == CUDA_SUCCESS) return;
    const char* text = nullptr;
    get_error_string(status, &text);
    throw Error("CUDA " + what + " failed: " + (text ? text : "unknown error") + " (CUresult " +
                std::to_string(static_cast<int>(status)) + ")");
  }

 private:
  template <typename Function>
  static void Entry(const char* symbol, Function* function) {
    void* address = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    nimble::Check(
        cudaGetDriverEntryPointByVersion(symbol, &address, 12000, cudaEnableDefault, &found),
        std::string("lookup of the driver's ") + symbol);
    if (found != cudaDriverEntryPointSuccess || !address) {
      throw Error(std::string("the CUDA driver has no ") + symbol);
    }
    *function = reinterpret_cast<Function>(address);
  }
};

// Generated PTX loaded as a driver module; launches and temporaries go on the
// device's stream.
class CudaCode final : public DeviceCode {
 public:
  CudaCode(std::span<const std::byte> ptx, cudaStream_t stream, int32_t device_id)
      : stream_(stream), device_id_(device_id) {
    // The driver wants NUL-terminated PTX; its JIT log says what failed.
    std::string text(reinterpret_cast<const char*>(ptx.data()), ptx.size());
    std::vector<char> log(8192, '\0');
    CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void* values[] = {log.data(), reinterpret_cast<void*>(static_cast<uintptr_t>(log.size()))};
    const DriverApi& driver = DriverApi::Get();
    const CUresult status = driver.module_load_data_ex(&module_, text.c_str(), 2, options, values);
    if (status != CUDA_SUCCESS) {
      const char* reason = nullptr;
      driver.get_error_string(status, &reason);
      throw Error("CUDA cannot load the executable's PTX (" + std::to_string(ptx.size()) +
                  " bytes) on cuda(" + std::to_string(device_id) +
                  "): " + (reason ? reason : "unknown error") + "; JIT log: " + log.data());
    }
  }

  ~CudaCode() override { DriverApi::Get().module_unload(module_); }

  void Launch(const char* kernel, int64_t blocks, int32_t block_threads, void** params) override {
    if (blocks <= 0) return;
    Select();
    // CUDA's limits for a one-dimensional grid of one-dimensional blocks.
    if (blocks > 0x7fffffff || block_threads < 1 || block_threads > 1024) {
      throw Error("GPU kernel " + std::string(kernel) + ": " + std::to_string(blocks) +
                  " blocks of " + std::to_string(block_threads) +
                  " threads are more than one launch holds");
    }
    const DriverApi& driver = DriverApi::Get();
    driver.Check(driver.launch_kernel(Function(kernel), static_cast<unsigned>(blocks), 1, 1,
                                      static_cast<unsigned>(block_threads), 1, 1, 0, stream_,
                                      params, nullptr),
                 std::string("launch of ") + kernel);
  }

  void* Alloc(int64_t bytes) override {
    Select();
    void* data = nullptr;
    Check(cudaMallocAsync(&data, static_cast<size_t>(std::max<int64_t>(bytes, 1)), stream_),
          "cudaMallocAsync of " + std::to_string(bytes) + " bytes on " + DeviceName(device_id_));
    return data;
  }

  void Free(void* data) override {
    Select();
    Check(cudaFreeAsync(data, stream_), "cudaFreeAsync");
  }

 private:
  void Select() const {
    Check(cudaSetDevice(device_id_), "cudaSetDevice on " + DeviceName(device_id_));
  }

  CUfunction Function(const char* kernel) {
    auto [slot, inserted] = functions_.try_emplace(kernel, nullptr);
    if (inserted) {
      const DriverApi& driver = DriverApi::Get();
      const CUresult status = driver.module_get_function(&slot->second, module_, kernel);
      if (status != CUDA_SUCCESS) functions_.erase(slot);
      driver.Check(status, std::string("lookup of GPU kernel ") + kernel);
    }
    return slot->second;
  }

  CUmodule module_ = nullptr;
  cudaStream_t stream_;
  int32_t device_id_;
  std::unordered_map<std::string, CUfunction> functions_;
};

class CudaDeviceAPI final : public DeviceAPI {
 public:
  explicit CudaDeviceAPI(int32_t id) : id_(id) {
    Check(cudaSetDevice(id_), "cudaSetDevice on " + DeviceName(id_));
    Check(cudaStreamCreate(&stream_), "cudaStreamCreate on " + DeviceName(id_));
    // Generated kernels' temporaries come from cudaMallocAsync. By default
    // its pool hands freed memory back to the driver whenever the stream is
    // synchronised (after each sentence, and after each kernel under
    // --profile), and the next temporary is mapped afresh: keep it instead.
    cudaMemPool_t pool = nullptr;
    Check(cudaDeviceGetDefaultMemPool(&pool, id_), "cudaDeviceGetDefaultMemPool");
    uint64_t keep_all = UINT64_MAX;
    Check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all),
          "cudaMemPoolSetAttribute(release threshold)");
    Check(cublasCreate(&blas_), "cublasCreate on " + DeviceName(id_));
    Check(cublasSetStream(blas_, stream_), "cublasSetStream");
  }

  std::string Describe() override {
    cudaDeviceProp properties{};
    Check(cudaGetDeviceProperties(&properties, id_), "cudaGetDeviceProperties");
    char memory[32];
    std::snprintf(memory, sizeof(memory), "%.1f GiB",
                  static_cast<double>(properties.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
    return std::string(properties.name) + ", sm_" + std::to_string(properties.major) +
           std::to_string(properties.minor) + ", " + memory;
  }

  std::unique_ptr<DeviceCode> LoadCode(std::span<const std::byte> code) override {
    Select();
    return std::make_unique<CudaCode>(code, stream_, id_);
  }

  DeviceKernelFunc LibraryKernel(const std::string& name) override {
    if (name == "nn.dense.cublas") return &CudaDeviceAPI::MatMulKernel<false>;
    if (name == "nn.batch_matmul.cublas") return &CudaDeviceAPI::MatMulKernel<true>;
    return nullptr;
  }

  void* Alloc(size_t bytes, size_t alignment) override {
    if (alignment > kCudaMallocAlignment) {
      throw Error("unsupported alignment " + std::to_string(alignment) + " on " + DeviceName(id_) +
                  " (cudaMalloc aligns to 256 bytes)");
    }
    Select();
    void* data = nullptr;
    Check(cudaMalloc(&data, bytes == 0 ? 1 : bytes),
          "cudaMalloc of " + std::to_string(bytes) + " bytes on " + DeviceName(id_));
    return data;
  }

  // Errors are ignored: at process exit the runtime may already be unloading,
  // and memory that cannot be freed cannot be recovered anyway.
  void Free(void* data) override {
    if (cudaSetDevice(id_) == cudaSuccess) cudaFree(data);
    cudaGetLastError();
  }

  // A copy into host memory is complete on return: the host reads it next. A
  // copy from pageable host memory returns once the driver has staged the
  // bytes (cudaMemcpyAsync's documented behaviour), so the host buffer may be
  // reused at once while the host runs ahead of the GPU: an LSTM's token index,
  // copied to the GPU every token, no longer waits for the previous token's
  // kernels. From page-locked memory the driver reads later, so that copy
  // waits. Copies between GPUs are queued on this device's stream.
  void Copy(void* dst, Device dst_device, const void* src, Device src_device,
            size_t bytes) override {
    if (bytes == 0) return;
    const bool dst_host = dst_device.type == DeviceType::kCPU;
    const bool src_host = src_device.type == DeviceType::kCPU;
    if (dst_host && src_host) {
      std::memcpy(dst, src, bytes);
      return;
    }
    Select();
    const std::string what = "copy of " + std::to_string(bytes) + " bytes to " +
                             (dst_host ? std::string("cpu") : DeviceName(dst_device.id)) +
                             " from " + (src_host ? std::string("cpu") : DeviceName(src_device.id));
    if (!dst_host && !src_host && dst_device.id != src_device.id) {
      Check(cudaMemcpyPeerAsync(dst, dst_device.id, src, src_device.id, bytes, stream_), what);
      return;
    }
    const cudaMemcpyKind kind = dst_host   ? cudaMemcpyDeviceToHost
                                : src_host ? cudaMemcpyHostToDevice
                                           : cudaMemcpyDeviceToDevice;
    Check(cudaMemcpyAsync(dst, src, bytes, kind, stream_), what);
    if (dst_host || (src_host && PageLocked(src))) Check(cudaStreamSynchronize(stream_), what);
  }

  void Synchronize() override {
    Select();
    Check(cudaStreamSynchronize(stream_), "synchronize of " + DeviceName(id_));
  }

 private:
  // nn.dense (x [..., k], w [n, k] -> [..., n], the leading dimensions of x
  // as m rows) or nn.batch_matmul (a [ba, m, k]
  // or [ba, k, m], b [bb, n, k] or [bb, k, n] -> [max(ba, bb), m, n], a batch
  // of 1 broadcast) in float32 on the stream. Row-major C = op(A) op(B) is
  // column-major C^T = op(B)^T op(A)^T, which cuBLAS computes in place.
  template <bool kBatched>
  static int MatMulKernel(void* state, DLTensor* const* args, int32_t num_args) {
    const auto& bound = *static_cast<const DeviceKernelState*>(state);
    const char* name = kBatched ? "nn.batch_matmul.cublas" : "nn.dense.cublas";
    try {
      if (num_args != 3) throw Error("expected 3 arguments, got " + std::to_string(num_args));
      for (int32_t i = 0; i < 3; ++i) {
        const DLTensor& t = *args[i];
        const bool rank_ok = kBatched ? t.ndim == 3 : (i == 1 ? t.ndim == 2 : t.ndim >= 1);
        if (t.device.device_type != kDLCUDA || t.dtype.code != kDLFloat || t.dtype.bits != 32 ||
            !rank_ok || t.strides) {
          throw Error("argument " + std::to_string(i) + " (rank " + std::to_string(t.ndim) +
                      ") is not a compact float32 tensor of the op's rank on the GPU");
        }
      }
      const DLTensor& a = *args[0];
      const DLTensor& b = *args[1];
      const DLTensor& c = *args[2];
      const bool transpose_a = kBatched && bound.transpose_a;
      const bool transpose_b = !kBatched || bound.transpose_b;
      // [rows, columns] of a, b and c, batches aside.
      const auto matrix = [](const DLTensor& t, bool batched) {
        int64_t rows = 1;
        for (int32_t d = batched ? 1 : 0; d + 1 < t.ndim; ++d) rows *= t.shape[d];
        return std::pair<int64_t, int64_t>(rows, t.shape[t.ndim - 1]);
      };
      const auto [a_rows, a_cols] = matrix(a, kBatched);
      const auto [b_rows, b_cols] = matrix(b, kBatched);
      const auto [c_rows, c_cols] = matrix(c, kBatched);
      const int64_t m = transpose_a ? a_cols : a_rows;
      const int64_t k = transpose_a ? a_rows : a_cols;
      const int64_t n = transpose_b ? b_rows : b_cols;
      const int64_t batch_a = kBatched ? a.shape[0] : 1;
      const int64_t batch_b = kBatched ? b.shape[0] : 1;
      const int64_t batch = std::max(batch_a, batch_b);
      if ((transpose_b ? b_cols : b_rows) != k || c_rows != m || c_cols != n ||
          (kBatched && (c.shape[0] != batch || (batch_a != batch && batch_a != 1) ||
                        (batch_b != batch && batch_b != 1)))) {
        throw Error("shapes do not multiply");
      }
      if (m == 0 || n == 0 || batch == 0) return 0;
      auto* api = static_cast<CudaDeviceAPI*>(bound.api);
      api->Select();
      const float one = 1.0f;
      const float zero = 0.0f;
      const auto data = [](const DLTensor& t) {
        return reinterpret_cast<float*>(static_cast<char*>(t.data) + t.byte_offset);
      };
      Check(cublasSgemmStridedBatched(api->blas_, transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                      transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(n),
                                      static_cast<int>(m), static_cast<int>(k), &one, data(b),
                                      static_cast<int>(b_cols), batch_b == 1 ? 0 : n * k, data(a),
                                      static_cast<int>(a_cols), batch_a == 1 ? 0 : m * k, &zero,
                                      data(c), static_cast<int>(n), m * n, static_cast<int>(batch)),
            "sgemm");
      return 0;
    } catch (const std::exception& error) {
      bound.set_error((std::string(name) + ": " + error.what()).c_str());
      return 1;
    }
  }

  // The current device is per host thread; make it ours before each call.
  void Select() { Check(cudaSetDevice(id_), "cudaSetDevice on " + DeviceName(id_)); }

  int32_t id_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
};

DeviceAPI* CreateDeviceAPI(int32_t device_id) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();
    throw Error("cudaGetDeviceCount failed: " + Describe(status));
  }
  if (count == 0) throw Error("the driver reports 0 GPUs");
  if (device_id < 0 || device_id >= count) {
    throw Error(DeviceName(device_id) + " does not exist (this machine has " +
                std::to_string(count) + " GPU" + (count == 1 ? "" : "s") + ")");
  }
  return new CudaDeviceAPI(device_id);
}

}  // namespace
}  // namespace nimble

extern "C" __attribute__((visibility("default"))) nimble::DeviceAPI* NimbleCudaCreateDeviceAPI(
    int32_t device_id, char* error, size_t error_size) {
  static_assert(std::is_same_v<decltype(&NimbleCudaCreateDeviceAPI), NimbleCudaDeviceAPIFactory>);
  try {
    return nimble::CreateDeviceAPI(device_id);
  } catch (const std::exception& e) {
    std::snprintf(error, error_size, "%s", e.what());
    return nullptr;
  }
}
