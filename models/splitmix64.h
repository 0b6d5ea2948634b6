// SplitMix64 (Steele, Lea and Flood 2014): the generator behind every
// reproducible value Nimble makes (seeded weights and word vectors,
// synthetic corpora). Written out rather than taken from <random>, whose
// distributions differ between standard libraries: a seed gives the same
// values on every platform. Every state, consecutive seeds included, gives a
// well-mixed stream.
#pragma once

#include <cstdint>

namespace nimble::models {

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t state) : state_(state) {}

  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

  // Uniform in [0, bound), by rejection so that no value is favoured.
  uint64_t Below(uint64_t bound) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
    uint64_t value;
    do {
      value = Next();
    } while (value >= limit);
    return value % bound;
  }

  // Uniform in [-scale, scale): 24 random bits make 2u - 1 exact in float,
  // and scaling a value below 1 by `scale` stays below `scale`.
  float Symmetric(float scale) {
    const float unit = static_cast<float>(Next() >> 40) * 0x1p-24f;
    return scale * (2.0f * unit - 1.0f);
  }

 private:
  uint64_t state_;
};

}  // namespace nimble::models
