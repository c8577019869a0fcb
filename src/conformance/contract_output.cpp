#include "conformance/contract_output.hpp"

#include "contracts/family_table.hpp"
#include "qexact/pool.hpp"

namespace qexact::conformance {

OutputKind output_kind(const Contract& c) {
  return family_traits(c.family).quantizes ? OutputKind::payload_scale : OutputKind::single;
}

ContractOutput run_contract(const Contract& c, const TensorView& x, const RunOptions& o) {
  validate(c);
  ContractOutput out;
  if (family_traits(c.family).quantizes) {
    QuantResult r = quantize(c, x, o);
    out.payload = std::move(r.payload);
    out.scale = std::move(r.scale);
    out.tensor_scale = std::move(r.tensor_scale);
  } else if (c.family == Family::hif4) {
    out.output = hifloat4_fake_quant(x, c.qdim, o);
  } else {
    out.output = pooled_block_mean(x, c.pool, c.pool_out, o, c.divisor);
  }
  return out;
}

}  // namespace qexact::conformance
