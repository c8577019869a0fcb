// Scaffolding for tests that run the built qexact binary as a process (its path comes from the
// QEXACT_CLI environment variable, which CMake sets for the files listed in QEXACT_CLI_TESTS).
//
// A new CLI test file includes this header, adds its name to QEXACT_CLI_TESTS in CMakeLists.txt,
// and derives its fixture from qexact::test::CliTest (or uses it directly):
//
//   class MyCliTest : public qexact::test::CliTest {
//    protected:
//     MyCliTest() : CliTest("qexact_my_") {}
//   };
//   TEST_F(MyCliTest, Works) {
//     put("in.json", "{}");
//     const auto r = run({"mycommand", "in.json"});
//     ASSERT_EQ(r.status, 0) << r.err;
//   }
//
// A fixture that overrides SetUp() calls CliTest::SetUp() first and returns when IsSkipped().
#pragma once
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "io/npy.hpp"
#include "qexact/tensor.hpp"

namespace qexact::test {

// What one run of the CLI did.
struct RunResult {
  int status = -1;  // the exit status, or -1 when the process did not exit normally
  std::string out, err;
};

// The whole file as bytes ("" when it cannot be opened).
inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// `s` as one word for /bin/sh, whatever it holds.
inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// The bytes of `t` as a .npy file.
inline std::string encoded(const Tensor& t) {
  const auto b = npy::encode(t.view());
  return std::string(b.begin(), b.end());
}

// Values from a seeded normal distribution (scaled by 3), the seed printed so a failure can be
// replayed.
inline std::vector<float> random_values(std::int64_t n, std::uint32_t seed) {
  std::cout << "seed " << seed << "\n";
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = normal(rng);
  return v;
}

// A directory name of its own for the running test: parallel runs (ctest -j, other build trees)
// never share one.
inline std::string unique_dir_name(const std::string& prefix) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = prefix + info->test_suite_name() + "_" + info->name() + "_" + std::to_string(::getpid());
  for (char& c : name)
    if (c == '/') c = '_';
  return name;
}

// Each test gets a fresh, empty work() directory (under the gtest temp dir, named from
// `dir_prefix` and the test) where the CLI runs; it is removed after the test. Skips the test
// when QEXACT_CLI is not set.
class CliTest : public ::testing::Test {
 protected:
  explicit CliTest(std::string dir_prefix = "qexact_cli_") : dir_prefix_(std::move(dir_prefix)) {}

  void SetUp() override {
    const char* cli = std::getenv("QEXACT_CLI");
    if (cli == nullptr || *cli == '\0') GTEST_SKIP() << "QEXACT_CLI is not set (the CLI is not built)";
    cli_ = cli;
    root_ = std::filesystem::path(::testing::TempDir()) / unique_dir_name(dir_prefix_);
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(work());
    std::filesystem::create_directories(root_ / "logs");
  }
  void TearDown() override {
    if (!root_.empty()) std::filesystem::remove_all(root_);
  }

  std::filesystem::path work() const { return root_ / "work"; }

  // `command` through /bin/sh in work(); its exit status (-1: did not exit normally).
  int sh(const std::string& command) const {
    const std::string cmd = "cd " + shell_quote(work().string()) + " && { " + command + "\n}";
    // (A command ending in '&' runs in the background; sh returns at once.)
    const int raw = std::system(cmd.c_str());
    return raw != -1 && WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  }
  // The CLI's path, quoted for sh().
  std::string q() const { return shell_quote(cli_); }

  // qexact ARGS (quoted for sh) under strace with a fault injected (strace -e inject=INJECT); its
  // exit status. strace's own output is discarded, qexact's stderr kept in work()/err.txt.
  // LeakSanitizer cannot run under ptrace: off for the traced run of an ASan build.
  int under_strace(const std::string& inject, const std::string& args) const {
    return sh("ASAN_OPTIONS=\"${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0\" strace -f -qq -o /dev/null -e inject=" +
              inject + " " + q() + " " + args + " 2>err.txt >/dev/null");
  }

  // Every later run() is killed after `seconds` (status 137): for the tests of inputs that once
  // made qexact wait forever, so that a regression fails instead of hanging the suite.
  void limit_run_time(int seconds) { run_prefix_ = "timeout -s KILL " + std::to_string(seconds) + " "; }

  // Runs `qexact ARGS` in work(), capturing stdout and stderr in files outside it.
  RunResult run(const std::vector<std::string>& args) const {
    // Appended piece by piece: GCC 12's -Wrestrict misfires on `"literal" + std::string&&` at -O3.
    std::string cmd = "cd ";
    cmd += shell_quote(work().string());
    cmd += " && ";
    cmd += run_prefix_;
    cmd += shell_quote(cli_);
    for (const auto& a : args) {
      cmd += ' ';
      cmd += shell_quote(a);
    }
    const std::filesystem::path out = root_ / "logs" / "stdout", err = root_ / "logs" / "stderr";
    cmd += " >";
    cmd += shell_quote(out.string());
    cmd += " 2>";
    cmd += shell_quote(err.string());
    cmd += " </dev/null";
    const int raw = std::system(cmd.c_str());
    RunResult r;
    r.status = raw != -1 && WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    r.out = slurp(out);
    r.err = slurp(err);
    return r;
  }

  // Every path under work(), relative to it.
  std::set<std::string> work_tree() const {
    std::set<std::string> out;
    for (const auto& e : std::filesystem::recursive_directory_iterator(work()))
      out.insert(std::filesystem::relative(e.path(), work()).string());
    return out;
  }

  // Files in work(), by path relative to it.
  void put(const std::string& name, const std::string& bytes) const {
    std::ofstream(work() / name, std::ios::binary) << bytes;
  }
  void put_npy(const std::string& name, const Tensor& t) const { put(name, encoded(t)); }
  std::string get(const std::string& name) const { return slurp(work() / name); }

  // The command failed as bad input must: status 2, nothing on stdout, stderr exactly one line
  // "qexact: error: ...\n" containing `word`, and work() exactly as it was before.
  void expect_rejected(const std::vector<std::string>& args, const std::string& word) const {
    const std::set<std::string> before = work_tree();
    const RunResult r = run(args);
    EXPECT_EQ(r.status, 2) << r.err;
    EXPECT_EQ(r.out, "");
    const auto err_lines = lines_of(r.err);
    ASSERT_EQ(err_lines.size(), 1u) << r.err;
    EXPECT_EQ(r.err.back(), '\n') << r.err;
    EXPECT_EQ(err_lines[0].rfind("qexact: error: ", 0), 0u) << r.err;
    EXPECT_NE(err_lines[0].find(word), std::string::npos) << "expected '" << word << "' in: " << r.err;
    EXPECT_EQ(work_tree(), before);
  }

 private:
  std::string dir_prefix_;
  std::string run_prefix_;
  std::string cli_;
  std::filesystem::path root_;
};

}  // namespace qexact::test
