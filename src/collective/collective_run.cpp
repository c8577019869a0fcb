#include "collective/collective_run.hpp"

#include <algorithm>
#include <cstring>
#include <set>
#include <stdexcept>

#include "quantize_with_amax.hpp"
#include "collective/shard_quant.hpp"
#include "plan/shard_domain.hpp"
#include "collective/synthetic_tensor.hpp"
#include "perf/measure.hpp"
#include "qexact/error.hpp"
#include "qexact/int8_channel.hpp"
#include "qexact/pool.hpp"

namespace qexact::dist {
namespace {

constexpr std::size_t kListedBlocks = 8;

struct Timings {
  double quantized = 0.0, bf16 = 0.0;
};

// Both paths alternate within each iteration, so drift in machine load affects them alike; each
// iteration's time is the slowest rank's (a collective ends when its last rank does).
Timings time_interleaved(const MpiSession& s, int iterations, const std::function<void()>& quantized,
                         const std::function<void()>& bf16) {
  std::vector<double> tq(static_cast<std::size_t>(iterations)), tb(static_cast<std::size_t>(iterations));
  for (int it = 0; it < iterations; ++it) {
    barrier(s);
    double t = perf::steady_seconds();
    quantized();
    tq[static_cast<std::size_t>(it)] = perf::steady_seconds() - t;
    barrier(s);
    t = perf::steady_seconds();
    bf16();
    tb[static_cast<std::size_t>(it)] = perf::steady_seconds() - t;
  }
  all_reduce_max(s, tq);
  all_reduce_max(s, tb);
  return {perf::median(tq), perf::median(tb)};
}

Tensor tensor_from_bytes(DType dtype, const Shape& shape, const std::uint8_t* data, std::size_t available) {
  Tensor t(dtype, shape);
  if (t.nbytes() > available) throw std::logic_error("received " + std::to_string(available) + " bytes for a " +
                                                     shape_str(shape) + " tensor");
  std::memcpy(t.raw(), data, t.nbytes());
  return t;
}

// A result of bytes without scales (an unquantized tensor, a pooled mean), to compare as one.
QuantResult bytes_only(Tensor t) {
  QuantResult r;
  r.payload = std::move(t);
  r.scale = Tensor(DType::u8, {0});
  return r;
}

// Every byte in one block (0): the whole tensor as one domain (a tensor-wide amax, straddled by
// every shard boundary unless the ranks agreed on it; where they did, and for bytes moved
// unquantized, any drift is a defect, never attributed to a boundary).
BlockMap one_block(bool straddled) {
  BlockMap m;
  m.block_of_payload_byte = m.block_of_scale_byte = m.block_of_tensor_scale_byte = [](std::int64_t) {
    return std::int64_t{0};
  };
  m.straddles = [straddled](std::int64_t) { return straddled; };
  m.blocks = 1;
  return m;
}

std::span<const std::uint8_t> span_of(const Tensor& t) {
  return {static_cast<const std::uint8_t*>(t.raw()), t.nbytes()};
}

std::vector<std::int64_t> shard_boundaries(std::int64_t shard_length, int world) {
  std::vector<std::int64_t> b;
  for (int r = 1; r < world; ++r) b.push_back(r * shard_length);
  return b;
}

// What every run prepares: the full tensor, and this rank's contiguous shard of it.
struct Prepared {
  const plan::TensorPlan* plan = nullptr;
  Tensor full;
  Tensor local;
  std::int64_t shard_length = 0;
  std::int64_t offset = 0;
};

void fill_drift(TensorReport& r, const Drift& d) {
  r.payload_bytes_total = d.payload_bytes;
  r.payload_bytes_differing = d.payload_differing;
  r.scale_bytes_total = d.scale_bytes;
  r.scale_bytes_differing = d.scale_differing;
  r.differing_blocks = static_cast<std::int64_t>(d.differing_blocks.size());
  r.straddling_blocks = d.straddling_blocks;
  r.straddling_total = d.straddling_total;
  r.first_differing_blocks.assign(d.differing_blocks.begin(),
                                  d.differing_blocks.begin() +
                                      static_cast<std::ptrdiff_t>(std::min(kListedBlocks, d.differing_blocks.size())));
}

// The gathered tensor from world equal chunks of `local`'s shape, joined along `axis`.
Tensor join_chunks(const std::vector<std::uint8_t>& recv, const Tensor& local, int axis, int world) {
  std::vector<Tensor> parts;
  std::vector<TensorView> views;
  for (int r = 0; r < world; ++r)
    parts.push_back(tensor_from_bytes(local.dtype(), local.shape(), recv.data() + r * local.nbytes(), local.nbytes()));
  for (const Tensor& p : parts) views.push_back(p.view());
  return concat(views, axis);
}

void require_same(const Tensor& a, const Tensor& b, const std::string& what) {
  if (!same_contents(a, b))
    throw std::logic_error(what + ": the bf16 collective did not deliver the expected tensor");
}

// ---- all_gather, shard-local scales ----
TensorReport run_all_gather_local(const MpiSession& s, const Prepared& p, const CollectiveOptions& o) {
  const plan::TensorPlan& t = *p.plan;
  const Contract c = t.contract();
  const Shape& full = t.shape;
  const int world = s.world();
  std::vector<std::int64_t> scale_counts;
  std::vector<PieceGeometry> geometry;
  for (int r = 0; r < world; ++r) {
    geometry.push_back(piece_geometry(c, full, t.axis, r * p.shard_length, p.shard_length));
    scale_counts.push_back(shape_numel(geometry.back().scale) * plan::scale_element_bytes(c, full));
  }

  QuantPiece mine;
  std::vector<std::uint8_t> payload_recv, scale_recv, bf16_recv(p.local.nbytes() * static_cast<std::size_t>(world));
  const Timings tm = time_interleaved(
      s, o.iterations,
      [&] {
        mine = quantize_on_global_grid(c, full, p.local.view(), t.axis, p.offset, o.run);
        payload_recv.resize(mine.payload.nbytes() * static_cast<std::size_t>(world));
        all_gather_equal(s, mine.payload.raw(), mine.payload.nbytes(), payload_recv.data());
        all_gather_v_known(s, span_of(mine.scale), scale_counts, scale_recv);
      },
      [&] { all_gather_equal(s, p.local.raw(), p.local.nbytes(), bf16_recv.data()); });

  std::vector<QuantPiece> pieces;
  std::size_t scale_at = 0;
  for (int r = 0; r < world; ++r) {
    const PieceGeometry& g = geometry[static_cast<std::size_t>(r)];
    QuantPiece piece;
    piece.payload = tensor_from_bytes(mine.payload.dtype(), g.payload, payload_recv.data() + r * mine.payload.nbytes(),
                                      mine.payload.nbytes());
    piece.scale = tensor_from_bytes(mine.scale.dtype(), g.scale, scale_recv.data() + scale_at,
                                    scale_recv.size() - scale_at);
    piece.scale_first = g.scale_first;
    scale_at += static_cast<std::size_t>(scale_counts[static_cast<std::size_t>(r)]);
    pieces.push_back(std::move(piece));
  }
  const QuantResult got = assemble_pieces(c, full, t.axis, pieces);
  const Tensor gathered = join_chunks(bf16_recv, p.local, t.axis, world);
  require_same(gathered, p.full, t.name);
  const QuantResult want = quantize(c, gathered.view(), o.run);

  TensorReport r;
  fill_drift(r, compare_quantized(got, want, contract_blocks(c, full, t.axis, shard_boundaries(p.shard_length, world))));
  r.payload_bytes_sent = static_cast<std::int64_t>(mine.payload.nbytes());
  r.scale_bytes_sent = static_cast<std::int64_t>(mine.scale.nbytes());
  r.bytes_bf16 = static_cast<std::int64_t>(p.local.nbytes());
  r.time_quantized_s = tm.quantized;
  r.time_bf16_s = tm.bf16;
  return r;
}

// ---- all_gather, global per-(head, channel) scale ----
TensorReport run_all_gather_global(const MpiSession& s, const Prepared& p, const CollectiveOptions& o) {
  const plan::TensorPlan& t = *p.plan;
  const int world = s.world();
  const std::int64_t heads = t.shape[2], dim = t.shape[3];
  QuantResult mine;
  std::vector<std::uint8_t> payload_recv, bf16_recv(p.local.nbytes() * static_cast<std::size_t>(world));
  const Timings tm = time_interleaved(
      s, o.iterations,
      [&] {
        const Tensor local_amax = int8_channel_abs_max(p.local.view());
        std::vector<float> amax(local_amax.data<float>(), local_amax.data<float>() + local_amax.numel());
        all_reduce_max(s, amax);
        mine = quantize_int8_channel(p.local.view(), from_f32_vector(amax, {heads, dim}, DType::f32).view());
        payload_recv.resize(mine.payload.nbytes() * static_cast<std::size_t>(world));
        all_gather_equal(s, mine.payload.raw(), mine.payload.nbytes(), payload_recv.data());
      },
      [&] { all_gather_equal(s, p.local.raw(), p.local.nbytes(), bf16_recv.data()); });

  QuantResult got;
  got.payload = join_chunks(payload_recv, mine.payload, t.axis, world);
  got.scale = std::move(mine.scale);
  const Tensor gathered = join_chunks(bf16_recv, p.local, t.axis, world);
  require_same(gathered, p.full, t.name);
  const QuantResult want = quantize_int8_channel(gathered.view(), int8_channel_abs_max(gathered.view()).view());

  // A channel's domain spans every shard: it never "straddles" in the block sense, so any
  // drift here is a defect of the reduction, reported as such.
  BlockMap blocks;
  blocks.block_of_payload_byte = [=](std::int64_t flat) { return flat % (heads * dim); };
  blocks.block_of_scale_byte = [](std::int64_t byte) { return byte / 4; };
  blocks.straddles = [](std::int64_t) { return false; };
  TensorReport r;
  fill_drift(r, compare_quantized(got, want, blocks));
  r.payload_bytes_sent = static_cast<std::int64_t>(mine.payload.nbytes());
  r.scale_bytes_sent = 0;  // every rank computes the global scale; none sends it
  r.extra_collective = "all_reduce(MAX) of the (N, D) fp32 amax";
  r.extra_bytes = heads * dim * 4;
  r.bytes_bf16 = static_cast<std::int64_t>(p.local.nbytes());
  r.time_quantized_s = tm.quantized;
  r.time_bf16_s = tm.bf16;
  return r;
}

// ---- a tensor-wide amax (fp8.scaled granularity=tensor, nvfp4 tensor_scale=amax) ----
// The output computed from the tensor amax alone: fp8.scaled's one scale, nvfp4's tensor scale.
Tensor& amax_output(const Contract& c, QuantResult& r) {
  return plan::amax_sets_tensor_scale(c) ? r.tensor_scale : r.scale;
}

// The tensor's amax as the ranks agree on it (quantize_with_amax.hpp): one all_reduce(MAX) of the
// sign-cleared fp32 bits of each value in `local_amax_keys`.
std::vector<std::int32_t> agreed_amax_keys(const MpiSession& s, std::vector<std::int32_t> local_amax_keys) {
  all_reduce_max(s, local_amax_keys);
  return local_amax_keys;
}

// all_gather. Agreed ("scale": "global"): each rank quantizes its shard with the tensor amax
// after one all_reduce(MAX) of it, and sends the payload (and nvfp4's block scales); the output
// computed from the amax alone every rank has already. Not agreed: each shard quantizes with its
// own amax and sends that output too; the assembled one is rank 0's.
TensorReport run_all_gather_tensor_amax(const MpiSession& s, const Prepared& p, const CollectiveOptions& o) {
  const plan::TensorPlan& t = *p.plan;
  const Contract c = t.contract();
  const bool agreed = t.scale == plan::ScaleScope::global;
  const bool block_scales = plan::amax_sets_tensor_scale(c);  // joined along the sharded axis like the payload
  const int world = s.world();
  const auto w = static_cast<std::size_t>(world);
  QuantResult mine;
  std::vector<std::uint8_t> payload_recv, scale_recv, amax_output_recv, bf16_recv(p.local.nbytes() * w);
  const Timings tm = time_interleaved(
      s, o.iterations,
      [&] {
        if (agreed) {
          const std::int32_t key = agreed_amax_keys(s, {amax_key(p.local.view())})[0];
          mine = quantize_with_tensor_amax(c, p.local.view(), amax_from_key(key), o.run);
        } else {
          mine = quantize(c, p.local.view(), o.run);
        }
        payload_recv.resize(mine.payload.nbytes() * w);
        all_gather_equal(s, mine.payload.raw(), mine.payload.nbytes(), payload_recv.data());
        if (block_scales) {
          scale_recv.resize(mine.scale.nbytes() * w);
          all_gather_equal(s, mine.scale.raw(), mine.scale.nbytes(), scale_recv.data());
        }
        if (!agreed) {
          const Tensor& own = amax_output(c, mine);
          amax_output_recv.resize(own.nbytes() * w);
          all_gather_equal(s, own.raw(), own.nbytes(), amax_output_recv.data());
        }
      },
      [&] { all_gather_equal(s, p.local.raw(), p.local.nbytes(), bf16_recv.data()); });

  QuantResult got = mine;
  got.payload = join_chunks(payload_recv, mine.payload, t.axis, world);
  if (block_scales) got.scale = join_chunks(scale_recv, mine.scale, t.axis, world);
  const Tensor& own = amax_output(c, mine);
  if (!agreed) amax_output(c, got) = tensor_from_bytes(own.dtype(), own.shape(), amax_output_recv.data(), own.nbytes());
  const Tensor gathered = join_chunks(bf16_recv, p.local, t.axis, world);
  require_same(gathered, p.full, t.name);
  const QuantResult want = quantize(c, gathered.view(), o.run);

  TensorReport r;
  fill_drift(r, compare_quantized(got, want, one_block(!agreed && world > 1)));
  r.payload_bytes_sent = static_cast<std::int64_t>(mine.payload.nbytes());
  r.scale_bytes_sent = static_cast<std::int64_t>((block_scales ? mine.scale.nbytes() : 0) + (agreed ? 0 : own.nbytes()));
  if (agreed) {
    r.extra_collective = "all_reduce(MAX) of the fp32 tensor amax";
    r.extra_bytes = 4;
  }
  r.bytes_bf16 = static_cast<std::int64_t>(p.local.nbytes());
  r.time_quantized_s = tm.quantized;
  r.time_bf16_s = tm.bf16;
  return r;
}

// Chunk j of t along `axis` (world equal chunks), as bytes.
std::vector<std::uint8_t> chunk_bytes(const Tensor& t, int axis, int world, int j) {
  const std::int64_t h = t.shape()[static_cast<std::size_t>(axis)] / world;
  return slice_bytes(t, axis, j * h, h);
}

// ---- all_to_all (Ulysses: sharded on `axis` before, on `to_axis` after) ----
TensorReport run_all_to_all(const MpiSession& s, const Prepared& p, const CollectiveOptions& o) {
  const plan::TensorPlan& t = *p.plan;
  const int world = s.world();
  const int rank = s.rank();
  Shape head_shape = t.shape;  // the tensor this rank holds afterwards, in full along `axis`
  head_shape[static_cast<std::size_t>(t.to_axis)] /= world;
  const Tensor expected = slice_copy(p.full, t.to_axis, rank * head_shape[static_cast<std::size_t>(t.to_axis)],
                                    head_shape[static_cast<std::size_t>(t.to_axis)]);

  std::vector<std::uint8_t> bf16_recv(p.local.nbytes());
  auto bf16_op = [&] {
    std::vector<std::uint8_t> send;
    send.reserve(p.local.nbytes());
    for (int j = 0; j < world; ++j) {
      const auto b = chunk_bytes(p.local, t.to_axis, world, j);
      send.insert(send.end(), b.begin(), b.end());
    }
    all_to_all_equal(s, send.data(), send.size() / static_cast<std::size_t>(world), bf16_recv.data());
  };
  Tensor head_chunk_shape_tensor;  // shape of one received bf16 chunk
  {
    Shape chunk = p.local.shape();
    chunk[static_cast<std::size_t>(t.to_axis)] /= world;
    head_chunk_shape_tensor = Tensor(p.local.dtype(), chunk);
  }

  TensorReport r;
  r.bytes_bf16 = static_cast<std::int64_t>(p.local.nbytes());
  if (!t.quantized()) {
    const Timings tm = time_interleaved(s, o.iterations, bf16_op, [] {});
    const Tensor got = join_chunks(bf16_recv, head_chunk_shape_tensor, t.axis, world);
    const QuantResult g = bytes_only(got), w = bytes_only(expected);
    fill_drift(r, compare_quantized(g, w, one_block(false)));
    r.payload_bytes_sent = r.bytes_bf16;
    r.time_quantized_s = r.time_bf16_s = tm.quantized;
    return r;
  }

  const Contract c = t.contract();
  if (plan::has_tensor_amax(c)) {
    // Quantize-after quantizes the head shard rank j holds: its amax is the max over the ranks of
    // their chunk j's amax. So the ranks agree on one amax per destination, and each quantizes
    // its chunk j with amax j (the judge admits only "scale": "global" here).
    const std::int64_t h = p.local.shape()[static_cast<std::size_t>(t.to_axis)] / world;
    const bool block_scales = plan::amax_sets_tensor_scale(c);  // joined along the sequence axis
    std::vector<QuantResult> chunks(static_cast<std::size_t>(world));
    std::vector<std::vector<std::uint8_t>> recv;
    const Timings tm = time_interleaved(
        s, o.iterations,
        [&] {
          std::vector<std::int32_t> keys;
          for (int j = 0; j < world; ++j) keys.push_back(amax_key(slice_view(p.local.view(), t.to_axis, j * h, h)));
          keys = agreed_amax_keys(s, std::move(keys));
          std::vector<std::vector<std::uint8_t>> send(static_cast<std::size_t>(world));
          for (int j = 0; j < world; ++j) {
            const auto uj = static_cast<std::size_t>(j);
            chunks[uj] = quantize_with_tensor_amax(c, slice_view(p.local.view(), t.to_axis, j * h, h),
                                                   amax_from_key(keys[uj]), o.run);
            const std::span<const std::uint8_t> payload = span_of(chunks[uj].payload);
            send[uj].assign(payload.begin(), payload.end());
            if (block_scales) {
              const std::span<const std::uint8_t> scale = span_of(chunks[uj].scale);
              send[uj].insert(send[uj].end(), scale.begin(), scale.end());
            }
          }
          recv = all_to_all_v(s, send);
        },
        bf16_op);
    const QuantResult& own = chunks[static_cast<std::size_t>(rank)];  // the amax-only output is this rank's
    std::vector<Tensor> payloads, scales;
    std::vector<TensorView> payload_views, scale_views;
    for (const std::vector<std::uint8_t>& buf : recv) {
      payloads.push_back(tensor_from_bytes(own.payload.dtype(), own.payload.shape(), buf.data(), buf.size()));
      const std::size_t at = own.payload.nbytes();
      const std::size_t scale_bytes = block_scales ? own.scale.nbytes() : 0;
      if (at + scale_bytes != buf.size())
        throw std::logic_error("a rank sent " + std::to_string(buf.size()) + " bytes, not a payload and scale chunk");
      if (block_scales) scales.push_back(tensor_from_bytes(own.scale.dtype(), own.scale.shape(), buf.data() + at, scale_bytes));
    }
    for (const Tensor& x : payloads) payload_views.push_back(x.view());
    for (const Tensor& x : scales) scale_views.push_back(x.view());
    QuantResult got = own;
    got.payload = concat(payload_views, t.axis);
    if (block_scales) got.scale = concat(scale_views, t.axis);
    const Tensor head = join_chunks(bf16_recv, head_chunk_shape_tensor, t.axis, world);
    require_same(head, expected, t.name);
    const QuantResult want = quantize(c, head.view(), o.run);
    fill_drift(r, compare_quantized(got, want, one_block(false)));
    std::int64_t payload_sent = 0, scale_sent = 0;
    for (const QuantResult& q : chunks) {
      payload_sent += static_cast<std::int64_t>(q.payload.nbytes());
      scale_sent += block_scales ? static_cast<std::int64_t>(q.scale.nbytes()) : 0;
    }
    r.payload_bytes_sent = payload_sent;
    r.scale_bytes_sent = scale_sent;
    r.extra_collective = "all_reduce(MAX) of one fp32 amax per destination rank";
    r.extra_bytes = 4 * world;
    r.time_quantized_s = tm.quantized;
    r.time_bf16_s = tm.bf16;
    return r;
  }
  const ScaleAxis after = scale_axis_along(c, t.shape, t.to_axis);
  QuantPiece mine;
  std::vector<std::vector<std::uint8_t>> recv;
  std::int64_t payload_sent = 0, scale_sent = 0;
  const Timings tm = time_interleaved(
      s, o.iterations,
      [&] {
        mine = quantize_on_global_grid(c, t.shape, p.local.view(), t.axis, p.offset, o.run);
        std::vector<std::vector<std::uint8_t>> send(static_cast<std::size_t>(world));
        payload_sent = scale_sent = 0;
        for (int j = 0; j < world; ++j) {
          auto& buf = send[static_cast<std::size_t>(j)];
          buf = chunk_bytes(mine.payload, t.to_axis, world, j);
          const auto sc = chunk_bytes(mine.scale, after.scale_axis, world, j);
          payload_sent += static_cast<std::int64_t>(buf.size());
          scale_sent += static_cast<std::int64_t>(sc.size());
          buf.insert(buf.end(), sc.begin(), sc.end());
        }
        recv = all_to_all_v(s, send);
      },
      bf16_op);

  std::vector<QuantPiece> pieces;
  for (int i = 0; i < world; ++i) {
    const PieceGeometry g = piece_geometry(c, head_shape, t.axis, i * p.shard_length, p.shard_length);
    const auto& buf = recv[static_cast<std::size_t>(i)];
    QuantPiece piece;
    piece.payload = tensor_from_bytes(mine.payload.dtype(), g.payload, buf.data(), buf.size());
    const std::size_t at = piece.payload.nbytes();
    piece.scale = tensor_from_bytes(mine.scale.dtype(), g.scale, buf.data() + at, buf.size() - at);
    if (at + piece.scale.nbytes() != buf.size())
      throw std::logic_error("rank " + std::to_string(i) + " sent " + std::to_string(buf.size()) +
                             " bytes, not a payload and scale piece");
    piece.scale_first = g.scale_first;
    pieces.push_back(std::move(piece));
  }
  const QuantResult got = assemble_pieces(c, head_shape, t.axis, pieces);
  const Tensor head = join_chunks(bf16_recv, head_chunk_shape_tensor, t.axis, world);
  require_same(head, expected, t.name);
  const QuantResult want = quantize(c, head.view(), o.run);
  fill_drift(r, compare_quantized(got, want, contract_blocks(c, head_shape, t.axis, shard_boundaries(p.shard_length, world))));
  r.payload_bytes_sent = payload_sent;
  r.scale_bytes_sent = scale_sent;
  r.time_quantized_s = tm.quantized;
  r.time_bf16_s = tm.bf16;
  return r;
}

// ---- all_gather of an unquantized tensor ----
TensorReport run_all_gather_plain(const MpiSession& s, const Prepared& p, const CollectiveOptions& o) {
  const int world = s.world();
  std::vector<std::uint8_t> recv(p.local.nbytes() * static_cast<std::size_t>(world));
  const Timings tm = time_interleaved(
      s, o.iterations, [&] { all_gather_equal(s, p.local.raw(), p.local.nbytes(), recv.data()); }, [] {});
  const Tensor got = join_chunks(recv, p.local, p.plan->axis, world);
  TensorReport r;
  const QuantResult g = bytes_only(got), w = bytes_only(p.full);
  fill_drift(r, compare_quantized(g, w, one_block(false)));
  r.bytes_bf16 = r.payload_bytes_sent = static_cast<std::int64_t>(p.local.nbytes());
  r.time_quantized_s = r.time_bf16_s = tm.quantized;
  return r;
}

// ---- pool_mean: the side channel ----
TensorReport run_pool_mean(const MpiSession& s, const Prepared& p, const CollectiveOptions& o) {
  const plan::TensorPlan& t = *p.plan;
  const int world = s.world();
  const std::int64_t batch = t.shape[0], seq = t.shape[1];
  const Shape features(t.shape.begin() + 2, t.shape.end());

  const std::vector<std::uint8_t> my_bytes = pool_partial_bytes(pooled_partial(p.local.view(), p.offset, t.pool));
  std::vector<std::int64_t> counts;
  all_gather_v(s, my_bytes, &counts);  // the partials' sizes, learnt once, outside the timing

  auto combine = [&](const std::vector<std::uint8_t>& all, PoolDivisor divisor) {
    std::vector<PoolPartial> partials;
    std::size_t at = 0;
    for (std::int64_t n : counts) {
      partials.push_back(pool_partial_from_bytes({all.data() + at, static_cast<std::size_t>(n)}));
      at += static_cast<std::size_t>(n);
    }
    return pooled_combine(partials, batch, features, seq, t.pool, t.dtype, divisor);
  };
  std::vector<std::uint8_t> all, bf16_recv(p.local.nbytes() * static_cast<std::size_t>(world));
  Tensor got;
  const Timings tm = time_interleaved(
      s, o.iterations,
      [&] {
        const std::vector<std::uint8_t> bytes = pool_partial_bytes(pooled_partial(p.local.view(), p.offset, t.pool));
        all_gather_v_known(s, bytes, counts, all);
        got = combine(all, PoolDivisor::true_length);
      },
      [&] {
        all_gather_equal(s, p.local.raw(), p.local.nbytes(), bf16_recv.data());
        pooled_block_mean(join_chunks(bf16_recv, p.local, 1, world).view(), t.pool, t.dtype, o.run);
      });
  const Tensor want = pooled_block_mean(p.full.view(), t.pool, t.dtype, o.run);
  const Tensor uniform = combine(all, PoolDivisor::uniform);

  const std::int64_t cells = want.shape()[1];
  const std::int64_t per_cell = shape_numel(features);
  const auto esize = static_cast<std::int64_t>(dtype_size(t.dtype));
  const std::vector<std::int64_t> boundaries = shard_boundaries(p.shard_length, world);
  BlockMap blocks;
  blocks.block_of_payload_byte = [=](std::int64_t byte) { return (byte / esize / per_cell) % cells; };
  blocks.block_of_scale_byte = [](std::int64_t) { return std::int64_t{0}; };
  blocks.straddles = [=](std::int64_t cell) {
    const std::int64_t lo = cell * t.pool, hi = std::min(seq, lo + t.pool);
    for (std::int64_t b : boundaries)
      if (lo < b && b < hi) return true;
    return false;
  };
  TensorReport r;
  fill_drift(r, compare_quantized(bytes_only(got), bytes_only(want), blocks));
  const Drift u = compare_quantized(bytes_only(uniform), bytes_only(want), blocks);
  r.tail_cell = seq % t.pool != 0 ? cells - 1 : -1;
  r.uniform_cells_differing = static_cast<std::int64_t>(u.differing_blocks.size());
  r.uniform_differs_on_tail_only =
      std::all_of(u.differing_blocks.begin(), u.differing_blocks.end(), [&](std::int64_t c) { return c == r.tail_cell; });
  r.payload_bytes_sent = static_cast<std::int64_t>(my_bytes.size());
  r.bytes_bf16 = static_cast<std::int64_t>(p.local.nbytes());
  r.time_quantized_s = tm.quantized;
  r.time_bf16_s = tm.bf16;
  return r;
}

// Makes the per-rank parts of a report the same on every rank.
void reduce_across_ranks(const MpiSession& s, TensorReport& r, bool sum_drift) {
  std::vector<std::int64_t> drift{r.payload_bytes_total,  r.payload_bytes_differing, r.scale_bytes_total,
                                  r.scale_bytes_differing, r.differing_blocks,        r.straddling_blocks,
                                  r.uniform_cells_differing, r.straddling_total};
  if (sum_drift)
    all_reduce_sum(s, drift);
  else
    all_reduce_max(s, drift);
  r.payload_bytes_total = drift[0];
  r.payload_bytes_differing = drift[1];
  r.scale_bytes_total = drift[2];
  r.scale_bytes_differing = drift[3];
  r.differing_blocks = drift[4];
  r.straddling_blocks = drift[5];
  r.uniform_cells_differing = drift[6];
  r.straddling_total = drift[7];

  std::vector<std::int64_t> maxima{r.bytes_bf16, r.payload_bytes_sent, r.scale_bytes_sent,
                                   r.payload_bytes_sent + r.scale_bytes_sent,
                                   r.uniform_differs_on_tail_only ? 0 : 1};
  all_reduce_max(s, maxima);
  r.bytes_bf16 = maxima[0];
  r.payload_bytes_sent = maxima[1];
  r.scale_bytes_sent = maxima[2];
  r.bytes_sent = maxima[3];
  r.uniform_differs_on_tail_only = maxima[4] == 0;
  r.exact_observed = r.payload_bytes_differing == 0 && r.scale_bytes_differing == 0;
  r.all_drift_at_boundaries = r.differing_blocks == r.straddling_blocks;
}

std::string joined_fingerprints(const plan::PlanFile& pf) {
  std::string out;
  for (const plan::TensorPlan& t : pf.tensors) out += t.name + ": " + t.fingerprint() + "\n";
  return out;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t end = text.find('\n', start);
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

// Every rank's view of the plan against rank 0's, before any data moves.
void require_same_plan_everywhere(const MpiSession& s, const plan::PlanFile& pf) {
  const std::string mine = joined_fingerprints(pf);
  std::vector<std::int64_t> counts;
  const std::vector<std::uint8_t> all =
      all_gather_v(s, {reinterpret_cast<const std::uint8_t*>(mine.data()), mine.size()}, &counts);
  std::vector<std::string> views;
  std::size_t at = 0;
  for (std::int64_t n : counts) {
    views.emplace_back(reinterpret_cast<const char*>(all.data()) + at, static_cast<std::size_t>(n));
    at += static_cast<std::size_t>(n);
  }
  const std::vector<std::string> first = lines_of(views[0]);
  for (std::size_t r = 1; r < views.size(); ++r) {
    if (views[r] == views[0]) continue;
    const std::vector<std::string> other = lines_of(views[r]);
    std::size_t i = 0;
    while (i < first.size() && i < other.size() && first[i] == other[i]) ++i;
    const std::string a = i < first.size() ? first[i] : "(no such tensor)";
    const std::string b = i < other.size() ? other[i] : "(no such tensor)";
    fail(ErrorKind::bad_argument, "the ranks disagree on the plan: rank 0 has " + a + "; rank " + std::to_string(r) +
                                      " has " + b + " (every rank must shard the same tensors the same way)");
  }
}

}  // namespace

std::vector<TensorReport> run_collective_plan(const MpiSession& s, const std::string& plan_path,
                                              const CollectiveOptions& o) {
  plan::PlanFile pf;
  agree_on(s, [&] {
    if (o.iterations < 1) fail(ErrorKind::bad_argument, "--iterations must be >= 1");
    if (o.fail_rank >= s.world())
      fail(ErrorKind::bad_argument, "--fail-rank " + std::to_string(o.fail_rank) + " is not a rank of a world of " +
                                        std::to_string(s.world()));
    if (s.rank() == o.fail_rank)
      fail(ErrorKind::bad_argument, "failure injected while preparing (--fail-rank, a test hook)");
    pf = plan::read_plan_file(plan_path);
  });
  agree_on(s, [&] { require_same_plan_everywhere(s, pf); });
  agree_on(s, [&] {
    plan::check_world(pf, s.world());
    // The judge gives these tensors the verdict "not supported for quantize-before" with the
    // same reason (plan/shard_domain.hpp).
    for (std::size_t i = 0; i < pf.tensors.size(); ++i)
      if (const std::optional<std::string> why = plan::quantize_before_refusal(pf.tensors[i]))
        fail(ErrorKind::bad_argument, pf.source + ": tensor #" + std::to_string(i) + " '" + pf.tensors[i].name +
                                          "': not supported for quantize-before: " + *why);
  });

  std::vector<Prepared> prepared(pf.tensors.size());
  agree_on(s, [&] {
    for (std::size_t i = 0; i < pf.tensors.size(); ++i) {
      const plan::TensorPlan& t = pf.tensors[i];
      Prepared& p = prepared[i];
      p.plan = &t;
      p.full = synthetic_tensor(t.shape, t.dtype, o.seed, t.name);
      p.shard_length = t.shape[static_cast<std::size_t>(t.axis)] / s.world();
      p.offset = s.rank() * p.shard_length;
      p.local = slice_copy(p.full, t.axis, p.offset, p.shard_length);
    }
  });

  std::vector<TensorReport> reports;
  for (const Prepared& p : prepared) {
    const plan::TensorPlan& t = *p.plan;
    TensorReport r;
    or_abort(s, [&] {
      bool sum_drift = false;
      switch (t.collective) {
        case plan::Collective::all_gather:
          r = !t.quantized()                           ? run_all_gather_plain(s, p, o)
              : t.is_int8_channel()                    ? run_all_gather_global(s, p, o)
              : plan::has_tensor_amax(t.contract())    ? run_all_gather_tensor_amax(s, p, o)
                                                       : run_all_gather_local(s, p, o);
          break;
        case plan::Collective::all_to_all:
          r = run_all_to_all(s, p, o);
          sum_drift = true;
          break;
        case plan::Collective::pool_mean:
          r = run_pool_mean(s, p, o);
          break;
      }
      reduce_across_ranks(s, r, sum_drift);
    });
    r.name = t.name;
    r.collective = plan::collective_name(t.collective);
    r.quantize = t.quantize;
    r.scale = t.scale == plan::ScaleScope::global ? "global" : "local";
    r.shape = t.shape;
    r.dtype = t.dtype;
    r.axis = t.axis;
    r.to_axis = t.to_axis;
    r.pool = t.pool;
    reports.push_back(std::move(r));
  }
  return reports;
}

}  // namespace qexact::dist
