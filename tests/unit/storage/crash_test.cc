// Crash and disk-full tests: each writer runs in a forked child so that it
// can be killed (SIGKILL at a random point) or given a file-size limit
// without touching the test process. Checks run in forked children too, so
// the test process itself never starts storage threads before a fork.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <string>

#include "storage/storage.h"
#include "storage_test_util.h"

namespace magnetar::storage {
namespace {

using common::ErrorCode;
using common::Slice;
using common::Status;
using testing::TempDir;

// Entry contents the checker can recompute; every 7th entry is large so that
// kills often land in the middle of a multi-page write.
std::string crash_payload(LedgerId ledger, EntryId e) {
  return testing::entry_payload(ledger, e, e % 7 == 0 ? 30000 : 100);
}

// Runs `fn` in a child process; returns its exit code (or 128 + signal).
int run_in_child(const std::function<int()>& fn) {
  pid_t pid = ::fork();
  if (pid == 0) {
    int code = fn();
    std::fflush(stderr);
    ::_exit(code);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

struct Confirmation {
  uint64_t ledger;
  int64_t entry;
};

// Child: appends to ledger `round + 1` (new) and to ledger `round` (reopened
// from the previous round) with fsync=always, writing every completed add to
// `fd`, until killed. Bounded: it stops adding after kMaxEntries.
[[noreturn]] void writer_child(const std::string& dir, int round, int fd) {
  constexpr int kWindow = 128;
  constexpr EntryId kMaxEntries = 200000;
  StorageOptions o = testing::small_options(dir);
  o.segment_size = 1 << 20;  // several rollovers per round
  auto storage = make_local_storage(o);
  if (!storage->start().is_ok()) ::_exit(10);
  std::vector<LedgerWriter> writers;
  auto fresh = testing::create_ledger(*storage, static_cast<LedgerId>(round + 1));
  if (!fresh) ::_exit(11);
  writers.push_back(*fresh);
  if (round > 0) {
    auto old = testing::open_ledger(*storage, static_cast<LedgerId>(round));
    if (old) writers.push_back(*old);
  }
  std::mutex mu;
  std::condition_variable cv;
  int outstanding = 0;
  std::vector<EntryId> next(writers.size());
  for (size_t i = 0; i < writers.size(); ++i) {
    auto lac = storage->last_confirmed(writers[i].ledger);
    next[i] = lac.is_ok() ? *lac + 1 : 0;
  }
  for (EntryId n = 0; n < kMaxEntries; ++n) {
    size_t i = static_cast<size_t>(n) % writers.size();
    {
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return outstanding < kWindow; });
      ++outstanding;
    }
    LedgerWriter w = writers[i];
    EntryId e = next[i]++;
    storage->add_entry(w, e, Slice::copy_of(crash_payload(w.ledger, e)), [&, w, e](Status st) {
      if (!st.is_ok()) ::_exit(12);
      Confirmation c{w.ledger, e};
      if (::write(fd, &c, sizeof(c)) != sizeof(c)) ::_exit(13);
      std::lock_guard lock(mu);
      --outstanding;
      cv.notify_one();
    });
  }
  ::pause();
  ::_exit(0);
}

// Child: reopens and checks that every confirmed entry is there, intact and
// in order, and that nothing past them is torn. Returns 0 when all holds.
int check_child(const std::string& dir, const std::map<LedgerId, EntryId>& confirmed) {
  auto storage = make_local_storage(testing::small_options(dir));
  Status st = storage->start();
  if (!st.is_ok()) {
    std::fprintf(stderr, "reopen failed: %s\n", st.to_string().c_str());
    return 20;
  }
  for (const auto& [ledger, max_confirmed] : confirmed) {
    auto lac = storage->last_confirmed(ledger);
    if (!lac.is_ok() || *lac < max_confirmed) {
      std::fprintf(stderr, "ledger %llu: last confirmed %lld < %lld completed\n",
                   static_cast<unsigned long long>(ledger), static_cast<long long>(lac.value_or(-2)),
                   static_cast<long long>(max_confirmed));
      return 21;
    }
    if (*lac < 0) continue;
    auto entries = testing::read_all(*storage, ledger, 0, *lac);
    if (!entries.is_ok()) {
      std::fprintf(stderr, "ledger %llu: read failed: %s\n", static_cast<unsigned long long>(ledger),
                   entries.status().to_string().c_str());
      return 22;
    }
    for (EntryId e = 0; e <= *lac; ++e) {
      const Entry& got = (*entries)[static_cast<size_t>(e)];
      if (got.id != e || got.data.view() != crash_payload(ledger, e)) {
        std::fprintf(stderr, "ledger %llu entry %lld: wrong contents\n", static_cast<unsigned long long>(ledger),
                     static_cast<long long>(e));
        return 23;
      }
    }
  }
  storage->stop();
  return 0;
}

TEST(StorageCrashTest, EveryCompletedAddSurvivesSigkill) {
  constexpr int kRounds = 20;
  TempDir dir;
  std::mt19937_64 rng(std::random_device{}());
  std::map<LedgerId, EntryId> confirmed;
  for (int round = 0; round < kRounds; ++round) {
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(fds[0]);
      writer_child(dir.path(), round, fds[1]);
    }
    ::close(fds[1]);
    // Let it complete a random number of adds, then kill it mid-flight.
    const size_t target = std::uniform_int_distribution<size_t>(0, 3000)(rng);
    size_t seen = 0;
    auto record = [&](const Confirmation& c) {
      auto [it, inserted] = confirmed.emplace(c.ledger, c.entry);
      if (!inserted) it->second = std::max(it->second, c.entry);
      ++seen;
    };
    Confirmation c{};
    while (seen < target) {
      pollfd p{fds[0], POLLIN, 0};
      int ready = ::poll(&p, 1, 60000);
      ASSERT_EQ(ready, 1) << "writer made no progress in round " << round;
      ssize_t n = ::read(fds[0], &c, sizeof(c));
      ASSERT_EQ(n, static_cast<ssize_t>(sizeof(c))) << "writer died in round " << round;
      record(c);
    }
    ::usleep(static_cast<useconds_t>(std::uniform_int_distribution<int>(0, 2000)(rng)));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "writer exited by itself with " << WEXITSTATUS(status);
    // Every add reported before the kill completed, so it must be there.
    while (::read(fds[0], &c, sizeof(c)) == static_cast<ssize_t>(sizeof(c))) record(c);
    ::close(fds[0]);
    int rc = run_in_child([&] { return check_child(dir.path(), confirmed); });
    ASSERT_EQ(rc, 0) << "check failed after round " << round << " (" << seen << " adds completed)";
  }
}

TEST(StorageDiskFullTest, AFullDiskFailsTheWriterAndReadsGoOn) {
  TempDir dir;
  int rc = run_in_child([&]() -> int {
    ::signal(SIGXFSZ, SIG_IGN);
    rlimit limit{};
    ::getrlimit(RLIMIT_FSIZE, &limit);
    const rlimit unlimited = limit;
    limit.rlim_cur = 2 << 20;  // no file may grow past 2 MiB: a segment "fills the disk"
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) return 30;
    auto storage = make_local_storage(testing::small_options(dir.path()));
    if (!storage->start().is_ok()) return 31;
    auto w = testing::create_ledger(*storage, 1);
    if (!w) return 32;
    EntryId e = 0;
    Status st;
    for (; e < 10000; ++e) {
      st = testing::add_entry(*storage, *w, e, Slice::copy_of(testing::entry_payload(1, e, 1000)));
      if (!st.is_ok()) break;
    }
    if (st.code() != ErrorCode::kIoError) {
      std::fprintf(stderr, "add %lld: %s\n", static_cast<long long>(e), st.to_string().c_str());
      return 33;
    }
    const EntryId written = e;
    // The ledger is broken: no later add succeeds, so it never has a hole.
    if (testing::add_entry(*storage, *w, e, Slice::copy_of("x")).is_ok()) return 34;
    // Reads keep working.
    auto all = testing::read_all(*storage, 1, 0, written - 1);
    if (!all || static_cast<EntryId>(all->size()) != written) return 35;
    for (EntryId i = 0; i < written; ++i) {
      if ((*all)[static_cast<size_t>(i)].data.view() != testing::entry_payload(1, i, 1000)) return 36;
    }
    // Space comes back: the journal goes on with a new ledger.
    if (::setrlimit(RLIMIT_FSIZE, &unlimited) != 0) return 37;
    auto last = testing::close_ledger(*storage, 1);
    if (!last || *last != written - 1) return 38;
    auto w2 = testing::create_ledger(*storage, 2);
    if (!w2) return 39;
    if (!testing::add_entry(*storage, *w2, 0, Slice::copy_of("after")).is_ok()) return 40;
    storage->stop();
    // And everything that completed is there after a restart.
    auto reopened = make_local_storage(testing::small_options(dir.path()));
    if (Status again = reopened->start(); !again.is_ok()) {
      std::fprintf(stderr, "reopen: %s\n", again.to_string().c_str());
      return 41;
    }
    auto again = testing::read_all(*reopened, 1, 0, written - 1);
    if (!again || static_cast<EntryId>(again->size()) != written) return 42;
    auto info = reopened->ledger_info(1);
    if (!info || !info->closed || info->last_confirmed != written - 1) return 43;
    if (reopened->last_confirmed(2).value_or(-1) != 0) return 44;
    reopened->stop();
    return 0;
  });
  EXPECT_EQ(rc, 0);
}

}  // namespace
}  // namespace magnetar::storage
