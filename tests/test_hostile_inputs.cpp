// Inputs that try to hang, exhaust or steer qexact, run through the CLI (QEXACT_CLI): special
// files where a file is expected, documents past their documented bounds, labs whose cases are
// links, a lab used by two runs at once, an `emulate` interrupted by a full disk or a failed
// rename, checkpoint outputs that are not a plain new file, names with control bytes, and plans
// larger than the machine. Every refusal is one "qexact: error:" line that names the problem,
// exit 2, and leaves the working directory as it was; no run may wait on its input (each is
// killed after 60 s, so a regression fails instead of hanging the suite).
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_test_util.hpp"
#include "io/safetensors.hpp"
#include "io/temp_name.hpp"
#include "tensor_test_util.hpp"

namespace qexact {
namespace {

namespace fs = std::filesystem;
using test::RunResult;

class HostileInputs : public test::CliTest {
 protected:
  HostileInputs() : CliTest("qexact_hostile_") {}

  void SetUp() override {
    CliTest::SetUp();
    if (IsSkipped()) return;
    limit_run_time(60);
    put_npy("x.npy", test::f32_tensor({4, 64}, test::random_values(4 * 64, 23)));
  }

  // A file of `size` bytes that starts with `head`, the rest a hole (no disk space used).
  void put_sparse(const std::string& name, const std::string& head, std::uint64_t size) const {
    put(name, head);
    fs::resize_file(work() / name, size);
  }

  // `qexact cases` of hif4 into `dir`; the name of its first case.
  std::string export_lab(const std::string& dir) const {
    const RunResult r = run({"cases", "--preset", "hif4", "--out", dir});
    EXPECT_EQ(r.status, 0) << r.err;
    return nlohmann::json::parse(get(dir + "/manifest.json"))["cases"][0]["name"];
  }

