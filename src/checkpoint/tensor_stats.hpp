// The summary's numbers for one quantized tensor, computed chunk by chunk: memory stays a
// constant (a chunk's temporaries), whatever the tensor's size.
#pragma once
#include "qexact/checkpoint.hpp"

namespace qexact::checkpoint::detail {

// SQNR and saturated share of `x` (contiguous) quantized as `r`, into row.sqnr_db and
// row.saturated_pct.
void measure(const Contract& c, const TensorView& x, const QuantResult& r, const RunOptions& run, TensorSummary& row);

}  // namespace qexact::checkpoint::detail
