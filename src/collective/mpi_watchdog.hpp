// A watchdog for the MPI commands: a rank that stops answering (SIGSTOP, a hung node, a
// deadlock) would leave its peers waiting inside a collective forever, spinning at 100%. Each
// rank runs a thread that watches the time since this rank last completed an MPI call; past the
// timeout it prints which rank gave up and calls MPI_Abort, which ends every rank of the job.
//
// The timeout is QEXACT_MPI_TIMEOUT seconds (default 600; 0 turns the watchdog off): the longest
// a rank may go without completing an MPI call, local work between two calls included.
#pragma once
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace qexact::dist {

// QEXACT_MPI_TIMEOUT, checked: a whole number of seconds from 0 to 86400 (qexact::Error otherwise).
std::chrono::seconds mpi_timeout_from_env();

class MpiWatchdog {
 public:
  MpiWatchdog(int rank, std::chrono::seconds timeout);
  ~MpiWatchdog();
  MpiWatchdog(const MpiWatchdog&) = delete;
  MpiWatchdog& operator=(const MpiWatchdog&) = delete;

  // An MPI call of this process completed (called by every wrapper of mpi_world.cpp).
  static void progress();

 private:
  void watch();

  int rank_;
  std::chrono::seconds timeout_;
  std::mutex mutex_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace qexact::dist
