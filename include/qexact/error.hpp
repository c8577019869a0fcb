// Errors: every failure the library reports is a qexact::Error whose message names the problem
// (and the first offending index where there is one). Callers can rely on nothing having been
// written to their outputs when one is thrown from a checked entry point.
#pragma once
#include <stdexcept>
#include <string>

namespace qexact {

enum class ErrorKind {
  bad_argument,   // a parameter, preset name or shape the contract does not accept
  bad_input,      // tensor contents the contract forbids (NaN/Inf where finite-only)
  bad_file,       // a malformed, truncated or unsupported file
  io,             // the operating system refused a read or a write
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& what) : std::runtime_error(what), kind_(kind) {}
  ErrorKind kind() const noexcept { return kind_; }

 private:
  ErrorKind kind_;
};

[[noreturn]] inline void fail(ErrorKind kind, const std::string& what) { throw Error(kind, what); }

}  // namespace qexact
