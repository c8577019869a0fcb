#include "collective/mpi_watchdog.hpp"

#include <mpi.h>

#include <atomic>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "qexact/error.hpp"

namespace qexact::dist {
namespace {

using Clock = std::chrono::steady_clock;

std::atomic<Clock::rep> g_last_progress{0};

constexpr long long kMaxTimeout = 86400;
constexpr long long kDefaultTimeout = 600;

}  // namespace

std::chrono::seconds mpi_timeout_from_env() {
  const char* text = std::getenv("QEXACT_MPI_TIMEOUT");
  if (!text || !*text) return std::chrono::seconds(kDefaultTimeout);
  long long v = -1;
  const char* end = text + std::strlen(text);
  const auto [p, ec] = std::from_chars(text, end, v);
  if (ec != std::errc() || p != end || v < 0 || v > kMaxTimeout)
    fail(ErrorKind::bad_argument, std::string("QEXACT_MPI_TIMEOUT='") + text + "' is not a whole number of seconds from 0 to " +
                                      std::to_string(kMaxTimeout) + " (0: no watchdog)");
  return std::chrono::seconds(v);
}

void MpiWatchdog::progress() { g_last_progress.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed); }

MpiWatchdog::MpiWatchdog(int rank, std::chrono::seconds timeout) : rank_(rank), timeout_(timeout) {
  progress();
  if (timeout_.count() > 0) thread_ = std::thread([this] { watch(); });
}

MpiWatchdog::~MpiWatchdog() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void MpiWatchdog::watch() {
  // Look a few times per timeout, at least once a second.
  const auto period = std::min<Clock::duration>(std::chrono::seconds(1), timeout_ / 4);
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_cv_.wait_for(lock, period, [this] { return stop_; })) {
    const Clock::time_point last{Clock::duration(g_last_progress.load(std::memory_order_relaxed))};
    if (Clock::now() - last < timeout_) continue;
    std::fprintf(stderr,
                 "qexact: error: rank %d: no MPI call completed for %lld s: a rank stopped answering; aborting every "
                 "rank (QEXACT_MPI_TIMEOUT sets the limit)\n",
                 rank_, static_cast<long long>(timeout_.count()));
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 3);
    std::_Exit(3);  // MPI_Abort does not return; should it, this rank still ends.
  }
}

}  // namespace qexact::dist
