#include "collective/mpi_world.hpp"

#include <climits>
#include <cstdio>
#include <exception>
#include <new>
#include <stdexcept>

#include "collective/mpi_watchdog.hpp"
#include "qexact/error.hpp"

namespace qexact::dist {
namespace {

// MPI counts and displacements are int: a message past 2 GiB is refused, not truncated.
int as_count(std::size_t bytes, const char* what) {
  if (bytes > static_cast<std::size_t>(INT_MAX))
    fail(ErrorKind::bad_argument, std::string(what) + ": " + std::to_string(bytes) +
                                      " bytes exceed what one MPI call can move (2^31 - 1)");
  return static_cast<int>(bytes);
}

void check(int rc, const char* call) {
  MpiWatchdog::progress();
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw std::runtime_error(std::string(call) + " failed: " + std::string(text, static_cast<std::size_t>(len)));
}

constexpr int kNotAnError = -1;
constexpr int kInternal = 1000;
constexpr int kOutOfMemory = 1001;

}  // namespace

MpiSession::MpiSession() {
  const std::chrono::seconds timeout = mpi_timeout_from_env();  // a bad value fails before MPI starts
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) throw std::logic_error("MPI is initialized twice in one process");
  check(MPI_Init(nullptr, nullptr), "MPI_Init");
  // Errors come back as codes and become exceptions (check) instead of killing the job silently.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &world_);
  watchdog_ = std::make_unique<MpiWatchdog>(rank_, timeout);
}

MpiSession::~MpiSession() {
  watchdog_.reset();
  MPI_Finalize();
}

int run_mpi_command(const std::function<int(const MpiSession&)>& body) {
  MpiSession s;
  auto report = [&](const char* prefix, std::string message, int status) {
    for (char& c : message)
      if (c == '\n') c = ' ';
    std::fprintf(stderr, "qexact: %s%s\n", prefix, message.c_str());
    std::fflush(stderr);
    MPI_Barrier(s.comm());
    return status;
  };
  try {
    return body(s);
  } catch (const Error& e) {
    return report("error: ", e.what(), 2);
  } catch (const std::bad_alloc&) {
    return report("error: ", "out of memory", 2);
  } catch (const std::exception& e) {
    return report("internal error: ", e.what(), 1);
  }
}

void agree_on(const MpiSession& s, const std::function<void()>& step) {
  std::string message;
  int kind = kNotAnError;
  try {
    step();
  } catch (const Error& e) {
    message = e.what();
    kind = static_cast<int>(e.kind());
  } catch (const std::bad_alloc&) {
    message = "out of memory";
    kind = kOutOfMemory;
  } catch (const std::exception& e) {
    // Without a prefix: run_mpi_command's report says "internal error: " once.
    message = e.what();
    kind = kInternal;
  }
  const int mine[2] = {kind == kNotAnError ? s.world() : s.rank(), kind == kNotAnError ? 0 : 1};
  int lowest = 0, failures = 0;
  check(MPI_Allreduce(&mine[0], &lowest, 1, MPI_INT, MPI_MIN, s.comm()), "MPI_Allreduce");
  check(MPI_Allreduce(&mine[1], &failures, 1, MPI_INT, MPI_SUM, s.comm()), "MPI_Allreduce");
  if (failures == 0) return;

  int length = static_cast<int>(message.size());
  check(MPI_Bcast(&kind, 1, MPI_INT, lowest, s.comm()), "MPI_Bcast");
  check(MPI_Bcast(&length, 1, MPI_INT, lowest, s.comm()), "MPI_Bcast");
  message.resize(static_cast<std::size_t>(length));
  check(MPI_Bcast(message.data(), length, MPI_CHAR, lowest, s.comm()), "MPI_Bcast");
  if (failures < s.world()) message = "rank " + std::to_string(lowest) + ": " + message;
  if (kind == kInternal) throw std::runtime_error(message);
  if (kind == kOutOfMemory) throw Error(ErrorKind::io, message);
  throw Error(static_cast<ErrorKind>(kind), message);
}

void or_abort(const MpiSession& s, const std::function<void()>& body) {
  try {
    body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "qexact: error: rank %d: %s (aborting every rank: the others may be inside a collective)\n",
                 s.rank(), e.what());
    std::fflush(stderr);
    MPI_Abort(s.comm(), 2);
  }
}

std::string mpi_library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(text, &len);
  std::string v(text, static_cast<std::size_t>(len));
  // Open MPI appends ", package: ..., ident: ..., repo rev: ...": the name and version come first.
  const auto cut = v.find_first_of(",\n");
  if (cut != std::string::npos) v.resize(cut);
  return v;
}

std::string processor_name() {
  char text[MPI_MAX_PROCESSOR_NAME];
  int len = 0;
  MPI_Get_processor_name(text, &len);
  return std::string(text, static_cast<std::size_t>(len));
}

std::vector<std::uint8_t> all_gather_v(const MpiSession& s, std::span<const std::uint8_t> mine,
                                       std::vector<std::int64_t>* counts_out) {
  const int count = as_count(mine.size(), "all_gather_v");
  std::vector<int> counts(static_cast<std::size_t>(s.world()));
  check(MPI_Allgather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, s.comm()), "MPI_Allgather");
  std::vector<int> displs(counts.size());
  std::size_t total = 0;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    displs[r] = as_count(total, "all_gather_v displacement");
    total += static_cast<std::size_t>(counts[r]);
  }
  as_count(total, "all_gather_v total");
  std::vector<std::uint8_t> out(total);
  check(MPI_Allgatherv(mine.data(), count, MPI_BYTE, out.data(), counts.data(), displs.data(), MPI_BYTE, s.comm()),
        "MPI_Allgatherv");
  if (counts_out) counts_out->assign(counts.begin(), counts.end());
  return out;
}

