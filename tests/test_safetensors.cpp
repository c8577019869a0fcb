// .safetensors reading and writing (io/safetensors.hpp): exact round trips of every dtype, the
// bytes the writer produces, dtypes read past but refused as data, and one error per
// malformation of a lying or truncated file.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "io/safetensors.hpp"

namespace qexact {
namespace {

using Bytes = std::vector<std::uint8_t>;
namespace st = safetensors;

// 0, 1, 2, ... (mod 251): every byte position is distinguishable.
Bytes pattern(std::size_t n, int start = 0) {
  Bytes b(n);
  for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<std::uint8_t>((i + static_cast<std::size_t>(start)) % 251);
  return b;
}

// A file with the given header text (written as is, unpadded) and data buffer.
Bytes hand_made(const std::string& header, const Bytes& data = {}) {
  Bytes f;
  for (int i = 0; i < 8; ++i) f.push_back(static_cast<std::uint8_t>(static_cast<std::uint64_t>(header.size()) >> (8 * i)));
  f.insert(f.end(), header.begin(), header.end());
  f.insert(f.end(), data.begin(), data.end());
  return f;
}

// The message of the qexact::Error (bad_file) that decoding `file` throws.
std::string decode_error(const Bytes& file) {
  try {
    st::decode(file, "x.safetensors");
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::bad_file) << e.what();
    EXPECT_EQ(std::string(e.what()).rfind("x.safetensors: ", 0), 0u) << "message does not name the file: " << e.what();
    return e.what();
  }
  ADD_FAILURE() << "decode accepted the file";
  return "";
}

#define EXPECT_DECODE_ERROR(file, text)                                      \
  do {                                                                       \
    const std::string msg_ = decode_error(file);                             \
    EXPECT_NE(msg_.find(text), std::string::npos) << "message: " << msg_;   \
  } while (0)

// ---- round trips ---------------------------------------------------------------------------

struct DtypeCase {
  const char* name;
  std::size_t itemsize;
  DType dtype;
};

class SafetensorsRoundTrip : public ::testing::TestWithParam<DtypeCase> {};

TEST_P(SafetensorsRoundTrip, EveryShapeComesBackByteForByte) {
  const DtypeCase c = GetParam();
  EXPECT_EQ(st::itemsize(c.name), c.itemsize);
  EXPECT_TRUE(st::is_supported(c.name));
  for (const Shape& shape : {Shape{}, Shape{5}, Shape{2, 3, 4}, Shape{0}, Shape{2, 0, 3}, Shape{1, 1, 7, 1}}) {
    SCOPED_TRACE(shape_str(shape));
    Tensor t(c.dtype, shape);
    const Bytes data = pattern(t.nbytes(), 7);
    if (!data.empty()) std::memcpy(t.raw(), data.data(), data.size());
    st::Archive a;
    a.metadata = {{"format", "pt"}, {"note", "x"}};
    a.entries.push_back(st::make_entry("w", c.name, t.view()));
    a.entries.push_back(st::Entry{"a.before", "U8", {3}, {9, 8, 7}});
    const st::Archive back = st::decode(st::encode(a), "t.safetensors");
    EXPECT_EQ(back.metadata, a.metadata);
    ASSERT_EQ(back.entries.size(), 2u);
    EXPECT_EQ(back.entries[0].name, "a.before");
    EXPECT_EQ(back.entries[0].bytes, (Bytes{9, 8, 7}));
    const st::Entry& e = back.entries[1];
    EXPECT_EQ(e.name, "w");
    EXPECT_EQ(e.dtype, c.name);
    EXPECT_EQ(e.shape, shape);
    EXPECT_EQ(e.bytes, data);
    const Tensor got = st::to_tensor(e);
    EXPECT_EQ(got.dtype(), c.dtype);
    EXPECT_EQ(got.shape(), shape);
    EXPECT_EQ(Bytes(static_cast<const std::uint8_t*>(got.raw()), static_cast<const std::uint8_t*>(got.raw()) + got.nbytes()),
              data);
  }
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, SafetensorsRoundTrip,
                         ::testing::Values(DtypeCase{"F32", 4, DType::f32}, DtypeCase{"F16", 2, DType::f16},
                                           DtypeCase{"BF16", 2, DType::bf16}, DtypeCase{"U8", 1, DType::u8},
                                           DtypeCase{"I8", 1, DType::i8}, DtypeCase{"I32", 4, DType::i32},
                                           DtypeCase{"F8_E4M3", 1, DType::u8}, DtypeCase{"F8_E5M2", 1, DType::u8},
                                           DtypeCase{"F8_E8M0", 1, DType::u8}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(Safetensors, WritesSortedNamesCompactHeaderPaddedToEight) {
  st::Archive a;
  a.entries.push_back(st::Entry{"b", "U8", {2}, {1, 2}});
  a.entries.push_back(st::Entry{"a", "I8", {1}, {3}});
  const Bytes f = st::encode(a);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | f[static_cast<std::size_t>(i)];
  EXPECT_EQ(n % 8, 0u);
  ASSERT_EQ(f.size(), 8 + n + 3);
  const std::string header(f.begin() + 8, f.begin() + 8 + static_cast<std::ptrdiff_t>(n));
  const std::string json =
      R"({"a":{"dtype":"I8","shape":[1],"data_offsets":[0,1]},"b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}})";
  EXPECT_EQ(header, json + std::string(n - json.size(), ' '));
  EXPECT_EQ(Bytes(f.end() - 3, f.end()), (Bytes{3, 1, 2}));
  // The order the entries were given in does not change a byte.
  std::swap(a.entries[0], a.entries[1]);
  EXPECT_EQ(st::encode(a), f);
}

