// `qexact presets`: every named contract grouped by the stack it reproduces, its one-line
// description, what verifies it and all its parameters; `--markdown` prints the same as one table, so docs need not copy it by hand.
#include <iostream>
#include <memory>
#include <string>

#include "cli/commands.hpp"
#include "qexact/contract.hpp"

namespace qexact::cli {
namespace {

std::string param_list(const std::string& name) {
  std::string out;
  for (const auto& [key, value] : params(make_preset(name))) out += (out.empty() ? "" : " ") + key + '=' + value;
  return out;
}

// A table cell: '|' would end the cell early.
std::string cell(std::string s) {
  for (std::size_t i = 0; (i = s.find('|', i)) != std::string::npos; i += 2) s.replace(i, 1, "\\|");
  return s;
}

int run_presets(bool markdown) {
  // preset_names() is in stack order: each stack's presets follow its heading.
  if (markdown) {
    std::cout << "| stack | preset | family | reproduces | verified against | parameters |\n|---|---|---|---|---|---|\n";
    for (const std::string& name : preset_names())
      std::cout << "| " << preset_stack(name) << " | `" << name << "` | " << family_name(make_preset(name).family) << " | "
                << cell(preset_description(name)) << " | " << preset_verified(name) << " | `" << param_list(name)
                << "` |\n";
  } else {
    for (const auto& [stack, title] : preset_stacks()) {
      std::cout << "== " << stack << ": " << title << " ==\n";
      for (const std::string& name : preset_names())
        if (preset_stack(name) == stack)
          std::cout << name << "  " << preset_description(name) << "  [verified against: " << preset_verified(name)
                    << "]\n    " << param_list(name) << '\n';
    }
  }
  std::cout << std::flush;
  return 0;
}

}  // namespace

void add_presets(CLI::App& app, Action& action) {
  CLI::App* sub = app.add_subcommand("presets", "List the named contracts with their parameters");
  auto markdown = std::make_shared<bool>(false);
  sub->add_flag("--markdown", *markdown, "One Markdown table (stack, preset, family, reproduces, verified against, parameters)");
  sub->callback([markdown, &action] { action = [markdown] { return run_presets(*markdown); }; });
}

}  // namespace qexact::cli