void all_gather_v_known(const MpiSession& s, std::span<const std::uint8_t> mine, const std::vector<std::int64_t>& counts,
                        std::vector<std::uint8_t>& out) {
  std::vector<int> c(counts.size()), displs(counts.size());
  std::size_t total = 0;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    c[r] = as_count(static_cast<std::size_t>(counts[r]), "all_gather_v");
    displs[r] = as_count(total, "all_gather_v displacement");
    total += static_cast<std::size_t>(counts[r]);
  }
  if (counts.size() != static_cast<std::size_t>(s.world()) || c[static_cast<std::size_t>(s.rank())] != static_cast<int>(mine.size()))
    throw std::logic_error("all_gather_v_known: the counts do not match this rank's buffer");
  out.resize(total);
  check(MPI_Allgatherv(mine.data(), static_cast<int>(mine.size()), MPI_BYTE, out.data(), c.data(), displs.data(),
                       MPI_BYTE, s.comm()),
        "MPI_Allgatherv");
}

void all_gather_equal(const MpiSession& s, const void* send, std::size_t bytes, void* recv) {
  as_count(bytes * static_cast<std::size_t>(s.world()), "all_gather");
  check(MPI_Allgather(send, as_count(bytes, "all_gather"), MPI_BYTE, recv, static_cast<int>(bytes), MPI_BYTE, s.comm()),
        "MPI_Allgather");
}

void all_to_all_equal(const MpiSession& s, const void* send, std::size_t chunk, void* recv) {
  as_count(chunk * static_cast<std::size_t>(s.world()), "all_to_all");
  check(MPI_Alltoall(send, as_count(chunk, "all_to_all"), MPI_BYTE, recv, static_cast<int>(chunk), MPI_BYTE, s.comm()),
        "MPI_Alltoall");
}

std::vector<std::vector<std::uint8_t>> all_to_all_v(const MpiSession& s,
                                                    const std::vector<std::vector<std::uint8_t>>& send) {
  const auto world = static_cast<std::size_t>(s.world());
  if (send.size() != world) throw std::logic_error("all_to_all_v needs one buffer per rank");
  std::vector<int> send_counts(world), send_displs(world), recv_counts(world), recv_displs(world);
  std::vector<std::uint8_t> flat;
  for (std::size_t j = 0; j < world; ++j) {
    send_displs[j] = as_count(flat.size(), "all_to_all_v displacement");
    send_counts[j] = as_count(send[j].size(), "all_to_all_v");
    flat.insert(flat.end(), send[j].begin(), send[j].end());
  }
  check(MPI_Alltoall(send_counts.data(), 1, MPI_INT, recv_counts.data(), 1, MPI_INT, s.comm()), "MPI_Alltoall");
  std::size_t total = 0;
  for (std::size_t i = 0; i < world; ++i) {
    recv_displs[i] = as_count(total, "all_to_all_v displacement");
    total += static_cast<std::size_t>(recv_counts[i]);
  }
  std::vector<std::uint8_t> recv(total);
  check(MPI_Alltoallv(flat.data(), send_counts.data(), send_displs.data(), MPI_BYTE, recv.data(), recv_counts.data(),
                      recv_displs.data(), MPI_BYTE, s.comm()),
        "MPI_Alltoallv");
  std::vector<std::vector<std::uint8_t>> out(world);
  for (std::size_t i = 0; i < world; ++i)
    out[i].assign(recv.begin() + recv_displs[i], recv.begin() + recv_displs[i] + recv_counts[i]);
  return out;
}

void all_reduce_max(const MpiSession& s, std::vector<float>& v) {
  check(MPI_Allreduce(MPI_IN_PLACE, v.data(), as_count(v.size(), "all_reduce"), MPI_FLOAT, MPI_MAX, s.comm()),
        "MPI_Allreduce");
}
void all_reduce_max(const MpiSession& s, std::vector<double>& v) {
  check(MPI_Allreduce(MPI_IN_PLACE, v.data(), as_count(v.size(), "all_reduce"), MPI_DOUBLE, MPI_MAX, s.comm()),
        "MPI_Allreduce");
}
void all_reduce_max(const MpiSession& s, std::vector<std::int64_t>& v) {
  check(MPI_Allreduce(MPI_IN_PLACE, v.data(), as_count(v.size(), "all_reduce"), MPI_INT64_T, MPI_MAX, s.comm()),
        "MPI_Allreduce");
}
void all_reduce_max(const MpiSession& s, std::vector<std::int32_t>& v) {
  check(MPI_Allreduce(MPI_IN_PLACE, v.data(), as_count(v.size(), "all_reduce"), MPI_INT32_T, MPI_MAX, s.comm()),
        "MPI_Allreduce");
}
void all_reduce_sum(const MpiSession& s, std::vector<std::int64_t>& v) {
  check(MPI_Allreduce(MPI_IN_PLACE, v.data(), as_count(v.size(), "all_reduce"), MPI_INT64_T, MPI_SUM, s.comm()),
        "MPI_Allreduce");
}
void barrier(const MpiSession& s) { check(MPI_Barrier(s.comm()), "MPI_Barrier"); }

}  // namespace qexact::dist