TEST(Safetensors, MetadataComesFirst) {
  st::Archive a;
  a.metadata = {{"k", "v"}};
  a.entries.push_back(st::Entry{"A", "U8", {}, {5}});
  const Bytes f = st::encode(a);
  const std::string header(f.begin() + 8, f.end() - 1);
  EXPECT_EQ(header.rfind(R"({"__metadata__":{"k":"v"},"A":)", 0), 0u) << header;
}

TEST(Safetensors, EmptyArchive) {
  const st::Archive back = st::decode(st::encode(st::Archive{}), "t");
  EXPECT_TRUE(back.entries.empty());
  EXPECT_TRUE(back.metadata.empty());
}

TEST(Safetensors, ReadsHeadersInAnyKeyOrderAndOffsetsInAnyOrder) {
  // Data buffer holds "b" first although "a" sorts first; keys within an entry are reordered.
  const Bytes f = hand_made(
      R"({"b":{"shape":[2],"data_offsets":[0,2],"dtype":"U8"},"a":{"dtype":"I8","data_offsets":[2,3],"shape":[]}})",
      {1, 2, 3});
  const st::Archive a = st::decode(f, "t");
  ASSERT_EQ(a.entries.size(), 2u);
  EXPECT_EQ(a.entries[0].name, "a");
  EXPECT_EQ(a.entries[0].bytes, (Bytes{3}));
  EXPECT_EQ(a.entries[1].bytes, (Bytes{1, 2}));
}

TEST(Safetensors, OtherDtypesAreReadPastButRefusedAsData) {
  st::Archive a;
  a.entries.push_back(st::Entry{"position_ids", "I64", {1, 2}, pattern(16)});
  a.entries.push_back(st::Entry{"mask", "BOOL", {3}, {0, 1, 1}});
  a.entries.push_back(st::Entry{"d", "F64", {1}, pattern(8)});
  a.entries.push_back(st::Entry{"w", "F32", {1}, pattern(4)});
  const st::Archive back = st::decode(st::encode(a), "t");
  ASSERT_EQ(back.entries.size(), 4u);
  for (const st::Entry& e : back.entries) {
    SCOPED_TRACE(e.name);
    if (e.dtype == "F32") {
      EXPECT_EQ(st::to_tensor(e).dtype(), DType::f32);
      continue;
    }
    EXPECT_FALSE(st::is_supported(e.dtype));
    try {
      st::to_tensor(e);
      ADD_FAILURE() << "to_tensor accepted " << e.dtype;
    } catch (const Error& err) {
      EXPECT_EQ(err.kind(), ErrorKind::bad_file);
      EXPECT_NE(std::string(err.what()).find("'" + e.name + "' has dtype " + e.dtype), std::string::npos) << err.what();
    }
  }
  EXPECT_EQ(back.entries[2].bytes, pattern(16));
}

