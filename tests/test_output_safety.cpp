// Fault injection against the CLI's outputs (issue "outputs that cannot destroy anything"):
// symbolic links, special files and inputs as outputs, existing directories, concurrent
// writers, failed renames and writes (strace -e inject), ENOSPC (an injected one, and a small
// tmpfs where mounting is allowed), kill -9 in the middle of a publication, strict parameters,
// and compare's treatment of inputs the contract must refuse. Every case checks that nothing
// was destroyed and nothing partial is visible.
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli_test_util.hpp"
#include "io/temp_name.hpp"
#include "tensor_test_util.hpp"

namespace qexact {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;
using test::RunResult;

class OutputSafety : public test::CliTest {
 protected:
  OutputSafety() : CliTest("qexact_safety_") {}

  void SetUp() override {
    CliTest::SetUp();
    if (IsSkipped()) return;
    const std::vector<float> v = test::random_values(8 * 64, 15);
    put_npy("x.npy", test::f32_tensor({8, 64}, v));
  }

  // The names in `dir` that are qexact temporaries.
  static std::vector<std::string> temporaries(const fs::path& dir) {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir))
      if (io::is_qexact_temp_name(e.path().filename().string())) out.push_back(e.path().filename().string());
    return out;
  }

  // dequantize DIR: its status and, on success, the output bytes.
  std::pair<int, std::string> dequantized(const std::string& dir, const std::string& out) const {
    const RunResult r = run({"dequantize", dir, "--out", out});
    return {r.status, r.status == 0 ? get(out) : r.err};
  }

};

// ---- 1. links, special files, inputs ----

TEST_F(OutputSafety, SymlinkOutputIsRefusedAndLeftAlone) {
  ASSERT_EQ(run({"quantize", "--preset", "mx.ocp", "x.npy", "--out", "q"}).status, 0);
  put("target.npy", "precious");
  fs::create_symlink("target.npy", work() / "link.npy");
  expect_rejected({"dequantize", "q", "--out", "link.npy"}, "symbolic link");
  EXPECT_TRUE(fs::is_symlink(work() / "link.npy"));
  EXPECT_EQ(get("target.npy"), "precious");
  // A dangling link too: it is not replaced by a regular file.
  fs::create_symlink("nowhere.npy", work() / "dangling.npy");
  expect_rejected({"fake-quant", "--preset", "hif4", "x.npy", "--out", "dangling.npy"}, "symbolic link");
  // A symlinked output directory is not swapped for a real one.
  fs::create_directories(work() / "real");
  fs::create_directory_symlink("real", work() / "qlink");
  expect_rejected({"quantize", "--preset", "mx.ocp", "x.npy", "--out", "qlink", "--force"}, "symbolic link");
}

TEST_F(OutputSafety, DeviceOutputIsRefused) {
  ASSERT_EQ(run({"quantize", "--preset", "mx.ocp", "x.npy", "--out", "q"}).status, 0);
  // A device node of our own where we may make one (root): a qexact that replaced devices would
  // then replace this one, not the system's /dev/null. Otherwise /dev/null, whose directory a
  // non-root qexact cannot write into anyway.
  std::string device = "/dev/null";
  if (::mknod((work() / "null").c_str(), S_IFCHR | 0666, ::makedev(1, 3)) == 0) device = "null";
  else if (::geteuid() == 0) device.clear();
  if (!device.empty()) {
    expect_rejected({"dequantize", "q", "--out", device}, "character device");
    EXPECT_TRUE(fs::is_character_file(device[0] == '/' ? fs::path(device) : work() / device));
  }
  ASSERT_EQ(sh("mkfifo fifo"), 0);
  expect_rejected({"dequantize", "q", "--out", "fifo"}, "FIFO");
  EXPECT_TRUE(fs::is_fifo(work() / "fifo"));
}

