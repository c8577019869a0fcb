// A .safetensors file to a .safetensors file, streamed (qexact/checkpoint.hpp). The output's
// layout — header, metadata, every tensor's offset — follows from the plan, which needs only
// the input's header: it is written first, then each tensor's outputs at their offsets, reading
// the input in file order. A tensor whose chunks quantize alone (stream_tensor.hpp) is read,
// quantized, measured and written chunk by chunk, its chunks in cache throughout; one with a
// tensor-wide scale is read whole, quantized, and written while it is measured. The bytes are
// those of safetensors::encode() of the same tensors.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <future>
#include <memory>
#include <optional>
#include <stdexcept>

#include "checkpoint/plan.hpp"
#include "checkpoint/storage.hpp"
#include "checkpoint/stream_tensor.hpp"
#include "checkpoint/tensor_stats.hpp"
#include "io/atomic_file.hpp"
#include "io/input_file.hpp"
#include "io/output_guard.hpp"
#include "io/printable.hpp"
#include "io/safetensors.hpp"
#include "qexact/formats/fp16.hpp"
#include "quantize_with_amax.hpp"

namespace qexact::checkpoint {
namespace {
using namespace detail;

// A reusable buffer for one tensor's input, grown to the largest so far and never zero-filled.
class Buffer {
 public:
  std::span<std::uint8_t> get(std::size_t n) {
    if (n > capacity_) {
      data_.reset();
      data_ = std::make_unique_for_overwrite<std::uint8_t[]>(n);
      capacity_ = n;
    }
    return {data_.get(), n};
  }

 private:
  std::unique_ptr<std::uint8_t[]> data_;
  std::size_t capacity_ = 0;
};

std::span<const std::uint8_t> bytes_of(const Tensor& t) {
  return {static_cast<const std::uint8_t*>(t.raw()), t.nbytes()};
}

struct Slots {
  std::vector<safetensors::Slot> slots;
  std::vector<std::size_t> first;  // per source: index of its first slot (its outputs in output_specs order)
};

Slots output_slots(const std::vector<Source>& sources, const Plan& plan) {
  Slots s;
  for (std::size_t i = 0; i < sources.size(); ++i) {
    const Source& src = sources[i];
    const Planned& p = plan.tensors[i];
    s.first.push_back(s.slots.size());
    if (p.action != Action::quantize) {
      s.slots.push_back({src.name, src.dtype, src.shape, src.nbytes});
      continue;
    }
    for (const StoredOutput& o : p.stored)
      s.slots.push_back({o.name, o.dtype, o.shape,
                         static_cast<std::uint64_t>(shape_numel(o.shape)) * safetensors::itemsize(o.dtype)});
  }
  return s;
}

// The bytes of a tensor's stored outputs.
std::uint64_t planned_bytes(const Slots& slots, std::size_t first, std::size_t count) {
  std::uint64_t n = 0;
  for (std::size_t k = first; k < first + count; ++k) n += slots.slots[k].nbytes;
  return n;
}

// Whether a tensor's outputs are stored as the quantizer gives them (so that its chunks can be
// written as they are computed).
bool stored_as_computed(const Planned& p) {
  for (std::size_t k = 0; k < p.stored.size(); ++k)
    if (p.stored[k].narrow || safetensors::itemsize(p.stored[k].dtype) != dtype_size(p.outputs[k].dtype)) return false;
  return true;
}

void write_exact(io::StagedFile& out, std::uint64_t offset, const safetensors::Slot& slot,
                 std::span<const std::uint8_t> bytes) {
  if (bytes.size() != slot.nbytes)
    throw std::logic_error("tensor '" + io::printable(slot.name) + "': " + std::to_string(bytes.size()) + " bytes where the layout has " +
                           std::to_string(slot.nbytes));
  out.write_at(offset, bytes);
}

}  // namespace

namespace detail {

std::vector<std::uint8_t> stored_bytes(const Tensor& t, const StoredOutput& o) {
  const auto* b = static_cast<const std::uint8_t*>(t.raw());
  if (!o.narrow) return std::vector<std::uint8_t>(b, b + t.nbytes());
  if (t.dtype() != DType::f32 || (*o.narrow != DType::bf16 && *o.narrow != DType::f16))
    throw std::logic_error("only an F32 output narrows, to BF16 or F16");
  std::vector<std::uint8_t> out(t.nbytes() / 2);
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    std::uint32_t bits;
    std::memcpy(&bits, b + 4 * i, 4);
    float f;
    std::memcpy(&f, &bits, 4);
    std::uint16_t h;
    bool exact;
    if (*o.narrow == DType::bf16) {
      h = static_cast<std::uint16_t>(bits >> 16);
      exact = (bits & 0xFFFFu) == 0;
    } else {
      h = f32_to_f16(f);
      const float back = f16_to_f32(h);
      exact = std::memcmp(&back, &f, 4) == 0 || (f != f && back != back);
    }
    if (!exact) {
      char hex[16];
      std::snprintf(hex, sizeof hex, "0x%08X", static_cast<unsigned>(bits));
      // Appended piece by piece: GCC 12's -Wrestrict misfires on `"literal" + std::string&&`.
      std::string what = "'";
      what += io::printable(o.name);
      what += "' is stored as ";
      what += o.dtype;
      what += ", but its element ";
      what += std::to_string(i);
      what += " (fp32 bits ";
      what += hex;
      what += ") is not a value of that dtype";
      fail(ErrorKind::bad_input, what);
    }
    out[2 * i] = static_cast<std::uint8_t>(h);
    out[2 * i + 1] = static_cast<std::uint8_t>(h >> 8);
  }
  return out;
}

FileResult quantize_file_stored(const Contract& c, const std::filesystem::path& src, const std::filesystem::path& out,
                                const Options& o, const ProgressFn& progress, const Storage* storage) {
  io::check_output_file(out, {src});  // before any work: never a link, a device or the input itself
  std::error_code exists_ec;
  if (!o.replace && std::filesystem::exists(std::filesystem::symlink_status(out, exists_ec)))
    fail(ErrorKind::bad_argument, out.string() + " already exists; pass --force to replace it (atomically)");
  const io::InputFile file(src);
  const safetensors::Index index = safetensors::read_index(file, src.string());
  check_quantizable(c, index.metadata, src.string());
  std::vector<Source> sources;
  std::uint64_t total = 0;
  for (const safetensors::TensorInfo& t : index.tensors) {
    sources.push_back(Source{t.name, t.dtype, t.shape, t.end - t.begin});
    total += t.end - t.begin;
  }
  // The input in file order: one sequential read.
  std::vector<std::size_t> order(sources.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return index.tensors[a].begin < index.tensors[b].begin; });
  const auto report = [&](Stage stage, const std::string& name, std::uint64_t done) {
    if (progress) progress(Progress{stage, name, done, total});
  };

