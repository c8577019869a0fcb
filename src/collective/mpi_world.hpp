// The MPI world of one `qexact` process started by mpirun, and the few collectives the
// distributed commands use, on bytes.
//
// Failure discipline: a rank that fails alone would leave its peers blocked in the next
// collective. So every step that can fail (reading the plan, checking shapes, preparing data)
// runs inside agree_on(): each rank runs it, then all ranks exchange a failure flag and the
// failing rank's message, and every rank throws the same qexact::Error. Work between two
// agreements that throws anyway (a defect, not bad input) ends the job with MPI_Abort.
#pragma once
#include <mpi.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "collective/mpi_watchdog.hpp"

namespace qexact::dist {

// MPI_Init on construction, MPI_Finalize on destruction; one per process. Between the two a
// watchdog (mpi_watchdog.hpp) aborts the job when this rank waits too long on an MPI call.
class MpiSession {
 public:
  MpiSession();
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  int rank() const { return rank_; }
  int world() const { return world_; }
  MPI_Comm comm() const { return MPI_COMM_WORLD; }

 private:
  int rank_ = 0;
  int world_ = 1;
  std::unique_ptr<MpiWatchdog> watchdog_;
};

// Starts MPI, runs `body` and returns its status. A qexact::Error that leaves `body` (every
// rank throws it together, from agree_on) is printed by every rank as "qexact: error: ..." and
// gives status 2; the ranks then meet once more before MPI_Finalize, so that mpirun, which ends
// the job at the first non-zero exit, cannot cut a peer off before it has printed.
int run_mpi_command(const std::function<int(const MpiSession&)>& body);

// Runs `step` on every rank. When it throws on any rank, every rank throws a qexact::Error:
// when all ranks failed, the lowest rank's message (they checked the same shared facts); else
// "rank R: <message>" of the lowest failing rank R. A non-qexact exception counts as a failure.
void agree_on(const MpiSession& s, const std::function<void()>& step);

// Runs `body`; if it throws, prints "qexact: error: rank R: ..." and calls MPI_Abort (peers may
// be waiting in a collective that this rank will never reach).
void or_abort(const MpiSession& s, const std::function<void()>& body);

// The MPI library's name and version ("Open MPI v4.1.4") and this rank's host name.
std::string mpi_library_version();
std::string processor_name();

// Every rank's bytes, concatenated in rank order; `counts` receives each rank's byte count.
std::vector<std::uint8_t> all_gather_v(const MpiSession& s, std::span<const std::uint8_t> mine,
                                       std::vector<std::int64_t>* counts = nullptr);
// The same when every rank's count is already known (counts[r] bytes from rank r): one call.
void all_gather_v_known(const MpiSession& s, std::span<const std::uint8_t> mine, const std::vector<std::int64_t>& counts,
                        std::vector<std::uint8_t>& out);
// All ranks send `bytes` bytes; recv holds world * bytes.
void all_gather_equal(const MpiSession& s, const void* send, std::size_t bytes, void* recv);
// Sends chunk j of `send` (chunk bytes each) to rank j; recv chunk i comes from rank i.
void all_to_all_equal(const MpiSession& s, const void* send, std::size_t chunk, void* recv);
// Sends send[j] to rank j; returns what each rank sent here, in rank order.
std::vector<std::vector<std::uint8_t>> all_to_all_v(const MpiSession& s,
                                                    const std::vector<std::vector<std::uint8_t>>& send);
// In-place element-wise max over ranks.
void all_reduce_max(const MpiSession& s, std::vector<float>& values);
void all_reduce_max(const MpiSession& s, std::vector<double>& values);
void all_reduce_max(const MpiSession& s, std::vector<std::int64_t>& values);
void all_reduce_max(const MpiSession& s, std::vector<std::int32_t>& values);
void all_reduce_sum(const MpiSession& s, std::vector<std::int64_t>& values);
void barrier(const MpiSession& s);

}  // namespace qexact::dist
