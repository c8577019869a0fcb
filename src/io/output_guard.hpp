// What an output path may be, checked before any work and again just before publishing.
//
// qexact writes an output only where doing so destroys nothing it should not:
//  - the last component of an output path is never a symbolic link (refused, not written
//    through: replacing the link would break it, and writing through it would let an output
//    land outside the place the user named), nor a device, FIFO, socket or other special file;
//  - an output never is, and an output directory never holds, one of the command's inputs
//    (compared by device and inode, so hard links and other spellings count);
//  - the directory that receives the output exists (for a file) or can be created (for a
//    directory), and is writable;
//  - an existing output directory is replaced only with `force`, and only when it holds nothing
//    but files the command itself writes (and qexact temporaries): --force never deletes
//    anything else.
// Each check throws qexact::Error naming the path and the reason; the check functions also
// remove stale qexact temporaries from the receiving directory (temp_name.hpp).
#pragma once
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace qexact::io {

using Paths = std::vector<std::filesystem::path>;

// An output file: absent or a regular file (not a link), not one of `inputs`, in an existing,
// writable directory.
void check_output_file(const std::filesystem::path& out, const Paths& inputs = {});

// An output directory whose files are `own_names`: absent (its first existing ancestor writable),
// or, with `force`, a real directory holding only `own_names` and qexact temporaries. It must not
// be, or hold, any of `inputs`. Without `force` an existing directory is refused.
void check_output_dir(const std::filesystem::path& out, const std::vector<std::string>& own_names, bool force,
                      const Paths& inputs = {});

// "out/" names the directory "out".
std::filesystem::path without_trailing_slash(const std::filesystem::path& p);

// The directory a file or directory `path` lives in ("." for a bare name).
std::filesystem::path directory_of(const std::filesystem::path& path);

}  // namespace qexact::io
