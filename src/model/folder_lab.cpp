#include "model/folder_lab.hpp"

#include <algorithm>

#include "conformance/case_dir.hpp"
#include "io/atomic_file.hpp"
#include "io/npy.hpp"
#include "model/linear_weights.hpp"
#include "model/recipe.hpp"

namespace qexact::model {

std::vector<std::string> write_folder_lab(const std::filesystem::path& quantized, const std::filesystem::path& source,
                                          const std::filesystem::path& lab, const FolderLabOptions& o) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(quantized, ec))
    fail(ErrorKind::bad_argument, quantized.string() + " is a file: a lab is made of a model folder (a GGUF file is checked "
                                                       "by `qexact verify`)");
  const Folder q = read_folder(quantized);
  const Folder s = read_folder(source);
  const Recipe r = recipe_of(q, o.preset);
  std::vector<checkpoint::detail::Source> chosen;
  for (const auto& src : quantized_sources(r, q, s))
    if (!(r.format && r.format->shares_tensor_amax(r.contract) && !fused_group(src.name).empty())) chosen.push_back(src);
  if (chosen.empty())
    fail(ErrorKind::bad_input, quantized.string() + " holds no tensor of " + source.string() +
                                   " quantized under its own amax (wrong --source, or --preset?)");
  std::stable_sort(chosen.begin(), chosen.end(),
                   [](const auto& a, const auto& b) { return shape_numel(a.shape) < shape_numel(b.shape); });
  if (chosen.size() > static_cast<std::size_t>(std::max(1, o.max_tensors))) chosen.resize(static_cast<std::size_t>(std::max(1, o.max_tensors)));

  std::vector<conformance::Case> cases;
  for (const auto& src : chosen) {
    conformance::Case c;
    c.name = src.name;
    c.description = "tensor " + src.name + " of " + source.filename().string() + ", as " + quantized.filename().string() +
                    " (" + r.format_name + ") stores it";
    c.input = quantized_input(r, s, src);
    cases.push_back(std::move(c));
  }
  std::vector<conformance::ExportCase> exported;
  for (const conformance::Case& c : cases) exported.push_back({&c, "checkpoint"});
  conformance::write_case_dir(lab, r.contract, exported);
  const std::vector<std::string> files = conformance::device_output_files(r.contract);
  std::vector<std::string> names;
  for (const auto& src : chosen) {
    const std::vector<Tensor> outs = stored_outputs(r, q, src);
    for (std::size_t k = 0; k < outs.size() && k < files.size(); ++k)
      io::write_new_file(lab / src.name / files[k], npy::encode(outs[k].view()));
    names.push_back(src.name);
  }
  return names;
}

}  // namespace qexact::model