TEST(Safetensors, MakeEntryChecksTheDtypeName) {
  const Tensor f32(DType::f32, {2});
  EXPECT_THROW(st::make_entry("x", "F16", f32.view()), Error);
  EXPECT_THROW(st::make_entry("x", "F8_E4M3", f32.view()), Error);
  EXPECT_THROW(st::make_entry("x", "I64", Tensor(DType::u8, {8}).view()), Error);
  EXPECT_EQ(st::make_entry("x", "F8_E5M2", Tensor(DType::u8, {2}).view()).bytes.size(), 2u);
  EXPECT_STREQ(st::dtype_name_of(DType::bf16), "BF16");
  EXPECT_THROW(st::dtype_name_of(DType::u16), Error);
}

TEST(Safetensors, EncodeRefusesWhatItCouldNotWriteHonestly) {
  const auto encode_error = [](const st::Archive& a) {
    try {
      st::encode(a);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::bad_argument);
      return std::string(e.what());
    }
    ADD_FAILURE() << "encode accepted it";
    return std::string();
  };
  st::Archive dup;
  dup.entries = {st::Entry{"x", "U8", {1}, {1}}, st::Entry{"x", "U8", {1}, {2}}};
  EXPECT_NE(encode_error(dup).find("two tensors are named 'x'"), std::string::npos);
  st::Archive reserved;
  reserved.entries = {st::Entry{"__metadata__", "U8", {1}, {1}}};
  EXPECT_NE(encode_error(reserved).find("__metadata__"), std::string::npos);
  st::Archive short_bytes;
  short_bytes.entries = {st::Entry{"x", "F32", {2}, {1, 2, 3}}};
  EXPECT_NE(encode_error(short_bytes).find("3 bytes do not hold shape (2"), std::string::npos);
  st::Archive unknown;
  unknown.entries = {st::Entry{"x", "Q4", {1}, {1}}};
  EXPECT_NE(encode_error(unknown).find("unknown safetensors dtype 'Q4'"), std::string::npos);
  st::Archive bad_utf8;
  bad_utf8.entries = {st::Entry{"\xff", "U8", {1}, {1}}};
  EXPECT_NE(encode_error(bad_utf8).find("UTF-8"), std::string::npos);
}

// ---- malformed files: each a qexact::Error naming the problem ------------------------------

std::string entry(const std::string& name, const std::string& dtype, const std::string& shape, const std::string& offsets) {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":" + offsets + "}";
}

// A JSON object of header entries. Appended piece by piece: GCC 12's -Wrestrict misfires on
// `"literal" + std::string&&` at -O3.
template <class... Entries>
std::string object_of(const Entries&... entries) {
  std::string out = "{";
  ((out += entries, out += ','), ...);
  out.back() = '}';
  return out;
}

TEST(SafetensorsMalformed, TruncatedBeforeTheHeaderLength) {
  EXPECT_DECODE_ERROR(Bytes{}, "truncated file");
  EXPECT_DECODE_ERROR(Bytes(7, 0), "truncated file: 7 bytes");
}

TEST(SafetensorsMalformed, HeaderLengthPastEndOfFile) {
  Bytes f = hand_made("{}");
  f[0] = 3;
  EXPECT_DECODE_ERROR(f, "header length 3 runs past the end of the file (10 bytes)");
  for (int i = 0; i < 8; ++i) f[static_cast<std::size_t>(i)] = 0xFF;
  EXPECT_DECODE_ERROR(f, "header length 18446744073709551615 runs past the end");
}

