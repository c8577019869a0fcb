// Atomic publication of output files (io/atomic_file.hpp): contents exact, nothing visible
// before publish, no temporaries left behind, directories replaced whole and only with force, links,
// special files and inputs never replaced, stale temporaries of dead processes cleaned.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "io/atomic_file.hpp"
#include "io/temp_name.hpp"
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
  OutputDir out(root_ / "new" / "nested", {"one.npy", "two.json"});
  out.add("one.npy", bytes("1"));
  out.add("two.json", std::string("{}"));
  EXPECT_TRUE(tree(root_).empty());
  out.publish();
  EXPECT_EQ(tree(root_), (std::set<std::string>{"new", "new/nested", "new/nested/one.npy", "new/nested/two.json"}));
  EXPECT_EQ(slurp(root_ / "new" / "nested" / "one.npy"), "1");
  EXPECT_EQ(slurp(root_ / "new" / "nested" / "two.json"), "{}");
}

TEST_F(AtomicFileTest, OutputDirWithTrailingSlash) {
  OutputDir out((root_ / "d").string() + "/", {"f"});
  out.add("f", bytes("x"));
  out.publish();
  EXPECT_EQ(tree(root_), (std::set<std::string>{"d", "d/f"}));
}

TEST_F(AtomicFileTest, OutputDirRefusesAnExistingDirectoryWithoutForce) {
  fs::create_directories(root_ / "d");
  put(root_ / "d" / "one.npy", "old");
  try {
    OutputDir out(root_ / "d", {"one.npy"});
    ADD_FAILURE() << "an existing directory was accepted without force";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--force"), std::string::npos) << e.what();
  }
  EXPECT_EQ(slurp(root_ / "d" / "one.npy"), "old");
}

TEST_F(AtomicFileTest, OutputDirWithForceReplacesTheWholeDirectory) {
  fs::create_directories(root_ / "d");
  put(root_ / "d" / "one.npy", "old one");
  put(root_ / "d" / "two.npy", "old two");
  OutputDir out(root_ / "d", {"one.npy", "two.npy"}, /*force=*/true);
  out.add("one.npy", bytes("new one"));
  out.add("two.npy", bytes("new two"));
  out.publish();
  EXPECT_EQ(tree(root_), (std::set<std::string>{"d", "d/one.npy", "d/two.npy"}));
  EXPECT_EQ(slurp(root_ / "d" / "one.npy"), "new one");
  EXPECT_EQ(slurp(root_ / "d" / "two.npy"), "new two");
}

TEST_F(AtomicFileTest, OutputDirWithForceNeverDeletesForeignFiles) {
  fs::create_directories(root_ / "d");
  put(root_ / "d" / "keep.txt", "mine");
  EXPECT_THROW(OutputDir(root_ / "d", {"one.npy"}, /*force=*/true), Error);
  EXPECT_EQ(tree(root_), (std::set<std::string>{"d", "d/keep.txt"}));
}

TEST_F(AtomicFileTest, OutputDirHoldingAnInputIsRefused) {
  fs::create_directories(root_ / "d");
  put(root_ / "d" / "one.npy", "input");
  try {
    OutputDir out(root_ / "d", {"one.npy"}, /*force=*/true, {root_ / "d" / "one.npy"});
    ADD_FAILURE() << "an output directory holding an input was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("input"), std::string::npos) << e.what();
  }
  EXPECT_EQ(slurp(root_ / "d" / "one.npy"), "input");
}

TEST_F(AtomicFileTest, OutputDirOntoARegularFileFailsAndWritesNothing) {
  put(root_ / "f", "a file");
  try {
    OutputDir out(root_ / "f", {"one.npy"}, /*force=*/true);
    ADD_FAILURE() << "a regular file was accepted as an output directory";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::io);
    EXPECT_NE(std::string(e.what()).find("not a directory"), std::string::npos) << e.what();
  }
  EXPECT_EQ(tree(root_), (std::set<std::string>{"f"}));
  EXPECT_EQ(slurp(root_ / "f"), "a file");
}

TEST_F(AtomicFileTest, OutputDirAppearingBeforePublishIsNotMergedInto) {
  // Another writer creates the target between the check and the publication: without force the
  // publication fails and neither the other writer's files nor a staging directory are mixed in.
  OutputDir out(root_ / "d", {"one.npy"});
  out.add("one.npy", bytes("mine"));
  fs::create_directories(root_ / "d");
  put(root_ / "d" / "one.npy", "theirs");
  EXPECT_THROW(out.publish(), Error);
  EXPECT_EQ(tree(root_), (std::set<std::string>{"d", "d/one.npy"}));
  EXPECT_EQ(slurp(root_ / "d" / "one.npy"), "theirs");
}

TEST_F(AtomicFileTest, OutputDirRejectsUndeclaredNamesDuplicatesMissingFilesAndASecondPublish) {
  EXPECT_THROW(OutputDir(root_ / "d", {"sub/one.npy"}), Error);
  OutputDir out(root_ / "d", {"one.npy", "two.npy"});
  EXPECT_THROW(out.add("three.npy", bytes("3")), Error);
  EXPECT_THROW(out.add("", bytes("1")), Error);
  out.add("one.npy", bytes("1"));
  EXPECT_THROW(out.add("one.npy", bytes("2")), Error);
  EXPECT_THROW(out.publish(), Error);  // two.npy is missing
  EXPECT_FALSE(fs::exists(root_ / "d"));
}

TEST_F(AtomicFileTest, WriteRefusesSymlinksAndSpecialFiles) {
  put(root_ / "target", "kept");
  fs::create_symlink("target", root_ / "link");
  EXPECT_THROW(write_file_atomic(root_ / "link", bytes("new")), Error);
  EXPECT_TRUE(fs::is_symlink(root_ / "link"));
  EXPECT_EQ(slurp(root_ / "target"), "kept");
  EXPECT_THROW(write_file_atomic("/dev/null", bytes("new")), Error);
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  EXPECT_THROW(check_output_file(root_ / "target", {root_ / "target"}), Error);
  fs::create_hard_link(root_ / "target", root_ / "hard");
  EXPECT_THROW(check_output_file(root_ / "hard", {root_ / "target"}), Error);
}

TEST_F(AtomicFileTest, StaleTemporariesOfDeadProcessesAreRemovedOthersKept) {
  // A child that exits at once gives a pid that is certainly gone (until reused).
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  const std::string mine = temp_candidate(root_, "out.npy").filename().string();
  std::string dead = mine;
  const std::string me = "." + std::to_string(::getpid()) + ".";
  dead.replace(dead.find(me), me.size(), "." + std::to_string(child) + ".");
  put(root_ / mine, "live");
  put(root_ / dead, "stale");
  fs::create_directories(root_ / (dead + "1"));  // a stale staging directory (different counter)
  put(root_ / (dead + "1") / "payload.npy", "stale");
  put(root_ / ".out.npy.tmp.123", "not qexact's naming");
  put(root_ / "out.npy", "output");
  ASSERT_TRUE(is_qexact_temp_name(dead));
  EXPECT_FALSE(is_qexact_temp_name(".out.npy.tmp.123"));
  write_file_atomic(root_ / "other.npy", bytes("x"));
  EXPECT_EQ(tree(root_), (std::set<std::string>{mine, ".out.npy.tmp.123", "out.npy", "other.npy"}));
}

}  // namespace
}  // namespace qexact::io