TEST_F(OutputSafety, OutputThatIsAnInputIsRefusedBeforeAnyWork) {
  const std::string x = get("x.npy");
  expect_rejected({"fake-quant", "--preset", "hif4", "x.npy", "--out", "x.npy"}, "is the input");
  expect_rejected({"fake-quant", "--preset", "hif4", "x.npy", "--out", "./x.npy"}, "is the input");
  ASSERT_EQ(sh("ln x.npy hard.npy"), 0);
  expect_rejected({"fake-quant", "--preset", "hif4", "x.npy", "--out", "hard.npy"}, "is the input");
  EXPECT_EQ(get("x.npy"), x);

  ASSERT_EQ(run({"quantize", "--preset", "mx.ocp", "x.npy", "--out", "q"}).status, 0);
  const std::string payload = get("q/payload.npy");
  expect_rejected({"dequantize", "q", "--out", "q/payload.npy"}, "is the input");
  expect_rejected({"dequantize", "q", "--out", "q/meta.json"}, "is the input");
  EXPECT_EQ(get("q/payload.npy"), payload);
  ASSERT_EQ(run({"hif4-pack", "x.npy", "--out", "h"}).status, 0);
  expect_rejected({"hif4-unpack", "h", "--out", "h/value.npy"}, "is the input");

  // A checkpoint quantized onto itself: refused before the file is even parsed.
  put("small.safetensors", "not even parsed");
  expect_rejected({"quantize", "--preset", "mx.ocp", "small.safetensors", "--out", "small.safetensors"}, "is the input");
  EXPECT_EQ(get("small.safetensors"), "not even parsed");

  // An output directory that holds the input: replacing it would delete the input.
  fs::create_directories(work() / "d");
  put("d/x.npy", x);
  expect_rejected({"quantize", "--preset", "mx.ocp", "d/x.npy", "--out", "d", "--force"}, "holds the input");
  expect_rejected({"hif4-pack", "d/x.npy", "--out", "d", "--force"}, "holds the input");
  EXPECT_EQ(get("d/x.npy"), x);
}

// ---- 2. directories: --force, atomic replacement, checksums ----

