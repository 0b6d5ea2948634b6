#include "nimble/vm/thread_pool.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <string>
#include <string_view>

#include "nimble/vm/error.h"

namespace nimble {
namespace {

// Chunks per thread: a little over-splitting lets the caller pick up the work
// of a worker that is slow to wake, at a small cost per claim.
constexpr int64_t kChunksPerThread = 4;
// How long an idle worker polls for the next job before it sleeps.
constexpr std::chrono::microseconds kWorkerSpin{200};
// How many polls the caller makes before it yields while workers finish.
constexpr int kCallerSpins = 4096;
// The chunk index of a job whose chunks are all done: above any chunk count.
constexpr uint32_t kClosed = UINT32_MAX;

// True on pool workers, and on a caller while it runs a parallel job.
thread_local bool t_in_parallel_region = false;

uint32_t Generation(uint64_t state) {
  return static_cast<uint32_t>(state >> 32);
}
uint64_t MakeState(uint32_t generation, uint32_t chunk) {
  return (uint64_t{generation} << 32) | chunk;
}

void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace

int DefaultNumThreads() {
  const char* text = std::getenv("NIMBLE_NUM_THREADS");
  if (text == nullptr) {
    return std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1,
                      ThreadPool::kMaxThreads);
  }
  const std::string_view value(text);
  int threads = 0;
  const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), threads);
  if (error != std::errc() || end != value.data() + value.size() || threads < 1 ||
      threads > ThreadPool::kMaxThreads) {
    throw Error("NIMBLE_NUM_THREADS must be an integer between 1 and " +
                std::to_string(ThreadPool::kMaxThreads) + ", got '" + std::string(value) + "'");
  }
  return threads;
}

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads < 1 || num_threads > kMaxThreads) {
    throw Error("a thread pool needs between 1 and " + std::to_string(kMaxThreads) +
                " threads, got " + std::to_string(num_threads));
  }
  workers_.reserve(num_threads - 1);
  for (int i = 1; i < num_threads; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  {
    std::lock_guard lock(mutex_);
    wake_.notify_all();
  }
  for (std::thread& worker : workers_) worker.join();
}

ThreadPool& ThreadPool::Global() {
  static ThreadPool pool(DefaultNumThreads());
  return pool;
}

void ThreadPool::Run(int64_t begin, int64_t end, int64_t grain, RangeFn fn, const void* context) {
  const int64_t length = end - begin;
  if (length <= 0) return;
  const int64_t chunks =
      std::min(length / std::max<int64_t>(grain, 1), kChunksPerThread * num_threads());
  if (chunks < 2 || workers_.empty() || t_in_parallel_region ||
      busy_.exchange(true, std::memory_order_acquire)) {
    fn(context, begin, end);
    return;
  }
  struct Region {
    explicit Region(std::atomic<bool>& busy) : busy(busy) { t_in_parallel_region = true; }
    ~Region() {
      t_in_parallel_region = false;
      busy.store(false, std::memory_order_release);
    }
    std::atomic<bool>& busy;
  } region(busy_);

  const uint32_t generation = Generation(state_.load(std::memory_order_relaxed)) + 1;
  fn_ = fn;
  context_ = context;
  begin_ = begin;
  length_ = length;
  failed_.store(false, std::memory_order_relaxed);
  done_chunks_.store(0, std::memory_order_relaxed);
  num_chunks_.store(static_cast<uint32_t>(chunks), std::memory_order_release);
  // seq_cst store then load, against the sleeper's increment then load in
  // WaitForJob: one of the two sides sees the other, so no wake-up is lost.
  state_.store(MakeState(generation, 1));
  if (sleepers_.load() > 0) {
    std::lock_guard lock(mutex_);
    wake_.notify_all();
  }

  RunChunk(0);  // published as claimed: see the header
  RunChunks(generation);
  for (int spins = 0; done_chunks_.load(std::memory_order_acquire) != chunks; ++spins) {
    if (spins < kCallerSpins) {
      CpuRelax();
    } else {
      std::this_thread::yield();
    }
  }
  state_.store(MakeState(generation, kClosed), std::memory_order_release);

  if (failed_.load(std::memory_order_relaxed)) {
    std::exception_ptr error;
    {
      std::lock_guard lock(mutex_);
      std::swap(error, error_);
    }
    std::rethrow_exception(error);
  }
}

void ThreadPool::RunChunks(uint32_t generation) {
  uint64_t state = state_.load(std::memory_order_acquire);
  while (Generation(state) == generation) {
    const uint32_t chunk = static_cast<uint32_t>(state);
    // Acquire: a worker that sees the next job's count also sees this job
    // closed, so its compare-exchange below fails.
    if (chunk >= num_chunks_.load(std::memory_order_acquire)) return;
    if (state_.compare_exchange_weak(state, state + 1, std::memory_order_acq_rel,
                                     std::memory_order_acquire)) {
      RunChunk(chunk);
      state = state_.load(std::memory_order_acquire);
    }
  }
}

void ThreadPool::RunChunk(uint32_t chunk) {
  const int64_t chunks = num_chunks_.load(std::memory_order_relaxed);
  const int64_t size = length_ / chunks;
  const int64_t extra = length_ % chunks;  // the first `extra` chunks get one more
  const int64_t lo = begin_ + chunk * size + std::min<int64_t>(chunk, extra);
  const int64_t hi = lo + size + (chunk < extra ? 1 : 0);
  if (!failed_.load(std::memory_order_relaxed)) {
    try {
      fn_(context_, lo, hi);
    } catch (...) {
      std::lock_guard lock(mutex_);
      if (!failed_.exchange(true, std::memory_order_relaxed)) error_ = std::current_exception();
    }
  }
  done_chunks_.fetch_add(1, std::memory_order_release);
}

void ThreadPool::WorkerLoop() {
  t_in_parallel_region = true;
  uint32_t seen = 0;
  while (true) {
    WaitForJob(seen);
    if (stop_.load(std::memory_order_acquire)) return;
    seen = Generation(state_.load(std::memory_order_acquire));
    RunChunks(seen);
  }
}

void ThreadPool::WaitForJob(uint32_t seen) {
  auto published = [&] {
    return Generation(state_.load()) != seen || stop_.load(std::memory_order_acquire);
  };
  const auto deadline = std::chrono::steady_clock::now() + kWorkerSpin;
  for (int polls = 1;; ++polls) {
    if (published()) return;
    CpuRelax();
    if (polls % 16 == 0 && std::chrono::steady_clock::now() > deadline) break;
  }
  std::unique_lock lock(mutex_);
  sleepers_.fetch_add(1);
  wake_.wait(lock, published);
  sleepers_.fetch_sub(1);
}

}  // namespace nimble