TEST(SafetensorsMalformed, NotJson) {
  for (const char* h : {"", "{", "{\"a\":}", "hello", "{\"a\":1}}", "{\"\xff\":1}"}) {
    SCOPED_TRACE(h);
    EXPECT_DECODE_ERROR(hand_made(h), "not valid JSON");
  }
}

TEST(SafetensorsMalformed, JsonThatIsNotAnObject) {
  EXPECT_DECODE_ERROR(hand_made("[]"), "JSON array, not an object");
  EXPECT_DECODE_ERROR(hand_made("\"x\""), "JSON string, not an object");
  EXPECT_DECODE_ERROR(hand_made("42"), "JSON number, not an object");
  EXPECT_DECODE_ERROR(hand_made("null"), "JSON null, not an object");
}

TEST(SafetensorsMalformed, DuplicateNames) {
  EXPECT_DECODE_ERROR(hand_made(object_of(entry("x", "U8", "[1]", "[0,1]"), entry("x", "U8", "[1]", "[1,2]")), {1, 2}),
                      "repeats the key 'x'");
  EXPECT_DECODE_ERROR(hand_made(R"({"x":{"dtype":"U8","dtype":"U8","shape":[1],"data_offsets":[0,1]}})", {1}),
                      "repeats the key 'dtype'");
  EXPECT_DECODE_ERROR(hand_made(R"({"__metadata__":{"a":"1","a":"2"}})"), "repeats the key 'a'");
}

TEST(SafetensorsMalformed, EntryThatIsNotAnObjectOrHasMissingOrExtraKeys) {
  EXPECT_DECODE_ERROR(hand_made(R"({"x":[1]})"), "tensor 'x' is not an object");
  EXPECT_DECODE_ERROR(hand_made(R"({"x":{"shape":[],"data_offsets":[0,0]}})"), "tensor 'x' has no 'dtype'");
  EXPECT_DECODE_ERROR(hand_made(R"({"x":{"dtype":"U8","data_offsets":[0,0]}})"), "tensor 'x' has no 'shape'");
  EXPECT_DECODE_ERROR(hand_made(R"({"x":{"dtype":"U8","shape":[0]}})"), "tensor 'x' has no 'data_offsets'");
  EXPECT_DECODE_ERROR(hand_made(R"({"x":{"dtype":"U8","shape":[0],"data_offsets":[0,0],"y":1}})"),
                      "tensor 'x' has an unexpected key 'y'");
}

TEST(SafetensorsMalformed, FieldsOfTheWrongType) {
  EXPECT_DECODE_ERROR(hand_made(R"({"x":{"dtype":8,"shape":[0],"data_offsets":[0,0]}})"), "'dtype' is not a string");
  EXPECT_DECODE_ERROR(hand_made(object_of(entry("x", "U8", "0", "[0,0]"))), "'shape' is not an array");
  EXPECT_DECODE_ERROR(hand_made(object_of(entry("x", "U8", "[1.0]", "[0,1]")), {1}), "not a non-negative integer");
  EXPECT_DECODE_ERROR(hand_made(object_of(entry("x", "U8", "[\"1\"]", "[0,1]")), {1}), "not a non-negative integer");
  for (const char* off : {"[0]", "[0,1,2]", "{}", "[0,-1]", "[0,1.5]", "[\"0\",1]", "[-1,0]"}) {
    SCOPED_TRACE(off);
    EXPECT_DECODE_ERROR(hand_made(object_of(entry("x", "U8", "[1]", off)), {1}),
                        "'data_offsets' is not a pair of non-negative integers");
  }
}

TEST(SafetensorsMalformed, MetadataThatIsNotStringToString) {
  EXPECT_DECODE_ERROR(hand_made(R"({"__metadata__":[]})"), "'__metadata__' is not an object");
  EXPECT_DECODE_ERROR(hand_made(R"({"__metadata__":{"a":1}})"), "'__metadata__' value of 'a' is not a string");
  EXPECT_DECODE_ERROR(hand_made(R"({"__metadata__":{"a":{"b":"c"}}})"), "value of 'a' is not a string");
}

