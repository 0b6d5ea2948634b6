#include "nimble/vm/cpu_features.h"

#include <cstdint>
#include <cstdlib>
#include <sstream>

#include "nimble/vm/error.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace nimble::vm {
namespace {

constexpr CpuFeature kFeatures[] = {CpuFeature::kAvx512Bf16, CpuFeature::kAmxBf16};

#if defined(__x86_64__)
// XCR0: the register states the operating system saves, without which an
// instruction set's registers cannot be used even where cpuid lists it.
uint64_t EnabledStates() {
  unsigned eax, ebx, ecx, edx;
  __cpuid(1, eax, ebx, ecx, edx);
  if (!(ecx & (1u << 27))) return 0;  // no OSXSAVE: no xgetbv
  uint32_t low, high;
  __asm__("xgetbv" : "=a"(low), "=d"(high) : "c"(0));
  return (uint64_t{high} << 32) | low;
}

bool CpuidHas(CpuFeature feature) {
  unsigned eax, ebx, ecx, edx;
  if (__get_cpuid_max(0, nullptr) < 7) return false;
  const uint64_t states = EnabledStates();
  constexpr uint64_t kAvx512States = 0xe6;       // SSE, AVX, opmask, ZMM_Hi256, Hi16_ZMM
  constexpr uint64_t kAmxStates = 0x3ull << 17;  // XTILECFG, XTILEDATA
  switch (feature) {
    case CpuFeature::kAvx512Bf16:
      __cpuid_count(7, 1, eax, ebx, ecx, edx);
      return (eax & (1u << 5)) && (states & kAvx512States) == kAvx512States;
    case CpuFeature::kAmxBf16:
      __cpuid_count(7, 0, eax, ebx, ecx, edx);
      return (edx & (1u << 22)) && (edx & (1u << 24)) && (states & kAmxStates) == kAmxStates;
  }
  return false;
}
#else
bool CpuidHas(CpuFeature) {
  return false;
}
#endif

// Whether NIMBLE_CPU_FEATURES_OFF names `feature`.
bool TurnedOff(CpuFeature feature) {
  const char* value = std::getenv("NIMBLE_CPU_FEATURES_OFF");
  std::stringstream list(value ? value : "");
  bool off = false;
  for (std::string name; std::getline(list, name, ',');) {
    if (name.empty()) continue;
    bool known = false;
    for (CpuFeature candidate : kFeatures) {
      if (name != CpuFeatureName(candidate)) continue;
      known = true;
      off = off || candidate == feature;
    }
    if (!known) {
      throw Error("NIMBLE_CPU_FEATURES_OFF: unknown CPU feature '" + name +
                  "' (known: avx512_bf16, amx_bf16)");
    }
  }
  return off;
}

}  // namespace

std::string_view CpuFeatureName(CpuFeature feature) {
  switch (feature) {
    case CpuFeature::kAvx512Bf16:
      return "avx512_bf16";
    case CpuFeature::kAmxBf16:
      return "amx_bf16";
  }
  return "?";
}

bool HostHas(CpuFeature feature) {
  static const bool kHas[] = {CpuidHas(kFeatures[0]), CpuidHas(kFeatures[1])};
  return kHas[static_cast<int>(feature)] && !TurnedOff(feature);
}

void RequireBf16Products(const std::string& what) {
  if (HostHas(CpuFeature::kAvx512Bf16)) return;
  const char* off = std::getenv("NIMBLE_CPU_FEATURES_OFF");
  throw Error(what + " needs the CPU feature avx512_bf16, which this host does not have" +
              (off && *off ? std::string(" (NIMBLE_CPU_FEATURES_OFF=") + off + ")" : "") +
              "; use --precision fp32");
}

}  // namespace nimble::vm