  // The lab's output files and qexact temporaries, anywhere under it.
  std::vector<std::string> outputs_and_temporaries(const std::string& dir) const {
    std::vector<std::string> found;
    for (const auto& e : fs::recursive_directory_iterator(work() / dir)) {
      const std::string name = e.path().filename().string();
      if (name == "output.npy" || io::is_qexact_temp_name(name)) found.push_back(e.path().string());
    }
    return found;
  }
};

// ---- 1. special files and bounds ----

TEST_F(HostileInputs, SpecialFilesAreRefusedWithoutWaitingOnThem) {
  ASSERT_EQ(::mkfifo((work() / "fifo.npy").c_str(), 0600), 0) << std::strerror(errno);
  ASSERT_EQ(::mkfifo((work() / "fifo.json").c_str(), 0600), 0) << std::strerror(errno);
  expect_rejected({"quantize", "--preset", "mx.ocp", "fifo.npy", "--out", "q"}, "not a regular file");
  expect_rejected({"fake-quant", "--preset", "hif4", "fifo.npy", "--out", "y.npy"}, "not a regular file");
  expect_rejected({"plan", "fifo.json"}, "not a regular file");
  // /dev/zero would be read until memory runs out.
  expect_rejected({"quantize", "--preset", "mx.ocp", "/dev/zero", "--out", "q"}, "not a regular file");
  // meta.json of a quantize directory.
  ASSERT_EQ(run({"quantize", "--preset", "mx.ocp", "x.npy", "--out", "q"}).status, 0);
  fs::remove(work() / "q" / "meta.json");
  ASSERT_EQ(::mkfifo((work() / "q" / "meta.json").c_str(), 0600), 0);
  expect_rejected({"dequantize", "q", "--out", "y.npy"}, "not a regular file");
  // A case's input in a lab, for each command that reads it.
  const std::string c = export_lab("lab");
  fs::remove(work() / "lab" / c / "input.npy");
  ASSERT_EQ(::mkfifo((work() / "lab" / c / "input.npy").c_str(), 0600), 0);
  expect_rejected({"emulate", "--preset", "hif4", "lab"}, "not a regular file");
  expect_rejected({"compare", "lab"}, "not a regular file");
  expect_rejected({"infer", "lab"}, "not a regular file");
}

TEST_F(HostileInputs, DocumentsPastTheirBoundsAreRefusedNamingTheBound) {
  // A JSON document over 64 MiB (a hole: no disk used).
  put_sparse("huge.json", "{", (std::uint64_t{64} << 20) + 1);
  expect_rejected({"plan", "huge.json"}, "67108864-byte limit for a JSON document");
  // The same bound on a quantize directory's meta.json, before it is read into memory.
  ASSERT_EQ(run({"quantize", "--preset", "mx.ocp", "x.npy", "--out", "qm"}).status, 0);
  fs::remove(work() / "qm" / "meta.json");
  put_sparse("qm/meta.json", "{", (std::uint64_t{64} << 20) + 1);
  expect_rejected({"dequantize", "qm", "--out", "y.npy"}, "67108865 bytes, larger than the 67108864-byte limit");
  // Nested past 64 levels: refused before a parser builds it.
  put("deep.json", "{\"world\": 2, \"tensors\": " + std::string(100, '[') + std::string(100, ']') + "}");
  expect_rejected({"plan", "deep.json"}, "nested deeper than 64 levels");
  // A safetensors header over the reference reader's 100,000,000 bytes.
  std::string len(8, '\0');
  const std::uint64_t big = 100'000'001;
  for (int i = 0; i < 8; ++i) len[static_cast<std::size_t>(i)] = static_cast<char>(big >> (8 * i));
  put_sparse("big.safetensors", len + "{", 8 + big + 16);
  expect_rejected({"quantize", "--preset", "mx.ocp", "big.safetensors", "--out", "o.safetensors"},
                  "100000000-byte limit for a safetensors header");
  // A nested safetensors header (the format is a map of flat entries).
  const std::string nested = "{\"a\": " + std::string(40, '[') + std::string(40, ']') + "}";
  std::string nested_len(8, '\0');
  nested_len[0] = static_cast<char>(nested.size());
  put("nested.safetensors", nested_len + nested);
  expect_rejected({"quantize", "--preset", "mx.ocp", "nested.safetensors", "--out", "o.safetensors"},
                  "nested deeper than 8 levels");
  // An .npy header over 1 MiB (version 2.0's 32-bit length).
  const std::uint32_t npy_len = (1u << 20) + 64;
  std::string npy = "\x93NUMPY";
  npy += '\x02';
  npy += '\x00';
  for (int i = 0; i < 4; ++i) npy += static_cast<char>(npy_len >> (8 * i));
  put_sparse("long_header.npy", npy + "{", 12 + npy_len);
  expect_rejected({"quantize", "--preset", "mx.ocp", "long_header.npy", "--out", "q"},
                  "1048576-byte limit for an .npy header");
}

// ---- 2. labs: links, exclusive use, all-or-nothing outputs ----

TEST_F(HostileInputs, LinksInALabAreRefusedForReadingAndWriting) {
  const std::string c = export_lab("lab");
  // The case's directory is a link to a directory outside the lab that holds an input.
  fs::create_directories(work() / "elsewhere");
  fs::rename(work() / "lab" / c, work() / "elsewhere" / c);
  fs::create_directory_symlink(work() / "elsewhere" / c, work() / "lab" / c);
  expect_rejected({"emulate", "--preset", "hif4", "lab"}, "is a symbolic link");
  EXPECT_FALSE(fs::exists(work() / "elsewhere" / c / "output.npy")) << "emulate wrote outside the lab";
  expect_rejected({"compare", "lab"}, "is a symbolic link");
  expect_rejected({"infer", "lab"}, "is a symbolic link");
  // A file in the case's directory that is a link.
  fs::remove(work() / "lab" / c);
  fs::create_directory(work() / "lab" / c);
  fs::create_symlink(work() / "elsewhere" / c / "input.npy", work() / "lab" / c / "input.npy");
  expect_rejected({"emulate", "--preset", "hif4", "lab"}, "is a symbolic link");
  expect_rejected({"compare", "lab"}, "is a symbolic link");
}

TEST_F(HostileInputs, ALabInUseByAnotherRunIsRefused) {
  export_lab("lab");
  // This process stands for the other run: it holds the lab as emulate would.
  const int fd = ::open((work() / "lab").c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  expect_rejected({"emulate", "--preset", "hif4", "lab"}, "another qexact run is using");
  expect_rejected({"compare", "lab"}, "another qexact run is writing into");
  expect_rejected({"infer", "lab"}, "another qexact run is writing into");
  // A reader shares the lab with readers and keeps writers out.
  ASSERT_EQ(::flock(fd, LOCK_SH | LOCK_NB), 0);
  expect_rejected({"emulate", "--preset", "hif4", "lab"}, "another qexact run is using");
  expect_rejected({"compare", "lab"}, "no device outputs");
  ::close(fd);
  const RunResult r = run({"emulate", "--preset", "hif4", "lab"});
  EXPECT_EQ(r.status, 0) << r.err;
}

TEST_F(HostileInputs, AnEmulateThatFailsHalfWayLeavesTheLabAsItWas) {
  const std::string c = export_lab("lab");
  const std::set<std::string> before = work_tree();
  // Every file over 1 KiB fails to be written (EFBIG: RLIMIT_FSIZE, its signal ignored), as on a
  // disk that fills up after the first, smaller outputs.
  const int status = sh("(trap '' XFSZ; ulimit -f 2; exec " + q() + " emulate --preset hif4 lab) >/dev/null 2>err.txt");
  const std::string err = get("err.txt");
  fs::remove(work() / "err.txt");
  EXPECT_EQ(status, 2) << err;
  EXPECT_NE(err.find("File too large"), std::string::npos) << err;
  EXPECT_NE(err.find("/output.npy"), std::string::npos) << "the error names the output: " << err;
  EXPECT_EQ(err.find("qexact-tmp"), std::string::npos) << "the error names a temporary: " << err;
  EXPECT_EQ(work_tree(), before);
  EXPECT_TRUE(outputs_and_temporaries("lab").empty());
  // The lab is not stuck: the next run writes every output.
  const RunResult r = run({"emulate", "--preset", "hif4", "lab"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(fs::exists(work() / "lab" / c / "output.npy"));
}

TEST_F(HostileInputs, AnEmulateWhoseRenameFailsRemovesWhatItHadPublished) {
  ASSERT_EQ(sh("command -v strace >/dev/null"), 0) << "strace is required (scripts/install-deps.sh)";
  export_lab("lab");
  const std::set<std::string> before = work_tree();
  // The third output's rename fails: the two before it are taken back.
  EXPECT_EQ(under_strace("renameat2:error=EIO:when=3", "emulate --preset hif4 lab"), 2);
  EXPECT_NE(get("err.txt").find("Input/output error"), std::string::npos) << get("err.txt");
  fs::remove(work() / "err.txt");
  EXPECT_EQ(work_tree(), before);
  // Without renameat2's flags (an older file system), the plain renames publish the set.
  EXPECT_EQ(under_strace("renameat2:error=EINVAL", "emulate --preset hif4 lab"), 0) << get("err.txt");
  fs::remove(work() / "err.txt");
  std::size_t outputs = 0;
  for (const std::string& f : outputs_and_temporaries("lab")) {
    EXPECT_EQ(f.find("qexact-tmp"), std::string::npos) << f;
    outputs += f.find("qexact-tmp") == std::string::npos;
  }
  EXPECT_GT(outputs, 0u);
}

// ---- 3. checkpoint outputs ----

TEST_F(HostileInputs, CheckpointOutputsFollowTheRulesOfEveryOutput) {
  safetensors::Archive a;
  const Tensor w = test::f32_tensor({4, 64}, test::random_values(4 * 64, 24));
  a.entries.push_back(safetensors::make_entry("w", "F32", w.view()));
  const auto bytes = safetensors::encode(a);
  put("model.safetensors", std::string(bytes.begin(), bytes.end()));
  const std::vector<std::string> q = {"quantize", "--preset", "mx.ocp", "model.safetensors", "--out"};
  auto with = [&](std::vector<std::string> tail) {
    std::vector<std::string> args = q;
    args.insert(args.end(), tail.begin(), tail.end());
    return args;
  };
  ASSERT_EQ(run(with({"o.safetensors"})).status, 0);
  // Replacing it needs --force, as replacing an output directory does.
  expect_rejected(with({"o.safetensors"}), "already exists; pass --force");
  const RunResult forced = run(with({"o.safetensors", "--force"}));
  EXPECT_EQ(forced.status, 0) << forced.err;
  // A directory is refused before any work: named with a slash, or existing.
  expect_rejected(with({"outdir/"}), "ends in '/'");
  fs::create_directory(work() / "dir");
  expect_rejected(with({"dir"}), "it is a directory");
  // '-' is not standard output, and makes no file or directory named '-'.
  expect_rejected(with({"-"}), "standard output");
  expect_rejected({"quantize", "--preset", "mx.ocp", "x.npy", "--out", "-"}, "standard output");
  expect_rejected({"fake-quant", "--preset", "hif4", "x.npy", "--out", "-"}, "standard output");
}

// ---- 4. names with control bytes, help and bounds ----

TEST_F(HostileInputs, NamesWithControlBytesAreEscapedInErrorsAndTables) {
  // An .npy descr with an escape sequence and a NUL.
  std::string dict = std::string("{'descr': '<f4\x1b[31m\x01', 'fortran_order': False, 'shape': (1,), }");
  dict.resize(128 - 10 - 1, ' ');
  dict += '\n';
  std::string npy = "\x93NUMPY";
  npy += '\x01';
  npy += '\x00';
  npy += static_cast<char>(dict.size());
  npy += '\x00';
  put("esc.npy", npy + dict + std::string(4, '\0'));
  const RunResult r = run({"quantize", "--preset", "mx.ocp", "esc.npy", "--out", "q"});
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err.find('\x1b'), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("\\x1b[31m\\x01"), std::string::npos) << r.err;
  // A checkpoint tensor whose name holds a newline keeps the summary one line per tensor.
  safetensors::Archive a;
  const Tensor w = test::f32_tensor({4, 64}, test::random_values(4 * 64, 25));
  a.entries.push_back(safetensors::make_entry("bad\nname", "F32", w.view()));
  const auto bytes = safetensors::encode(a);
  put("model.safetensors", std::string(bytes.begin(), bytes.end()));
  const RunResult s = run({"quantize", "--preset", "mx.ocp", "model.safetensors", "--out", "o.safetensors"});
  ASSERT_EQ(s.status, 0) << s.err;
  EXPECT_NE(s.out.find("bad\\nname"), std::string::npos) << s.out;
  for (const std::string& line : test::lines_of(s.out)) EXPECT_NE(line.rfind("name", 0), 0u) << s.out;
  // A case name with a NUL in a manifest.
  export_lab("lab");
  nlohmann::json m = nlohmann::json::parse(get("lab/manifest.json"));
  m["cases"][0]["name"] = std::string("a\0b", 3);
  put("lab/manifest.json", m.dump());
  expect_rejected({"compare", "lab"}, "case name \"a\\x00b\"");
}

TEST_F(HostileInputs, TheProgressBarEndsItsLineAndEscapesNamesOnATerminal) {
  // The bar is drawn only on a terminal: `script` gives the run one (stdout and stderr both).
  safetensors::Archive a;
  const Tensor w = test::f32_tensor({4, 64}, test::random_values(4 * 64, 26));
  a.entries.push_back(safetensors::make_entry("w\x1b[2J", "F32", w.view()));
  const auto bytes = safetensors::encode(a);
  put("model.safetensors", std::string(bytes.begin(), bytes.end()));
  ASSERT_EQ(sh("script -qfec " +
               test::shell_quote(q() + " quantize --preset mx.ocp model.safetensors --out o.safetensors") +
               " /dev/null >tty.txt 2>&1"),
            0)
      << get("tty.txt");
  const std::string tty = get("tty.txt");
  ASSERT_NE(tty.find("\r["), std::string::npos) << "no progress frame drawn: " << tty;
  EXPECT_EQ(tty.find('\x1b'), std::string::npos) << "a raw escape reached the terminal: " << tty;
  EXPECT_NE(tty.find("w\\x1b[2J"), std::string::npos) << tty;
  // The summary starts on a line of its own, after the bar's last frame.
  const std::size_t table = tty.find("tensor ");
  ASSERT_NE(table, std::string::npos) << tty;
  ASSERT_GT(table, tty.rfind("\r[", table));
  EXPECT_EQ(tty[table - 1], '\n') << tty;
}

TEST_F(HostileInputs, HelpNamesEveryFamilyAndThreadCountsAreBounded) {
  const RunResult top = run({"--help"});
  ASSERT_EQ(top.status, 0);
  for (const char* family : {"MX", "FP8", "NVFP4", "int8", "Q8_0", "HiFloat4"})
    EXPECT_NE(top.out.find(family), std::string::npos) << family << " in: " << top.out;
  const RunResult infer = run({"infer", "--help"});
  ASSERT_EQ(infer.status, 0);
  // Every family --family accepts is named in its help.
  for (const char* family : {"mx", "int8.block", "int8.token", "int8.group", "hif4", "pool", "fp8.scaled", "nvfp4"}) {
    EXPECT_NE(infer.out.find(family), std::string::npos) << family << " in: " << infer.out;
    const RunResult r = run({"infer", "nowhere", "--family", family});
    EXPECT_EQ(r.err.find("unknown family"), std::string::npos) << family << ": " << r.err;
  }
  expect_rejected({"infer", "nowhere", "--threads", "100000"}, "--threads");
}

TEST_F(HostileInputs, APlanLargerThanTheMachineIsRefusedBeforeItRuns) {
  // One f32 tensor of 1 TiB: three copies per rank cannot fit any machine this runs on.
  put("plan.json", R"({"world": 2, "tensors": [{"name": "huge", "shape": [1048576, 262144], "dtype": "f32",
                       "collective": "all_gather", "axis": 0, "quantize": "mxfp8.ascend"}]})");
  expect_rejected({"plan", "plan.json"}, "bytes of memory");
}

}  // namespace
}  // namespace qexact
