#include "checkpoint/stream_tensor.hpp"

#include <omp.h>

#include <atomic>
#include <exception>
#include <span>

namespace qexact::checkpoint::detail {
namespace {

// Progress is reported each time about this many input bytes of chunks have finished.
constexpr std::uint64_t kBandBytes = std::uint64_t{16} << 20;

std::span<std::uint8_t> sized(std::vector<std::uint8_t>& v, std::uint64_t n) {
  if (v.size() < n) v.resize(static_cast<std::size_t>(n));
  return {v.data(), static_cast<std::size_t>(n)};
}

bool is_refusal(const Error& e) { return e.kind() == ErrorKind::bad_argument || e.kind() == ErrorKind::bad_input; }

}  // namespace

bool streams_by_chunk(const Contract& c, const Shape& x) {
  if (x.empty() || shape_numel(x) == 0) return false;
  return output_specs(c, x).size() == 2 && !chunking(c, x).whole_scale;
}

ChunkStreamer::ChunkStreamer(const Contract& c, const io::InputFile& in, const RunOptions& run)
    : c_(c), file_(in), run_(run) {}

bool ChunkStreamer::run(DType dtype, const Shape& shape, const std::vector<OutputSpec>& outputs,
                        const TensorPlace& at, io::StagedFile* out, TensorSummary& row,
                        const std::function<void(std::uint64_t)>& progress) {
  const Chunking ch = chunking(c_, shape);
  const std::uint64_t isz = dtype_size(dtype), psz = dtype_size(outputs[0].dtype), ssz = dtype_size(outputs[1].dtype);
  const std::uint64_t chunk_bytes = static_cast<std::uint64_t>(ch.per_chunk * ch.unit) * isz;
  const std::int64_t band = static_cast<std::int64_t>(std::max<std::uint64_t>(1, kBandBytes / chunk_bytes));
  // No more threads than chunks: a region's idle threads would only wait (or spin) at its end,
  // once per tensor, which is most of the time of a checkpoint of many small tensors.
  const int threads = static_cast<int>(std::min<std::int64_t>(resolve_threads(run_), ch.chunks));
  if (workers_.size() < static_cast<std::size_t>(threads)) workers_.resize(static_cast<std::size_t>(threads));
  const RunOptions one{run_.engine, 1};
  std::vector<Sums> sums(static_cast<std::size_t>(ch.chunks));
  std::atomic<bool> refused{false};
  std::exception_ptr error;  // the first failure that is not a refusal: carried out of the region

  const auto bytes_done = [&](std::int64_t chunks) {
    return std::min<std::uint64_t>(static_cast<std::uint64_t>(chunks) * chunk_bytes,
                                   static_cast<std::uint64_t>(shape_numel(shape)) * isz);
  };
  std::atomic<std::int64_t> finished{0};
  std::atomic<bool> stop{false};  // a refusal or an error: the remaining chunks are not started
  const auto fail_with = [&](std::exception_ptr e) {
#pragma omp critical(qexact_stream_error)
    if (!error) error = e;
    stop.store(true, std::memory_order_relaxed);
  };
  // One region per tensor, its chunks handed out one at a time; the thread that called reports
  // progress (it is the region's thread 0) when a band's worth of chunks has finished since.
#pragma omp parallel num_threads(threads)
  {
    const bool reporter = omp_get_thread_num() == 0 && static_cast<bool>(progress);
    std::int64_t reported = 0;
#pragma omp for schedule(dynamic)
    for (std::int64_t k = 0; k < ch.chunks; ++k) {
      if (stop.load(std::memory_order_relaxed)) continue;
      try {
        Worker& w = workers_[static_cast<std::size_t>(omp_get_thread_num())];
        const std::int64_t u0 = ch.first_unit(k), u1 = ch.end_unit(k);
        const Shape before = ch.shape_of(u0), cshape = ch.shape_of(u1 - u0);
        const Shape pshape = payload_shape(c_, cshape), sshape = scale_shape(c_, cshape);
        const auto poff = static_cast<std::uint64_t>(shape_numel(payload_shape(c_, before)));
        const auto soff = static_cast<std::uint64_t>(shape_numel(scale_shape(c_, before)));
        const std::span<std::uint8_t> in = sized(w.in, static_cast<std::uint64_t>((u1 - u0) * ch.unit) * isz);
        const std::span<std::uint8_t> p = sized(w.payload, static_cast<std::uint64_t>(shape_numel(pshape)) * psz);
        const std::span<std::uint8_t> s = sized(w.scale, static_cast<std::uint64_t>(shape_numel(sshape)) * ssz);
        file_.read_at(at.input + static_cast<std::uint64_t>(u0 * ch.unit) * isz, in);
        const TensorView x = make_view(dtype, cshape, in.data());
        quantize_into(c_, x, make_mutable_view(outputs[0].dtype, pshape, p.data()),
                      make_mutable_view(outputs[1].dtype, sshape, s.data()), one);
        sums[static_cast<std::size_t>(k)] = chunk_sums(c_, x, make_view(outputs[0].dtype, pshape, p.data()),
                                                       make_view(outputs[1].dtype, sshape, s.data()), {}, w.scratch);
        if (out) {
          out->write_at(at.payload + poff * psz, p);
          out->write_at(at.scale + soff * ssz, s);
        }
      } catch (const Error& e) {
        if (is_refusal(e)) {
          refused.store(true, std::memory_order_relaxed);
          stop.store(true, std::memory_order_relaxed);
        } else {
          fail_with(std::current_exception());
        }
      } catch (...) {
        fail_with(std::current_exception());
      }
      const std::int64_t f = finished.fetch_add(1, std::memory_order_relaxed) + 1;
      if (reporter && f - reported >= band && !stop.load(std::memory_order_relaxed)) try {
        reported = f;
        progress(bytes_done(f));
      } catch (...) {
        fail_with(std::current_exception());
      }
    }
  }
  if (error) std::rethrow_exception(error);
  if (refused) return false;
  finish(sums, shape_numel(shape), row);
  return true;
}

}  // namespace qexact::checkpoint::detail
