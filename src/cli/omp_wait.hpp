// How long an idle OpenMP thread of the CLI spins before it sleeps.
//
// libgomp spins 300,000 times by default before it waits on a futex. On a loaded machine those
// spins take the cores the busy threads need: a 256 MB checkpoint under 7 busy processes on 2
// cores (median of 7) took 2.03 s by default, 1.67 s on one thread and 1.49 s with 3,000 spins.
// Sleeping at once (OMP_WAIT_POLICY=passive) instead makes each region of a small kernel cost a
// futex wake (a 64K-element int8.token quantize in cache: 13 -> 2.2 GB/s); 3,000 spins keep the
// in-cache speed and give the cores back.
//
// libgomp reads its environment once, when it is loaded, and a value set from .preinit_array
// is lost (libc's own initialisation resets environ to the array the process started with), so
// the CLI sets GOMP_SPINCOUNT and executes itself again, before anything else. A user's own
// OMP_WAIT_POLICY or GOMP_SPINCOUNT is left as it is (and no second exec happens).
#pragma once

namespace qexact::cli {

inline constexpr const char* kDefaultSpinCount = "3000";

// Returns where nothing needs doing (or the exec failed); otherwise does not return.
void default_omp_spin_count(char** argv);

}  // namespace qexact::cli