TEST_F(OutputSafety, ExistingDirectoryNeedsForceAndIsReplacedWhole) {
  ASSERT_EQ(run({"quantize", "--preset", "mx.ocp", "x.npy", "--out", "q"}).status, 0);
  const std::string meta = get("q/meta.json");
  expect_rejected({"quantize", "--preset", "mx.ocp.e5m2", "x.npy", "--out", "q"}, "--force");
  EXPECT_EQ(get("q/meta.json"), meta);
  const RunResult r = run({"quantize", "--preset", "mx.ocp.e5m2", "x.npy", "--out", "q", "--force"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(get("q/meta.json").find("e5m2"), std::string::npos);
  EXPECT_EQ(test::lines_of(get("q/meta.json")).empty(), false);
  EXPECT_TRUE(temporaries(work()).empty());
  EXPECT_EQ(dequantized("q", "y.npy").first, 0);

  // --force never deletes what qexact did not write.
  put("q/notes.txt", "mine");
  expect_rejected({"quantize", "--preset", "mx.ocp", "x.npy", "--out", "q", "--force"}, "notes.txt");
  EXPECT_EQ(get("q/notes.txt"), "mine");
}

TEST_F(OutputSafety, DequantizeRefusesFilesNotWrittenTogether) {
  ASSERT_EQ(run({"quantize", "--preset", "mx.ocp", "x.npy", "--out", "a"}).status, 0);
  ASSERT_EQ(run({"quantize", "--preset", "mx.ocp.e5m2", "x.npy", "--out", "b"}).status, 0);
  // Same shapes and dtypes, other bytes: only the recorded checksum tells them apart.
  fs::copy_file(work() / "b" / "payload.npy", work() / "a" / "payload.npy", fs::copy_options::overwrite_existing);
  expect_rejected({"dequantize", "a", "--out", "y.npy"}, "not written together");
}

TEST_F(OutputSafety, DequantizeReadsAnOlderDirectoryWithoutChecksumsWithANote) {
  ASSERT_EQ(run({"quantize", "--preset", "mx.ocp", "x.npy", "--out", "q"}).status, 0);
  const std::pair<int, std::string> with = dequantized("q", "y.npy");
  ASSERT_EQ(with.first, 0) << with.second;
  Json meta = Json::parse(get("q/meta.json"));
  for (const char* k : {"payload", "scale"}) {
    meta[k].erase("bytes");
    meta[k].erase("fnv1a64");
  }
  put("q/meta.json", meta.dump(2));
  const RunResult r = run({"dequantize", "q", "--out", "z.npy"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("qexact: note:"), std::string::npos) << r.err;
  EXPECT_EQ(get("z.npy"), with.second);
  // Half a record is a malformed meta.json, not an older one.
  meta["payload"]["bytes"] = 1;
  put("q/meta.json", meta.dump(2));
  expect_rejected({"dequantize", "q", "--out", "w.npy"}, "fnv1a64");
}

TEST_F(OutputSafety, ConcurrentWritersNeverLeaveAMix) {
  // Two presets with the same shapes and dtypes but other bytes, written over one directory by
  // two writers at once, again and again, while a reader dequantizes it: every successful read
  // is one writer's whole set, and so is the final directory.
  ASSERT_EQ(run({"quantize", "--preset", "mx.ocp", "x.npy", "--out", "q"}).status, 0);
  ASSERT_EQ(run({"quantize", "--preset", "mx.ocp", "x.npy", "--out", "a"}).status, 0);
  ASSERT_EQ(run({"quantize", "--preset", "mx.ocp.e5m2", "x.npy", "--out", "b"}).status, 0);
  ASSERT_EQ(run({"dequantize", "a", "--out", "ya.npy"}).status, 0);
  ASSERT_EQ(run({"dequantize", "b", "--out", "yb.npy"}).status, 0);
  const std::string ya = get("ya.npy"), yb = get("yb.npy");
  ASSERT_NE(ya, yb);
  const std::string Q = q();
  const int rounds = 20;
  const std::string writer = "for i in $(seq " + std::to_string(rounds) + "); do " + Q +
                             " quantize --preset PRESET x.npy --out q --force 2>>werr.txt || echo fail >>wfail.txt; done";
  auto w = [&](const std::string& preset) {
    std::string s = writer;
    s.replace(s.find("PRESET"), 6, preset);
    return s;
  };
  // The reader records each successful output's bytes under a fresh name.
  const std::string reader = "for i in $(seq " + std::to_string(rounds * 2) + "); do " + Q +
                             " dequantize q --out r$i.npy 2>>rerr.txt; done";
  ASSERT_EQ(sh("(" + w("mx.ocp") + ") & (" + w("mx.ocp.e5m2") + ") & (" + reader + ") & wait"), 0);
  EXPECT_FALSE(fs::exists(work() / "wfail.txt")) << get("werr.txt");
  int reads = 0;
  for (int i = 1; i <= rounds * 2; ++i) {
    const fs::path p = work() / ("r" + std::to_string(i) + ".npy");
    if (!fs::exists(p)) continue;
    ++reads;
    const std::string got = test::slurp(p);
    EXPECT_TRUE(got == ya || got == yb) << "read " << i << " is a mix of two writers";
  }
  std::cout << reads << " of " << rounds * 2 << " concurrent reads succeeded; failed reads said:\n" << get("rerr.txt");
  EXPECT_GT(reads, 0) << "no read succeeded while the writers ran";
  // A failed read is an error (the set changed under it), never a silent mix.
  for (const std::string& line : test::lines_of(get("rerr.txt")))
    EXPECT_EQ(line.rfind("qexact: error: ", 0), 0u) << line;
  const std::pair<int, std::string> final_read = dequantized("q", "final.npy");
  ASSERT_EQ(final_read.first, 0) << final_read.second;
  EXPECT_TRUE(final_read.second == ya || final_read.second == yb);
  EXPECT_TRUE(temporaries(work()).empty());
}

// ---- 3. injected failures ----

TEST_F(OutputSafety, FailedRenameLeavesTheOldOutputAndNoTemporary) {
  ASSERT_EQ(sh("command -v strace >/dev/null"), 0) << "strace is required (scripts/install-deps.sh)";
  ASSERT_EQ(run({"quantize", "--preset", "mx.ocp", "x.npy", "--out", "q"}).status, 0);
  ASSERT_EQ(run({"dequantize", "q", "--out", "y.npy"}).status, 0);
  const std::string meta = get("q/meta.json"), payload = get("q/payload.npy"), y = get("y.npy");
  // Every rename of the directory's publication fails: the old directory stays, whole.
  EXPECT_EQ(under_strace("rename,renameat,renameat2:error=EIO", "quantize --preset mx.ocp.e5m2 x.npy --out q --force"), 2);
  EXPECT_NE(get("err.txt").find("Input/output error"), std::string::npos) << get("err.txt");
  EXPECT_EQ(get("q/meta.json"), meta);
  EXPECT_EQ(get("q/payload.npy"), payload);
  // The file's rename fails: the old file stays.
  EXPECT_EQ(under_strace("rename,renameat,renameat2:error=EIO", "fake-quant --preset hif4 x.npy --out y.npy"), 2);
  EXPECT_EQ(get("y.npy"), y);
  EXPECT_TRUE(temporaries(work()).empty());
  EXPECT_TRUE(temporaries(work() / "q").empty());
}

TEST_F(OutputSafety, WithoutRenameExchangeTheFallbackStillReplacesWhole) {
  ASSERT_EQ(sh("command -v strace >/dev/null"), 0) << "strace is required (scripts/install-deps.sh)";
  ASSERT_EQ(run({"quantize", "--preset", "mx.ocp", "x.npy", "--out", "q"}).status, 0);
  // A file system without renameat2's flags: rename-aside, then rename.
  EXPECT_EQ(under_strace("renameat2:error=EINVAL", "quantize --preset mx.ocp.e5m2 x.npy --out q --force"), 0)
      << get("err.txt");
  EXPECT_NE(get("q/meta.json").find("e5m2"), std::string::npos);
  EXPECT_EQ(dequantized("q", "y.npy").first, 0);
  EXPECT_TRUE(temporaries(work()).empty());
  EXPECT_EQ(under_strace("renameat2:error=EINVAL", "quantize --preset mx.ocp x.npy --out fresh"), 0) << get("err.txt");
  EXPECT_EQ(dequantized("fresh", "z.npy").first, 0);
}

TEST_F(OutputSafety, InjectedEnospcLeavesNothingPartial) {
#ifdef __SANITIZE_ADDRESS__
  // ASan's runtime probes memory with write(2) when a thread starts, so the first write is not
  // qexact's; FullTmpfsLeavesNothingPartial gives a real ENOSPC in that build.
  GTEST_SKIP() << "the ASan runtime's own writes take the injected ENOSPC";
#endif
  ASSERT_EQ(sh("command -v strace >/dev/null"), 0) << "strace is required (scripts/install-deps.sh)";
  ASSERT_EQ(run({"quantize", "--preset", "mx.ocp", "x.npy", "--out", "q"}).status, 0);
  const std::string meta = get("q/meta.json");
  // The first write of the process is the first output byte: the disk is full.
  EXPECT_EQ(under_strace("write:error=ENOSPC:when=1", "quantize --preset mx.ocp.e5m2 x.npy --out q --force"), 2);
  EXPECT_NE(get("err.txt").find("No space left"), std::string::npos) << get("err.txt");
  EXPECT_EQ(get("q/meta.json"), meta);
  EXPECT_EQ(under_strace("write:error=ENOSPC:when=1", "quantize --preset mx.ocp x.npy --out fresh"), 2);
  EXPECT_FALSE(fs::exists(work() / "fresh"));
  EXPECT_EQ(under_strace("write:error=ENOSPC:when=1", "dequantize q --out y.npy"), 2);
  EXPECT_FALSE(fs::exists(work() / "y.npy"));
  EXPECT_TRUE(temporaries(work()).empty());
}

TEST_F(OutputSafety, FullTmpfsLeavesNothingPartial) {
  const fs::path mnt = work() / "small";
  fs::create_directories(mnt);
  if (::mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=64k") != 0)
    GTEST_SKIP() << "cannot mount a tmpfs here (" << std::strerror(errno)
                 << "); InjectedEnospcLeavesNothingPartial covers ENOSPC";
  struct Unmount {
    fs::path p;
    ~Unmount() { ::umount2(p.c_str(), MNT_DETACH); }
  } unmount{mnt};
  // 256 x 1024 floats: 1 MiB of input, a payload of 256 KiB that cannot fit in 64 KiB.
  put_npy("big.npy", test::f32_tensor({256, 1024}, test::random_values(256 * 1024, 16)));
  const RunResult r = run({"quantize", "--preset", "mx.ocp", "big.npy", "--out", "small/q"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("No space left"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::is_empty(mnt)) << "something partial was left on the full file system";
  const RunResult f = run({"fake-quant", "--preset", "hif4", "big.npy", "--out", "small/y.npy"});
  EXPECT_EQ(f.status, 2);
  EXPECT_TRUE(fs::is_empty(mnt));
}

TEST_F(OutputSafety, KillDuringPublicationLeavesNoVisibleOutputAndTheNextRunCleans) {
  ASSERT_EQ(sh("command -v strace >/dev/null"), 0) << "strace is required (scripts/install-deps.sh)";
  // The publishing rename is held back for 10 s; qexact is killed (-9) while it waits, with
  // the staging directory complete beside the target.
  ASSERT_EQ(sh("{ strace -f -qq -o /dev/null -e inject=renameat2:delay_enter=10000000 " + q() +
               " quantize --preset mx.ocp x.npy --out q 2>/dev/null & echo $! >strace.pid; wait; touch done; } &"),
            0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  std::vector<std::string> tmp;
  while (std::chrono::steady_clock::now() < deadline) {
    tmp = temporaries(work());
    if (!tmp.empty() && fs::exists(work() / tmp[0] / "meta.json")) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  // The traced qexact is strace's child.
  if (tmp.size() == 1) {
    EXPECT_EQ(sh("kill -9 $(cat /proc/$(cat strace.pid)/task/*/children)"), 0);
  }
  while (!fs::exists(work() / "done")) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  fs::remove(work() / "done");
  fs::remove(work() / "strace.pid");
  ASSERT_EQ(tmp.size(), 1u) << "no staging directory appeared";
  EXPECT_FALSE(fs::exists(work() / "q")) << "a killed run published something";
  ASSERT_EQ(temporaries(work()).size(), 1u) << "the killed run's staging directory is the stale temporary";
  // The next run to the same place removes it and publishes.
  const RunResult r = run({"quantize", "--preset", "mx.ocp", "x.npy", "--out", "q"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(temporaries(work()).empty());
  EXPECT_EQ(dequantized("q", "y.npy").first, 0);
}

// ---- 4. strict parameters ----

TEST_F(OutputSafety, OutOfRangeParametersAreErrorsNamingTheParameterAndRange) {
  expect_rejected({"quantize", "--preset", "mx.ocp", "--param", "block=4294967328", "x.npy", "--out", "q"},
                  "parameter block: 4294967328 is out of range");
  expect_rejected({"quantize", "--preset", "int8.token.blaze", "--param", "range=4294967423", "x.npy", "--out", "q"},
                  "parameter range: 4294967423 is out of range");
  expect_rejected({"quantize", "--preset", "mx.ocp", "--param", "block=99999999999999999999", "x.npy", "--out", "q"},
                  "parameter block: 99999999999999999999 is out of range");
  expect_rejected({"quantize", "--preset", "int8.token.blaze", "--param", "scale_min=1e-50", "x.npy", "--out", "q"},
                  "parameter scale_min: 1e-50 rounds to 0");
  expect_rejected({"quantize", "--preset", "int8.token.blaze", "--param", "scale_min=1e39", "x.npy", "--out", "q"},
                  "parameter scale_min: 1e39 overflows");
  expect_rejected({"quantize", "--preset", "mx.ocp", "--threads", "-1", "x.npy", "--out", "q"}, "--threads");
}

// ---- 5. compare and inputs the contract must refuse ----

TEST_F(OutputSafety, CompareFailsADeviceThatAcceptedAForbiddenInput) {
  ASSERT_EQ(run({"cases", "--preset", "int8.token.blaze", "--out", "lab"}).status, 0);
  ASSERT_EQ(run({"emulate", "--preset", "int8.token.blaze", "lab"}).status, 0);
  const RunResult agree = run({"compare", "lab"});
  ASSERT_EQ(agree.status, 0) << agree.err << agree.out;
  const Json manifest = Json::parse(get("lab/manifest.json"));
  std::string forbidden, accepted;
  for (const Json& c : manifest["cases"]) {
    if (!c["expect_error"].get<std::string>().empty() && forbidden.empty()) forbidden = c["name"];
    if (c["expect_error"].get<std::string>().empty() && accepted.empty()) accepted = c["name"];
  }
  ASSERT_FALSE(forbidden.empty());
  // The device wrote outputs for an input the contract refuses (any bytes: they count as wrong).
  for (const char* f : {"payload.npy", "scale.npy"})
    fs::copy_file(work() / "lab" / accepted / f, work() / "lab" / forbidden / f);
  const RunResult r = run({"compare", "lab", "--json"});
  EXPECT_EQ(r.status, 1) << r.err;
  const Json j = Json::parse(r.out);
  EXPECT_FALSE(j["identical"].get<bool>());
  bool found = false;
  for (const Json& d : j["diagnoses"])
    if (d["signature"] == "accepted_forbidden_input") {
      found = true;
      EXPECT_EQ(d["cases"], Json({forbidden}));
    }
  EXPECT_TRUE(found) << r.out;
  const RunResult text = run({"compare", "lab"});
  EXPECT_EQ(text.status, 1);
  EXPECT_NE(text.out.find(forbidden + ": the device wrote outputs for an input the contract refuses"), std::string::npos)
      << text.out;
}

TEST_F(OutputSafety, CompareRefusesAnUnknownExpectErrorAndNamesTheCaseOfAnError) {
  ASSERT_EQ(run({"cases", "--preset", "int8.token.blaze", "--out", "lab"}).status, 0);
  ASSERT_EQ(run({"emulate", "--preset", "int8.token.blaze", "lab"}).status, 0);
  const std::string original = get("lab/manifest.json");
  Json manifest = Json::parse(original);
  std::string forbidden, accepted;
  for (Json& c : manifest["cases"]) {
    if (!c["expect_error"].get<std::string>().empty() && forbidden.empty()) {
      forbidden = c["name"];
      c["expect_error"] = "bad_inptu";
    }
    if (c["expect_error"].get<std::string>().empty() && accepted.empty()) accepted = c["name"];
  }
  put("lab/manifest.json", manifest.dump(2));
  expect_rejected({"compare", "lab"}, "\"expect_error\" of case \"" + forbidden + "\" is \"bad_inptu\"");
  put("lab/manifest.json", original);
  put("lab/" + accepted + "/scale.npy", "garbage");
  expect_rejected({"compare", "lab"}, "case \"" + accepted + "\"");
}

}  // namespace
}  // namespace qexact
