// Which SIMD target the fast kernels dispatch to, and QEXACT_FORCE_TARGET to choose it.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/common/simd_target.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace qexact::kernels::HWY_NAMESPACE {
// Compiled once per target: reports the target it was compiled for, so a caller can see which
// one HWY_DYNAMIC_DISPATCH actually ran.
std::int64_t CompiledTarget() { return HWY_TARGET; }
}  // namespace qexact::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <cstdlib>
#include <mutex>
#include <string>

#include "kernels/cpu/common/simd_target.hpp"
#include "qexact/error.hpp"

namespace qexact::kernels {

HWY_EXPORT(CompiledTarget);

namespace {

std::int64_t target_by_name(const std::string& name) {
  for (std::int64_t t : hwy::SupportedAndGeneratedTargets())
    if (name == hwy::TargetName(t)) return t;
  std::string known;
  for (std::int64_t t : hwy::SupportedAndGeneratedTargets()) known += std::string(known.empty() ? "" : ", ") + hwy::TargetName(t);
  fail(ErrorKind::bad_argument, "QEXACT_FORCE_TARGET=" + name + " is not a target this binary has and this CPU runs (" +
                                    known + ")");
}

}  // namespace

void apply_forced_target() {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* forced = std::getenv("QEXACT_FORCE_TARGET");
    if (forced != nullptr && *forced != '\0') hwy::SetSupportedTargetsForTest(target_by_name(forced));
  });
}

std::vector<std::string> available_targets() {
  std::vector<std::string> out;
  for (std::int64_t t : hwy::SupportedAndGeneratedTargets()) out.emplace_back(hwy::TargetName(t));
  return out;
}

void force_target(const std::string& name) {
  if (name.empty()) {
    hwy::SetSupportedTargetsForTest(0);
    return;
  }
  hwy::SetSupportedTargetsForTest(0);  // look the name up among all targets, not a forced subset
  hwy::SetSupportedTargetsForTest(target_by_name(name));
}

std::string active_target() {
  apply_forced_target();
  return hwy::TargetName(HWY_DYNAMIC_DISPATCH(CompiledTarget)());
}

}  // namespace qexact::kernels
#endif  // HWY_ONCE
