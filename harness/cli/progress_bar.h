// A one-line progress bar on stderr, redrawn in place; only on a terminal,
// so that logs and an agent's captured output stay clean.
#pragma once

#include <cstddef>
#include <iomanip>
#include <iostream>
#include <string>

namespace nimble::bench {

class ProgressBar {
 public:
  explicit ProgressBar(bool enabled) : enabled_(enabled) {}
  ~ProgressBar() {
    if (drawn_) std::cerr << "\r\033[K" << std::flush;
  }
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  void operator()(const std::string& phase, size_t done, size_t total) {
    if (!enabled_ || total == 0) return;
    constexpr size_t kWidth = 30;
    const size_t filled = done * kWidth / total;
    std::cerr << "\r" << std::left << std::setw(12) << phase << " [" << std::string(filled, '#')
              << std::string(kWidth - filled, '.') << "] " << done << "/" << total << "\033[K"
              << std::flush;
    drawn_ = true;
  }

 private:
  bool enabled_;
  bool drawn_ = false;
};

}  // namespace nimble::bench