TEST(SafetensorsMalformed, UnknownDtype) {
  for (const char* dt : {"f32", "Q4_0", "", "F8_E4M3FN", "F4"}) {
    SCOPED_TRACE(dt);
    EXPECT_DECODE_ERROR(hand_made(object_of(entry("x", dt, "[1]", "[0,1]")), {1}), "tensor 'x': unknown dtype");
  }
}

TEST(SafetensorsMalformed, NegativeAndAbsurdDimensions) {
  EXPECT_DECODE_ERROR(hand_made(object_of(entry("x", "U8", "[2,-3]", "[0,6]")), Bytes(6)), "negative dimension -3");
  EXPECT_DECODE_ERROR(hand_made(object_of(entry("x", "U8", "[9223372036854775808]", "[0,1]")), {1}),
                      "dimension 9223372036854775808 in 'shape' overflows");
  EXPECT_DECODE_ERROR(hand_made(object_of(entry("x", "U8", "[99999999999999999999]", "[0,1]")), {1}),
                      "is not a non-negative integer");
}

TEST(SafetensorsMalformed, ShapeWhoseByteCountOverflows) {
  EXPECT_DECODE_ERROR(hand_made(object_of(entry("x", "U8", "[4294967296,4294967296]", "[0,1]")), {1}), "overflows");
  // itemsize pushes it over: 2^61 F32 elements.
  EXPECT_DECODE_ERROR(hand_made(object_of(entry("x", "F32", "[2305843009213693952]", "[0,1]")), {1}), "overflows");
  // A zero dimension does not excuse the others.
  EXPECT_DECODE_ERROR(hand_made(object_of(entry("x", "U8", "[0,4294967296,4294967296]", "[0,0]"))), "overflows");
}

TEST(SafetensorsMalformed, ByteSpanThatIsNotTheShapesSize) {
  EXPECT_DECODE_ERROR(hand_made(object_of(entry("x", "F32", "[2,3]", "[0,23]")), Bytes(23)),
                      "tensor 'x': data_offsets [0, 23] span 23 bytes where shape (2, 3) of F32 needs 24");
  EXPECT_DECODE_ERROR(hand_made(object_of(entry("x", "BF16", "[2]", "[0,5]")), Bytes(5)), "needs 4");
  // An absurd shape against a tiny file is a mismatch, not an allocation.
  EXPECT_DECODE_ERROR(hand_made(object_of(entry("x", "F32", "[1000000000000]", "[0,4]")), Bytes(4)), "needs 4000000000000");
}

TEST(SafetensorsMalformed, OffsetsOutOfRange) {
  EXPECT_DECODE_ERROR(hand_made(object_of(entry("x", "U8", "[4]", "[0,4]")), Bytes(3)),
                      "tensor 'x': data_offsets [0, 4] run past the end of the data (3 bytes)");
  EXPECT_DECODE_ERROR(hand_made(object_of(entry("x", "U8", "[1]", "[18446744073709551615,18446744073709551615]")), Bytes(1)),
                      "run past the end");
  EXPECT_DECODE_ERROR(hand_made(object_of(entry("x", "U8", "[0]", "[2,1]")), Bytes(2)), "end before they begin");
}

TEST(SafetensorsMalformed, OverlappingOffsets) {
  EXPECT_DECODE_ERROR(hand_made(object_of(entry("a", "U8", "[3]", "[0,3]"), entry("b", "U8", "[2]", "[2,4]")), Bytes(4)),
                      "tensor 'b': data_offsets [2, 4] overlap another tensor's (which ends at 3)");
  // Two tensors on the same bytes.
  EXPECT_DECODE_ERROR(hand_made(object_of(entry("a", "U8", "[2]", "[0,2]"), entry("b", "I8", "[2]", "[0,2]")), Bytes(2)),
                      "overlap");
}

