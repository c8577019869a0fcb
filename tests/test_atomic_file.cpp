// Atomic publication of output files (io/atomic_file.hpp): contents exact, nothing visible
// before publish, no temporaries left behind, existing neighbours untouched.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "io/atomic_file.hpp"
#include "qexact/error.hpp"

namespace qexact::io {
namespace {
namespace fs = std::filesystem;

// A directory name of its own for the running test: parallel runs (ctest -j, other build trees)
// never share one.
std::string unique_dir_name(const std::string& prefix) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = prefix + info->test_suite_name() + "_" + info->name() + "_" + std::to_string(::getpid());
  for (char& c : name)
    if (c == '/') c = '_';
  return name;
}

class AtomicFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(::testing::TempDir()) /
            unique_dir_name("qexact_atomic_");
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  // Every entry under `dir`, recursively, as paths relative to it (hidden temporaries included).
  static std::set<std::string> tree(const fs::path& dir) {
    std::set<std::string> out;
    for (const auto& e : fs::recursive_directory_iterator(dir)) out.insert(fs::relative(e.path(), dir).string());
    return out;
  }
  static std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }
  static void put(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

  fs::path root_;
};

std::vector<std::uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }

TEST_F(AtomicFileTest, WritesANewFileAndLeavesNoTemporary) {
  write_file_atomic(root_ / "a.bin", bytes(std::string("x\0y", 3)));
  EXPECT_EQ(slurp(root_ / "a.bin"), std::string("x\0y", 3));
  EXPECT_EQ(tree(root_), (std::set<std::string>{"a.bin"}));
}

TEST_F(AtomicFileTest, ReplacesAnExistingFile) {
  put(root_ / "a.bin", "old contents, longer than the new");
  write_file_atomic(root_ / "a.bin", bytes("new"));
  EXPECT_EQ(slurp(root_ / "a.bin"), "new");
  EXPECT_EQ(tree(root_), (std::set<std::string>{"a.bin"}));
}

TEST_F(AtomicFileTest, WritesAnEmptyFile) {
  write_file_atomic(root_ / "empty", {});
  EXPECT_TRUE(fs::exists(root_ / "empty"));
  EXPECT_EQ(fs::file_size(root_ / "empty"), 0u);
}

TEST_F(AtomicFileTest, FailureIsAnIoErrorAndLeavesNoTemporary) {
  fs::create_directories(root_ / "taken");
  put(root_ / "taken" / "inside", "x");
  try {
    write_file_atomic(root_ / "taken", bytes("new"));  // a non-empty directory cannot be replaced
    ADD_FAILURE() << "write succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::io);
    EXPECT_NE(std::string(e.what()).find("taken"), std::string::npos) << e.what();
  }
  EXPECT_EQ(tree(root_), (std::set<std::string>{"taken", "taken/inside"}));
  EXPECT_THROW(write_file_atomic(root_ / "no_such_dir" / "a.bin", bytes("x")), Error);
}

TEST_F(AtomicFileTest, OutputDirWritesNothingBeforePublish) {
  OutputDir out(root_ / "new" / "nested");
  out.add("one.npy", bytes("1"));
  out.add("two.json", std::string("{}"));
  EXPECT_TRUE(tree(root_).empty());
  out.publish();
  EXPECT_EQ(tree(root_), (std::set<std::string>{"new", "new/nested", "new/nested/one.npy", "new/nested/two.json"}));
  EXPECT_EQ(slurp(root_ / "new" / "nested" / "one.npy"), "1");
  EXPECT_EQ(slurp(root_ / "new" / "nested" / "two.json"), "{}");
}

TEST_F(AtomicFileTest, OutputDirWithTrailingSlash) {
  OutputDir out((root_ / "d").string() + "/");
  out.add("f", bytes("x"));
  out.publish();
  EXPECT_EQ(tree(root_), (std::set<std::string>{"d", "d/f"}));
}

TEST_F(AtomicFileTest, OutputDirIntoAnExistingDirectoryKeepsItsOtherFiles) {
  fs::create_directories(root_ / "d");
  put(root_ / "d" / "keep.txt", "mine");
  put(root_ / "d" / "one.npy", "stale");
  OutputDir out(root_ / "d");
  out.add("one.npy", bytes("fresh"));
  out.add("two.npy", bytes("2"));
  out.publish();
  EXPECT_EQ(tree(root_), (std::set<std::string>{"d", "d/keep.txt", "d/one.npy", "d/two.npy"}));
  EXPECT_EQ(slurp(root_ / "d" / "one.npy"), "fresh");
  EXPECT_EQ(slurp(root_ / "d" / "keep.txt"), "mine");
}

TEST_F(AtomicFileTest, OutputDirOntoARegularFileFailsAndWritesNothing) {
  put(root_ / "f", "a file");
  OutputDir out(root_ / "f");
  out.add("one.npy", bytes("1"));
  try {
    out.publish();
    ADD_FAILURE() << "publish succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::io);
    EXPECT_NE(std::string(e.what()).find("not a directory"), std::string::npos) << e.what();
  }
  EXPECT_EQ(tree(root_), (std::set<std::string>{"f"}));
  EXPECT_EQ(slurp(root_ / "f"), "a file");
}

TEST_F(AtomicFileTest, OutputDirFailureMidwayRemovesTheStagingDirectory) {
  // A name that is a directory inside the target cannot be replaced by a file: the rename of
  // the second file fails after the first was published; no staging directory survives.
  fs::create_directories(root_ / "d" / "two.npy" / "sub");
  OutputDir out(root_ / "d");
  out.add("one.npy", bytes("1"));
  out.add("two.npy", bytes("2"));
  EXPECT_THROW(out.publish(), Error);
  EXPECT_EQ(tree(root_), (std::set<std::string>{"d", "d/one.npy", "d/two.npy", "d/two.npy/sub"}));
}

TEST_F(AtomicFileTest, OutputDirRejectsPathsDuplicatesAndASecondPublish) {
  OutputDir out(root_ / "d");
  EXPECT_THROW(out.add("sub/one.npy", bytes("1")), Error);
  EXPECT_THROW(out.add("", bytes("1")), Error);
  out.add("one.npy", bytes("1"));
  EXPECT_THROW(out.add("one.npy", bytes("2")), Error);
  out.publish();
  EXPECT_THROW(out.publish(), Error);
  EXPECT_EQ(slurp(root_ / "d" / "one.npy"), "1");
}

}  // namespace
}  // namespace qexact::io
