#include "nimble/vm/thread_pool.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <numeric>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "nimble/vm/error.h"
#include "tests/scoped_env.h"

namespace nimble {
namespace {

using ::testing::HasSubstr;

// Runs ParallelFor over [begin, end) and checks that the chunks are disjoint,
// cover the range, and are each at least `grain` long unless the whole range
// ran as one.
void ExpectCovers(ThreadPool& pool, int64_t begin, int64_t end, int64_t grain) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(std::max<int64_t>(end - begin, 0)));
  std::atomic<int64_t> sum{0};
  std::atomic<int> chunks{0};
  std::atomic<int64_t> shortest{INT64_MAX};
  pool.ParallelFor(begin, end, grain, [&](int64_t lo, int64_t hi) {
    int64_t local = 0;
    for (int64_t i = lo; i < hi; ++i) {
      hits[i - begin].fetch_add(1);
      local += i;
    }
    sum += local;
    ++chunks;
    int64_t current = shortest.load();
    while (hi - lo < current && !shortest.compare_exchange_weak(current, hi - lo)) {
    }
  });
  for (const auto& hit : hits) ASSERT_EQ(hit.load(), 1);
  int64_t expected = 0;
  for (int64_t i = begin; i < end; ++i) expected += i;
  EXPECT_EQ(sum.load(), expected);
  if (chunks > 1) {
    EXPECT_GE(shortest.load(), grain);
  }
}

TEST(ThreadPoolTest, ChunksCoverTheRangeExactlyOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.num_threads(), threads);
    for (int64_t grain : {1, 7, 100, 5000}) {
      SCOPED_TRACE("threads " + std::to_string(threads) + ", grain " + std::to_string(grain));
      ExpectCovers(pool, 0, 10000, grain);
      ExpectCovers(pool, -37, 1234, grain);
      ExpectCovers(pool, 5, 6, grain);
    }
  }
}

TEST(ThreadPoolTest, EmptyRangeCallsNothing) {
  ThreadPool pool(2);
  int calls = 0;
  pool.ParallelFor(10, 10, 1, [&](int64_t, int64_t) { ++calls; });
  pool.ParallelFor(10, 3, 1, [&](int64_t, int64_t) { ++calls; });
  EXPECT_EQ(calls, 0);
}

TEST(ThreadPoolTest, SmallRangeRunsInlineAsOneChunk) {
  ThreadPool pool(4);
  std::vector<std::pair<int64_t, int64_t>> calls;
  std::thread::id thread;
  pool.ParallelFor(0, 15, 8, [&](int64_t lo, int64_t hi) {
    calls.emplace_back(lo, hi);
    thread = std::this_thread::get_id();
  });
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0], std::make_pair(int64_t{0}, int64_t{15}));
  EXPECT_EQ(thread, std::this_thread::get_id());
}