TEST(SafetensorsMalformed, OffsetsThatDoNotCoverTheBuffer) {
  EXPECT_DECODE_ERROR(hand_made(object_of(entry("a", "U8", "[2]", "[1,3]")), Bytes(3)),
                      "bytes [0, 1) of the data belong to no tensor (before tensor 'a')");
  EXPECT_DECODE_ERROR(hand_made(object_of(entry("a", "U8", "[1]", "[0,1]"), entry("b", "U8", "[1]", "[2,3]")), Bytes(3)),
                      "bytes [1, 2) of the data belong to no tensor (before tensor 'b')");
  EXPECT_DECODE_ERROR(hand_made(object_of(entry("a", "U8", "[1]", "[0,1]")), Bytes(3)),
                      "bytes [1, 3) at the end of the data belong to no tensor");
  EXPECT_DECODE_ERROR(hand_made("{}", Bytes(1)), "bytes [0, 1) at the end");
}

TEST(SafetensorsMalformed, EveryTruncationIsAnError) {
  st::Archive a;
  a.metadata = {{"k", "v"}};
  a.entries.push_back(st::Entry{"w", "F16", {3, 5}, pattern(30)});
  a.entries.push_back(st::Entry{"b", "F8_E8M0", {3}, pattern(3)});
  const Bytes f = st::encode(a);
  for (std::size_t n = 0; n < f.size(); ++n) {
    SCOPED_TRACE(n);
    EXPECT_THROW(st::decode(Bytes(f.begin(), f.begin() + static_cast<std::ptrdiff_t>(n)), "x"), Error);
  }
}

TEST(SafetensorsMalformed, RandomCorruptionNeverCrashes) {
  const std::uint32_t seed = 20261130;
  std::cout << "seed " << seed << "\n";
  SCOPED_TRACE(seed);
  std::mt19937 rng(seed);
  st::Archive a;
  a.metadata = {{"format", "pt"}};
  a.entries.push_back(st::Entry{"w", "F32", {3, 4}, pattern(48)});
  a.entries.push_back(st::Entry{"ids", "I64", {2}, pattern(16)});
  const Bytes valid = st::encode(a);
  for (int trial = 0; trial < 20000; ++trial) {
    Bytes f = valid;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < flips; ++i) f[rng() % f.size()] = static_cast<std::uint8_t>(rng());
    if (rng() % 4 == 0) f.resize(rng() % f.size());
    try {
      const st::Archive got = st::decode(f, "x");
      // Anything accepted is self-consistent, and writes back to a file that reads the same.
      for (const st::Entry& e : got.entries) {
        std::size_t n = st::itemsize(e.dtype);
        for (std::int64_t d : e.shape) n *= static_cast<std::size_t>(d);
        EXPECT_EQ(e.bytes.size(), n);
      }
      const st::Archive again = st::decode(st::encode(got), "x");
      EXPECT_EQ(again.entries.size(), got.entries.size());
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::bad_file) << e.what();
    }
  }
}

// ---- files ---------------------------------------------------------------------------------

TEST(SafetensorsFile, WritesAtomicallyAndReadsBack) {
  const auto path = std::filesystem::path(::testing::TempDir()) / "qexact_test_st.safetensors";
  st::Archive a;
  a.entries.push_back(st::Entry{"w", "BF16", {2, 2}, pattern(8)});
  st::write(path, a);
  const st::Archive back = st::read(path);
  std::filesystem::remove(path);
  ASSERT_EQ(back.entries.size(), 1u);
  EXPECT_EQ(back.entries[0].bytes, pattern(8));
}

TEST(SafetensorsFile, MissingFileAndDirectoryAreIoErrors) {
  const auto dir = std::filesystem::path(::testing::TempDir());
  for (const auto& path : {dir / "qexact_test_no_such_file.safetensors", dir}) {
    SCOPED_TRACE(path.string());
    try {
      st::read(path);
      ADD_FAILURE() << "read succeeded";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::io);
      EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace qexact
