// The names of qexact's temporaries (files and staging directories beside an output), and the
// removal of stale ones.
//
// A temporary is named ".<stem>.qexact-tmp.<host>.<pid>.<salt>.<n>": hidden, recognisably
// qexact's, and naming the process that made it. A process killed before it renamed its
// temporary into place (kill -9, power loss) leaves it behind; the next qexact run that writes
// into the same directory removes every qexact temporary whose process is gone: same host name
// and no live process with that pid. Anything else in the directory is never touched.
#pragma once
#include <filesystem>
#include <string>

namespace qexact::io {

// A fresh candidate name in `dir` for a temporary of output `stem` (pid, per-process counter,
// random salt). The caller creates it with O_EXCL / mkdir and tries again on a collision.
std::filesystem::path temp_candidate(const std::filesystem::path& dir, const std::string& stem);

// True for a name temp_candidate makes (of any stem, host or process).
bool is_qexact_temp_name(const std::string& name);

// Removes, from `dir` (not recursively into other entries), the qexact temporaries of this host
// whose process no longer runs; returns how many. Errors are ignored: cleaning is best effort and
// never blocks the write that triggers it.
int remove_stale_temporaries(const std::filesystem::path& dir);

}  // namespace qexact::io