TEST(ThreadPoolTest, WorkersTakePart) {
  ThreadPool pool(2);
  // Each of the two chunks waits until the other has started, which only a
  // second thread can make happen.
  std::atomic<int> started{0};
  std::mutex mutex;
  std::set<std::thread::id> threads;
  pool.ParallelFor(0, 2, 1, [&](int64_t, int64_t) {
    {
      std::lock_guard lock(mutex);
      threads.insert(std::this_thread::get_id());
    }
    ++started;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (started.load() < 2 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
  });
  EXPECT_EQ(started.load(), 2);
  EXPECT_EQ(threads.size(), 2u);
}

// The caller runs the first chunk of every job, whatever the workers do, so
// that a kernel cut into one chunk per thread finds its slice of a weight in
// the same core's cache call after call.
TEST(ThreadPoolTest, TheCallerRunsTheFirstChunk) {
  ThreadPool pool(2);
  const std::thread::id caller = std::this_thread::get_id();
  for (int job = 0; job < 2000; ++job) {
    std::atomic<bool> first_on_caller{false};
    pool.ParallelFor(0, 2, 1, [&](int64_t begin, int64_t) {
      if (begin == 0) first_on_caller = std::this_thread::get_id() == caller;
    });
    ASSERT_TRUE(first_on_caller.load()) << "job " << job;
  }
}

TEST(ThreadPoolTest, NestedParallelForRunsInline) {
  ThreadPool pool(4);
  std::atomic<int> inner_calls{0};
  std::atomic<int> mismatched{0};
  pool.ParallelFor(0, 8, 1, [&](int64_t, int64_t) {
    const std::thread::id outer = std::this_thread::get_id();
    pool.ParallelFor(0, 1000, 1, [&](int64_t lo, int64_t hi) {
      ++inner_calls;
      if (lo != 0 || hi != 1000 || std::this_thread::get_id() != outer) ++mismatched;
    });
  });
  EXPECT_EQ(mismatched.load(), 0);
  EXPECT_GE(inner_calls.load(), 1);
  EXPECT_LE(inner_calls.load(), 8);  // one per outer chunk
}

TEST(ThreadPoolTest, ExceptionInAChunkPropagates) {
  ThreadPool pool(3);
  std::atomic<int64_t> ran{0};
  try {
    pool.ParallelFor(0, 1000, 10, [&](int64_t lo, int64_t hi) {
      if (lo <= 500 && 500 < hi) throw std::runtime_error("chunk with 500 failed");
      ran += hi - lo;
    });
    FAIL() << "expected an exception";
  } catch (const std::runtime_error& error) {
    EXPECT_THAT(error.what(), HasSubstr("chunk with 500 failed"));
  }
  EXPECT_LT(ran.load(), 1000);
  // The pool is usable afterwards, and the error does not come back.
  ExpectCovers(pool, 0, 1000, 10);
}

TEST(ThreadPoolTest, ManySmallJobsInARow) {
  ThreadPool pool(2);
  int64_t total = 0;
  for (int job = 0; job < 20000; ++job) {
    std::atomic<int64_t> sum{0};
    pool.ParallelFor(0, 4, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) sum += i + job;
    });
    total += sum.load() - 4 * job;
  }
  EXPECT_EQ(total, 20000 * 6);
}

TEST(ThreadPoolTest, ConcurrentCallersShareThePool) {
  ThreadPool pool(3);
  std::atomic<int> wrong{0};
  std::vector<std::thread> callers;
  for (int caller = 0; caller < 4; ++caller) {
    callers.emplace_back([&, caller] {
      for (int job = 0; job < 500; ++job) {
        std::atomic<int64_t> sum{0};
        pool.ParallelFor(0, 100, 3, [&](int64_t lo, int64_t hi) {
          for (int64_t i = lo; i < hi; ++i) sum += i * caller;
        });
        if (sum.load() != 4950 * caller) ++wrong;
      }
    });
  }
  for (std::thread& caller : callers) caller.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST(ThreadPoolTest, RejectsBadSizes) {
  EXPECT_THROW(ThreadPool(0), Error);
  EXPECT_THROW(ThreadPool(ThreadPool::kMaxThreads + 1), Error);
}

// NIMBLE_NUM_THREADS for one test.
class ScopedNumThreads : public testing::ScopedEnv {
 public:
  explicit ScopedNumThreads(const char* value) : ScopedEnv("NIMBLE_NUM_THREADS", value) {}
};

TEST(ThreadPoolTest, DefaultNumThreadsReadsTheEnvironment) {
  {
    ScopedNumThreads scoped("3");
    EXPECT_EQ(DefaultNumThreads(), 3);
  }
  {
    ScopedNumThreads scoped(nullptr);
    EXPECT_EQ(DefaultNumThreads(),
              std::max(1, static_cast<int>(std::thread::hardware_concurrency())));
  }
  for (const char* bad : {"0", "-2", "two", "4x", "", "100000"}) {
    ScopedNumThreads scoped(bad);
    try {
      DefaultNumThreads();
      ADD_FAILURE() << "accepted NIMBLE_NUM_THREADS=" << bad;
    } catch (const Error& error) {
      EXPECT_THAT(error.what(), HasSubstr("NIMBLE_NUM_THREADS"));
      EXPECT_THAT(error.what(), HasSubstr("'" + std::string(bad) + "'"));
    }
  }
}

TEST(ThreadPoolTest, GlobalPoolRunsWork) {
  EXPECT_GE(ThreadPool::Global().num_threads(), 1);
  std::atomic<int64_t> sum{0};
  ParallelFor(0, 100000, 1000, [&](int64_t lo, int64_t hi) {
    int64_t local = 0;
    for (int64_t i = lo; i < hi; ++i) local += i;
    sum += local;
  });
  EXPECT_EQ(sum.load(), int64_t{100000} * 99999 / 2);
}

}  // namespace
}  // namespace nimble
