#include "conformance/contract_output.hpp"

#include "qexact/pool.hpp"

namespace qexact::conformance {

OutputKind output_kind(const Contract& c) {
  return c.family == Family::hif4 || c.family == Family::pool ? OutputKind::single : OutputKind::payload_scale;
}

ContractOutput run_contract(const Contract& c, const TensorView& x, const RunOptions& o) {
  validate(c);
  ContractOutput out;
  switch (c.family) {
    case Family::hif4:
      out.output = hifloat4_fake_quant(x, c.qdim, o);
      break;
    case Family::pool:
      out.output = pooled_block_mean(x, c.pool, c.pool_out, o, c.divisor);
      break;
    case Family::mx:
    case Family::int8_block:
    case Family::int8_token:
    case Family::int8_group:
    case Family::fp8_scaled:
    case Family::nvfp4: {
      QuantResult r = quantize(c, x, o);
      out.payload = std::move(r.payload);
      out.scale = std::move(r.scale);
      out.tensor_scale = std::move(r.tensor_scale);
      break;
    }
  }
  return out;
}

}  // namespace qexact::conformance
