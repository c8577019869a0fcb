// SIMD target selection for the fast kernels (google/highway dynamic dispatch). The binary is
// built for several x86 targets and picks the best one the CPU runs; the environment variable
// QEXACT_FORCE_TARGET (e.g. AVX2, SSE4, EMU128) forces one, as simdjson's
// SIMDJSON_FORCE_IMPLEMENTATION does, so that every target's bytes can be checked.
#pragma once
#include <string>
#include <vector>

namespace qexact::kernels {

// Applies QEXACT_FORCE_TARGET once per process; every kernel entry point calls it first.
void apply_forced_target();
// Targets compiled into this binary that this CPU supports, best first.
std::vector<std::string> available_targets();
// Restricts dispatch to the named target ("" restores the default). For tests and benchmarks.
void force_target(const std::string& name);
// Name of the target the kernels dispatch to now, reported by code compiled for that target.
std::string active_target();

}  // namespace qexact::kernels
