// Helpers of the multi-rank tests: a scratch directory per test, and `mpirun ... qexact ...`
// bounded by `timeout`, so a hang fails the test instead of stalling CI. CMake compiles in
// QEXACT_CLI_PATH (the binary) and QEXACT_MPIRUN (the mpirun command with its flags).
#pragma once
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace qexact::test {

namespace fs = std::filesystem;
using json = nlohmann::json;

inline constexpr int kRunTimeoutS = 100;

inline const std::string kCli = QEXACT_CLI_PATH;
inline const std::string kMpirun = QEXACT_MPIRUN;

inline fs::path scratch_root() {
  return fs::temp_directory_path() / ("qexact-dist-" + std::to_string(::getpid()));
}

// The process's scratch root goes when its tests end, and stays (named on stderr) when one failed:
// its files (the plan, mpirun's stdout and stderr) are what a failure is read from.
class ScratchRootCleanup : public ::testing::Environment {
 public:
  void TearDown() override {
    const fs::path root = scratch_root();
    if (!fs::exists(root)) return;
    if (::testing::UnitTest::GetInstance()->Passed()) {
      std::error_code ignored;
      fs::remove_all(root, ignored);
    } else {
      std::fprintf(stderr, "multi-rank test files kept in %s\n", root.c_str());
    }
  }
};
inline ::testing::Environment* const kScratchRootCleanup =
    ::testing::AddGlobalTestEnvironment(new ScratchRootCleanup);

inline fs::path scratch_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = std::string(info->test_suite_name()) + "." + info->name();
  for (char& c : name)
    if (c == '/') c = '_';
  const fs::path dir = scratch_root() / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

inline std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct MpiOutcome {
  int status = -1;
  std::string out, err;
};

// `mpirun -np N qexact ARGS` (or an MPMD line given whole in `ranks`), bounded by timeout.
inline MpiOutcome mpirun_line(const std::string& ranks, const fs::path& dir) {
  const fs::path out = dir / "stdout.txt", err = dir / "stderr.txt";
  std::string cmd = "cd '";
  cmd += dir.string();
  cmd += "' && timeout ";
  cmd += std::to_string(kRunTimeoutS);
  cmd += " ";
  cmd += kMpirun;
  cmd += " ";
  cmd += ranks;
  cmd += " > '";
  cmd += out.string();
  cmd += "' 2> '";
  cmd += err.string();
  cmd += "'";
  const int raw = std::system(cmd.c_str());
  MpiOutcome r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.out = read_text(out);
  r.err = read_text(err);
  EXPECT_NE(r.status, 124) << "mpirun timed out (a hang): " << cmd;
  return r;
}

inline MpiOutcome mpirun(int np, const std::string& args, const fs::path& dir) {
  return mpirun_line("-np " + std::to_string(np) + " '" + kCli + "' " + args, dir);
}

// One plan-file tensor entry: bf16, cut along axis 1 (all_to_all regathered along axis 2), quantized
// with preset `quantize` unless it is null; `extra` adds or overrides keys.
inline json plan_tensor(const std::string& name, const std::vector<long>& shape, const std::string& collective,
                        const json& quantize, const json& extra = json::object()) {
  json t{{"name", name}, {"shape", shape}, {"dtype", "bf16"}, {"collective", collective}, {"axis", 1}};
  if (!quantize.is_null()) t["quantize"] = quantize;
  if (collective == "all_to_all") t["to_axis"] = 2;
  for (auto it = extra.begin(); it != extra.end(); ++it) t[it.key()] = it.value();
  return t;
}

inline int count_of(const std::string& text, const std::string& what) {
  int n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace qexact::test
