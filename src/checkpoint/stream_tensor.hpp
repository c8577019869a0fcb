// One tensor of a checkpoint read, quantized, measured and written chunk by chunk (the chunks of
// tensor_stats.hpp): each thread reads a chunk of the input into its own buffer, quantizes it
// into its own output buffers, takes the chunk's statistics while input and output are still in
// its cache, and writes the chunk's payload and scales at their offsets in the staged file. The
// input and the output are each touched once in memory, and no buffer is larger than a chunk.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "checkpoint/tensor_stats.hpp"
#include "io/atomic_file.hpp"
#include "io/input_file.hpp"

namespace qexact::checkpoint::detail {

// Whether each chunk of a tensor of shape `x`, quantized alone, gives the whole tensor's bytes at
// the chunk's offsets: every contract without a tensor-wide scale (fp8.scaled tensor, nvfp4 with
// a tensor scale), for a tensor of rank >= 1 with at least one element.
bool streams_by_chunk(const Contract& c, const Shape& x);

// Where one tensor's bytes are: its input in the input file, its two outputs in the staged file.
struct TensorPlace {
  std::uint64_t input = 0, payload = 0, scale = 0;
};

class ChunkStreamer {
 public:
  ChunkStreamer(const Contract& c, const io::InputFile& in, const RunOptions& run);

  // Quantizes the tensor of `dtype` and `shape` (streams_by_chunk) at `at` with `outputs`
  // (output_specs: payload, scale), writing them into `out` (nothing when null) and the
  // statistics into `row`; `progress` gets the input bytes done so far, called on the calling
  // thread every few MB.
  // False when the contract refuses a chunk for its values: nothing more is done, and the
  // outputs written so far are not the tensor's (the caller lays the file out again).
  bool run(DType dtype, const Shape& shape, const std::vector<OutputSpec>& outputs, const TensorPlace& at,
           io::StagedFile* out, TensorSummary& row, const std::function<void(std::uint64_t)>& progress);

 private:
  struct Worker {
    std::vector<std::uint8_t> in, payload, scale;
    Scratch scratch;
  };
  const Contract& c_;
  const io::InputFile& file_;
  RunOptions run_;
  std::vector<Worker> workers_;  // one per thread, grown to the largest chunk so far
};

}  // namespace qexact::checkpoint::detail
