// Tensors in memory (a state_dict): the plan of a file, quantized tensor by tensor in name
// order; a tensor the contract refuses for its values is skipped on the spot (nothing to
// re-lay-out in memory).
#include <algorithm>

#include "checkpoint/plan.hpp"
#include "checkpoint/tensor_stats.hpp"
#include "io/printable.hpp"
#include "io/safetensors.hpp"
#include "io/shape_bytes.hpp"

namespace qexact::checkpoint {

TensorsResult quantize_tensors(const Contract& c, const std::vector<Input>& inputs,
                               const std::map<std::string, std::string>& metadata, const Options& o) {
  using namespace detail;
  check_quantizable(c, metadata, "the input");
  std::vector<const Input*> sorted;
  for (const Input& in : inputs) sorted.push_back(&in);
  std::sort(sorted.begin(), sorted.end(), [](const Input* a, const Input* b) { return a->name < b->name; });
  std::vector<Source> sources;
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    const Input& in = *sorted[i];
    if (i > 0 && sorted[i - 1]->name == in.name) fail(ErrorKind::bad_argument, "two tensors are named '" + io::printable(in.name) + "'");
    const std::size_t itemsize = safetensors::itemsize(in.dtype);  // rejects an unknown dtype name
    for (std::int64_t d : in.view.shape)
      if (d < 0) fail(ErrorKind::bad_argument, "tensor '" + io::printable(in.name) + "': negative dimension in " + shape_str(in.view.shape));
    const auto nbytes = io::shape_bytes(in.view.shape, itemsize);
    if (!nbytes) fail(ErrorKind::bad_argument, "tensor '" + io::printable(in.name) + "': shape " + shape_str(in.view.shape) + " is too large");
    if (const auto f = float_dtype(in.dtype); f && *f != in.view.dtype)
      fail(ErrorKind::bad_argument, "tensor '" + io::printable(in.name) + "' is named " + in.dtype + " but holds " +
                                        dtype_name(in.view.dtype) + " values");
    sources.push_back(Source{in.name, in.dtype, in.view.shape, *nbytes});
  }

  Plan plan = make_plan(c, sources, o, {});
  TensorsResult result;
  std::vector<TensorSummary> rows;
  for (std::size_t i = 0; i < sources.size(); ++i) {
    const Source& s = sources[i];
    if (plan.tensors[i].action == Action::quantize) {
      const TensorView& x = sorted[i]->view;
      std::string reason;
      std::optional<QuantResult> r = quantize_one(c, x, plan.tensors[i], o.run, reason);
      if (r) {
        TensorSummary row{s.name, s.shape, x.dtype, 0, 0, s.nbytes, output_bytes(*r)};
        if (x.is_contiguous()) {
          measure(c, x, *r, o.run, row);
        } else {
          const Tensor dense = contiguous_copy(x);
          measure(c, dense.view(), *r, o.run, row);
        }
        rows.push_back(std::move(row));
        const std::vector<StoredOutput>& stored = plan.tensors[i].stored;
        Tensor* moved[] = {&r->payload, &r->scale, &r->tensor_scale};
        for (std::size_t k = 0; k < stored.size(); ++k)
          result.outputs.push_back(Output{stored[k].name, stored[k].dtype, std::move(*moved[k])});
        continue;
      }
      plan.skip(i, s, std::move(reason), o.strict);
    }
    result.passed_through.push_back(s.name);
  }
  std::sort(result.outputs.begin(), result.outputs.end(), [](const Output& a, const Output& b) { return a.name < b.name; });
  result.metadata = output_metadata(c, metadata, sources, plan);
  result.summary = make_summary(sources, plan, std::move(rows));
  return result;
}

}  // namespace qexact::checkpoint
