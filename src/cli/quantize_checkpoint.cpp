#include "cli/quantize_checkpoint.hpp"

#include <unistd.h>

#include <cstdio>
#include <ostream>

#include "io/printable.hpp"

namespace qexact::cli {
namespace {

const char* stage_name(checkpoint::Stage s) {
  switch (s) {
    case checkpoint::Stage::read: return "read";
    case checkpoint::Stage::quantize: return "quantize";
    case checkpoint::Stage::write: return "write";
  }
  return "";
}

// Input bytes done of all, with the stage and the tensor at hand.
class ProgressBar {
 public:
  ProgressBar() : on_(::isatty(STDERR_FILENO) == 1) {}
  void operator()(const checkpoint::Progress& p) const {
    if (!on_) return;
    constexpr std::uint64_t kWidth = 30;
    const std::uint64_t filled = p.total == 0 ? kWidth : p.done * kWidth / p.total;
    std::fprintf(stderr, "\r[%s%s] %5.1f%% %-8s %-40.40s", std::string(filled, '#').c_str(),
                 std::string(kWidth - filled, '.').c_str(),
                 p.total == 0 ? 100.0 : 100.0 * static_cast<double>(p.done) / static_cast<double>(p.total),
                 stage_name(p.stage), io::printable(p.tensor).c_str());
    std::fflush(stderr);
  }
  ~ProgressBar() {
    if (on_) std::fputc('\n', stderr);
  }

 private:
  bool on_;
};

}  // namespace

int quantize_checkpoint(const Contract& c, const CheckpointOptions& o, std::ostream& out) {
  checkpoint::FileResult r;
  {
    // Ended (its line closed) before the summary is printed: both may go to one terminal.
    const ProgressBar bar;
    r = checkpoint::quantize_file(c, o.input, o.output, o.options, [&](const checkpoint::Progress& p) { bar(p); });
  }
  out << checkpoint::summary_text(r.summary);
  return 0;
}

int quantize_model_folder(const Contract& c, const FolderCliOptions& o, std::ostream& out) {
  model::FolderResult r;
  {
    const ProgressBar bar;
    r = model::quantize_folder(c, o.input, o.output, o.options, [&](const checkpoint::Progress& p) { bar(p); });
  }
  out << checkpoint::summary_text(r.summary);
  for (const std::string& note : r.notes) out << "note: " << note << "\n";
  return 0;
}

}  // namespace qexact::cli
