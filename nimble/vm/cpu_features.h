// The CPU features that decide whether a reduced-precision kernel can run on
// this host, read once from cpuid (with the operating system's consent for
// the registers they use), less those named in the environment variable
// NIMBLE_CPU_FEATURES_OFF: a comma-separated list of /proc/cpuinfo names
// ("avx512_bf16,amx_bf16") that the process treats as missing, so that a
// test or a user can see what a host without them does, on one that has them.
#pragma once

#include <string>
#include <string_view>

namespace nimble::vm {

enum class CpuFeature {
  kAvx512Bf16,  // AVX512-BF16: vdpbf16ps, vcvtne2ps2bf16 (Cooper Lake, Zen 4, Sapphire Rapids)
  kAmxBf16,     // AMX tiles with bf16 products (Sapphire Rapids and later)
};

// The feature's name as /proc/cpuinfo spells it.
std::string_view CpuFeatureName(CpuFeature feature);

// Whether kernels may use `feature` here (NIMBLE_CPU_FEATURES_OFF applied).
// Throws nimble::Error naming an unknown name in NIMBLE_CPU_FEATURES_OFF.
bool HostHas(CpuFeature feature);

// The CPU feature bfloat16 matrix products need (AVX512-BF16; an AMX host
// has it too), checked: throws nimble::Error "WHAT needs the CPU feature
// avx512_bf16, which this host does not have ..." when it is missing, so a
// bf16 program never quietly runs in float32.
void RequireBf16Products(const std::string& what);

}  // namespace nimble::vm
