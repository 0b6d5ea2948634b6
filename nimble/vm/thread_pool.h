// The process's one pool of worker threads, shared by every kernel, so that
// kernels running one after another never ask for more threads than there are
// cores. Its size is NIMBLE_NUM_THREADS, or the number of hardware threads.
//
// ParallelFor splits a range into chunks. The calling thread runs the first
// (so a job cut into one chunk per thread keeps its first slice on the
// caller's core, and in its cache, call after call); it and the workers claim
// the rest one at a time. It runs the whole range on the calling thread
// when the range is too small to split, when the pool has one thread, when it
// is called from inside a parallel region (no nested oversubscription), and
// when another thread is using the pool at that moment. Workers spin briefly
// after a job, so back-to-back kernels do not pay a wake-up, then sleep.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace nimble {

class ThreadPool {
 public:
  static constexpr int kMaxThreads = 1024;

  // `num_threads` counts the calling thread: the pool starts num_threads - 1
  // workers. Throws nimble::Error unless it is between 1 and kMaxThreads.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // The process-wide pool, started on first use with DefaultNumThreads().
  static ThreadPool& Global();

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(chunk_begin, chunk_end) over disjoint chunks covering
  // [begin, end), each at least `grain` long, and returns when all are done.
  // The first exception a chunk throws is rethrown here once every chunk has
  // finished or been skipped.
  template <typename Fn>
  void ParallelFor(int64_t begin, int64_t end, int64_t grain, const Fn& fn) {
    Run(begin, end, grain, &CallRange<Fn>, &fn);
  }

 private:
  using RangeFn = void (*)(const void* context, int64_t chunk_begin, int64_t chunk_end);
  template <typename Fn>
  static void CallRange(const void* context, int64_t chunk_begin, int64_t chunk_end) {
    (*static_cast<const Fn*>(context))(chunk_begin, chunk_end);
  }

  void Run(int64_t begin, int64_t end, int64_t grain, RangeFn fn, const void* context);
  void WorkerLoop();
  // Claims and runs chunks of the job of `generation` until none is left.
  void RunChunks(uint32_t generation);
  void RunChunk(uint32_t chunk);
  // Returns once a job newer than `seen` is published or the pool stops.
  void WaitForJob(uint32_t seen);

  std::vector<std::thread> workers_;
  std::atomic<bool> busy_{false};  // a caller owns the pool
  std::atomic<bool> stop_{false};

  // The current job: generation in the high 32 bits, the next unclaimed chunk
  // in the low 32. A claim is a compare-exchange on both, so a worker that
  // wakes late can never claim a chunk of a newer job by mistake.
  std::atomic<uint64_t> state_{0};
  std::atomic<uint32_t> num_chunks_{0};
  std::atomic<uint32_t> done_chunks_{0};
  // Job parameters, written before `state_` publishes the job and read only
  // after a successful claim.
  RangeFn fn_ = nullptr;
  const void* context_ = nullptr;
  int64_t begin_ = 0;
  int64_t length_ = 0;

  std::atomic<bool> failed_{false};
  std::exception_ptr error_;  // guarded by mutex_

  std::mutex mutex_;
  std::condition_variable wake_;
  std::atomic<int> sleepers_{0};  // changed under mutex_
};

// NIMBLE_NUM_THREADS when set (a positive integer, else nimble::Error), the
// number of hardware threads otherwise.
int DefaultNumThreads();

// ThreadPool::Global().ParallelFor(begin, end, grain, fn).
template <typename Fn>
void ParallelFor(int64_t begin, int64_t end, int64_t grain, const Fn& fn) {
  ThreadPool::Global().ParallelFor(begin, end, grain, fn);
}

}  // namespace nimble