  std::map<std::string, std::string> late_skips;
  for (;;) {
    const Plan plan = make_plan(c, sources, o, late_skips, storage);
    FileResult result;
    result.metadata = storage ? storage->metadata(index.metadata, sources, plan)
                              : output_metadata(c, index.metadata, sources, plan);
    const Slots slots = output_slots(sources, plan);
    const safetensors::Layout layout = safetensors::layout(result.metadata, slots.slots);

    io::StagedFile staged(out, layout.file_size);
    staged.write_at(0, layout.head);
    Buffer buffer;
    ChunkStreamer streamer(c, file, o.run);
    std::vector<TensorSummary> rows(sources.size());
    bool again = false;  // a tensor was refused for its values: this pass's layout is wrong
    // The disk starts on each tensor's outputs as soon as they are written, while the next ones
    // are computed: the commit's fsync then waits for little more than the last tensor.
    const auto to_disk = [&](std::size_t first_slot, std::size_t count) {
      for (std::size_t k = first_slot; k < first_slot + count; ++k)
        staged.start_writeback(layout.offsets[k], slots.slots[k].nbytes);
    };
    std::uint64_t done = 0;
    for (std::size_t k = 0; k < order.size(); ++k) {
      const std::size_t i = order[k];
      const Source& s = sources[i];
      const std::uint64_t at = index.data_start + index.tensors[i].begin;
      const std::size_t slot = slots.first[i];
      if (plan.tensors[i].action != Action::quantize) {
        report(Stage::write, s.name, done);
        if (!again) {
          staged.copy_at(layout.offsets[slot], file.fd(), at, s.nbytes, src.string());
          to_disk(slot, 1);
        }
        done += s.nbytes;
        continue;
      }

      // The next tensor comes in from the disk while this one is quantized.
      if (k + 1 < order.size()) {
        const safetensors::TensorInfo& next = index.tensors[order[k + 1]];
        file.prefetch(index.data_start + next.begin, next.end - next.begin);
      }
      const DType dtype = *float_dtype(s.dtype);
      const Planned& p = plan.tensors[i];
      bool streamed_refusal = false;
      const std::optional<float> amax = storage && storage->tensor_amax ? storage->tensor_amax(s.name) : std::nullopt;
      // (A square tensor keeps its shape transposed: the flag, not the shape, says so.)
      const bool transposed = storage && storage->transposed && s.shape.size() >= 2 && storage->transposed(s);
      if (streams_by_chunk(c, s.shape) && !amax && !transposed && stored_as_computed(p)) {
        report(Stage::quantize, s.name, done);
        TensorSummary row{s.name, s.shape, dtype, 0, 0, s.nbytes, planned_bytes(slots, slot, p.outputs.size())};
        const TensorPlace place{at, layout.offsets[slot], layout.offsets[slot + 1]};
        if (streamer.run(dtype, s.shape, p.outputs, place, again ? nullptr : &staged, row,
                         [&](std::uint64_t d) { report(Stage::quantize, s.name, done + d); })) {
          if (!again) {
            rows[i] = std::move(row);
            to_disk(slot, p.outputs.size());
          }
          done += s.nbytes;
          continue;
        }
        // Refused for its values: the whole tensor, quantized as one, says why.
        streamed_refusal = true;
      }

      report(Stage::read, s.name, done);
      const std::span<std::uint8_t> in = buffer.get(static_cast<std::size_t>(s.nbytes));
      file.read_at(at, in);
      TensorView x = make_view(dtype, s.shape, in.data());
      Tensor swapped;  // the transposed tensor, contiguous: one more copy of it in memory
      if (transposed) {
        std::swap(x.shape[x.shape.size() - 1], x.shape[x.shape.size() - 2]);
        std::swap(x.strides[x.strides.size() - 1], x.strides[x.strides.size() - 2]);
        swapped = contiguous_copy(x);
        x = swapped.view();
      }
      report(Stage::quantize, s.name, done);
      std::string reason;
      const std::optional<QuantResult> r = quantize_one(c, x, p, o.run, reason, amax);
      if (r && streamed_refusal)
        throw std::logic_error("tensor '" + io::printable(s.name) + "': a chunk was refused, the whole tensor was not");
      if (!r) {
        if (o.strict) refuse_strict(s.name, reason);
        late_skips.emplace(s.name, reason);
        again = true;
      } else if (!again) {
        TensorSummary& row = rows[i];
        row = TensorSummary{s.name, s.shape, dtype, 0, 0, s.nbytes, planned_bytes(slots, slot, p.outputs.size())};
        report(Stage::write, s.name, done);
        std::vector<std::optional<std::vector<std::uint8_t>>> narrowed;  // the outputs stored in a narrower dtype
        const auto named = r->named();
        for (std::size_t k = 0; k < named.size(); ++k)
          narrowed.push_back(p.stored[k].narrow ? std::optional(stored_bytes(*named[k].second, p.stored[k])) : std::nullopt);
        // The outputs are written while the statistics read them: no copy, no more memory. (A
        // std::async future waits for its task when destroyed, so nothing outlives the buffers.)
        std::future<void> written = std::async(std::launch::async, [&] {
          for (std::size_t k = 0; k < named.size(); ++k)
            write_exact(staged, layout.offsets[slot + k], slots.slots[slot + k],
                        narrowed[k] ? std::span<const std::uint8_t>(*narrowed[k]) : bytes_of(*named[k].second));
        });
        measure(c, x, *r, o.run, row);
        written.get();
        to_disk(slot, p.outputs.size());
      }
      done += s.nbytes;
    }
    if (again) continue;  // the staged file is removed; the next plan skips what was refused
    report(Stage::write, "", done);
    staged.commit();
    std::vector<TensorSummary> quantized;
    for (std::size_t i = 0; i < sources.size(); ++i)
      if (plan.tensors[i].action == Action::quantize) quantized.push_back(std::move(rows[i]));
    result.summary = make_summary(sources, plan, std::move(quantized));
    return result;
  }
}

}  // namespace detail

FileResult quantize_file(const Contract& c, const std::filesystem::path& src, const std::filesystem::path& out,
                         const Options& o, const ProgressFn& progress) {
  return detail::quantize_file_stored(c, src, out, o, progress, nullptr);
}

}  // namespace qexact::checkpoint
