// .npy reading and writing (io/npy.hpp): exact round trips of every supported dtype and shape,
// the header NumPy would write, versions 1.0/2.0/3.0, and one error per malformation.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "io/npy.hpp"

namespace qexact {
namespace {

using Bytes = std::vector<std::uint8_t>;

// A tensor whose bytes are 0, 1, 2, ... (mod 251): every byte position is distinguishable.
Tensor patterned(DType dt, const Shape& shape) {
  Tensor t(dt, shape);
  auto* b = static_cast<std::uint8_t*>(t.raw());
  for (std::size_t i = 0; i < t.nbytes(); ++i) b[i] = static_cast<std::uint8_t>(i % 251);
  return t;
}

Bytes bytes_of(const Tensor& t) {
  const auto* b = static_cast<const std::uint8_t*>(t.raw());
  return Bytes(b, b + t.nbytes());
}

// A file with the given version, header text (written as is) and data bytes.
Bytes hand_made(int major, const std::string& header, const Bytes& data = {}) {
  Bytes f = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<std::uint8_t>(major), 0};
  const int len_bytes = major == 1 ? 2 : 4;
  for (int i = 0; i < len_bytes; ++i) f.push_back(static_cast<std::uint8_t>(header.size() >> (8 * i)));
  f.insert(f.end(), header.begin(), header.end());
  f.insert(f.end(), data.begin(), data.end());
  return f;
}

std::string header_text(const Bytes& file) {
  const std::size_t len = file[8] | (file[9] << 8);
  return std::string(file.begin() + 10, file.begin() + 10 + static_cast<std::ptrdiff_t>(len));
}

// The message of the qexact::Error (bad_file) that decoding `file` throws.
std::string decode_error(const Bytes& file) {
  try {
    npy::decode(file, "x.npy");
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::bad_file) << e.what();
    EXPECT_EQ(std::string(e.what()).rfind("x.npy: ", 0), 0u) << "message does not name the file: " << e.what();
    return e.what();
  }
  ADD_FAILURE() << "decode accepted the file";
  return "";
}

// ---- round trips ---------------------------------------------------------------------------

struct DtypeCase {
  DType dtype;
  const char* descr;
};

class NpyRoundTrip : public ::testing::TestWithParam<DtypeCase> {};

TEST_P(NpyRoundTrip, EveryShapeComesBackByteForByte) {
  const DtypeCase c = GetParam();
  for (const Shape& shape : {Shape{}, Shape{5}, Shape{2, 3, 4}, Shape{0}, Shape{2, 0, 3}, Shape{1, 1, 7, 1}}) {
    SCOPED_TRACE(shape_str(shape));
    const Tensor t = patterned(c.dtype, shape);
    const Bytes file = npy::encode(t.view());
    EXPECT_NE(header_text(file).find(std::string("'descr': '") + c.descr + "'"), std::string::npos);
    const Tensor back = npy::decode(file, "t.npy");
    // bf16 has no NumPy dtype: it comes back as the u16 bit patterns it was stored as.
    EXPECT_EQ(back.dtype(), c.dtype == DType::bf16 ? DType::u16 : c.dtype);
    EXPECT_EQ(back.shape(), shape);
    EXPECT_EQ(bytes_of(back), bytes_of(t));
  }
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, NpyRoundTrip,
                         ::testing::Values(DtypeCase{DType::f32, "<f4"}, DtypeCase{DType::f16, "<f2"},
                                           DtypeCase{DType::bf16, "<u2"}, DtypeCase{DType::u8, "|u1"},
                                           DtypeCase{DType::i8, "|i1"}, DtypeCase{DType::u16, "<u2"},
                                           DtypeCase{DType::i32, "<i4"}, DtypeCase{DType::f64, "<f8"}),
                         [](const auto& info) { return std::string(dtype_name(info.param.dtype)); });

TEST(Npy, Bf16ReadsBackThroughReinterpret) {
  const Tensor t = patterned(DType::bf16, {3, 2});
  const Tensor back = npy::reinterpret_u16_as_bf16(npy::decode(npy::encode(t.view()), "t.npy"));
  EXPECT_EQ(back.dtype(), DType::bf16);
  EXPECT_EQ(back.shape(), t.shape());
  EXPECT_EQ(bytes_of(back), bytes_of(t));
}

TEST(Npy, ReinterpretRejectsAnythingButU16) {
  EXPECT_THROW(npy::reinterpret_u16_as_bf16(Tensor(DType::f32, {2})), Error);
}

TEST(Npy, StridedViewsAreWrittenInCOrder) {
  const Tensor t = patterned(DType::i32, {2, 3});
  // The transpose (3, 2) of t, as strides over t's storage.
  const TensorView transposed{DType::i32, {3, 2}, {1, 3}, t.raw()};
  const Tensor back = npy::decode(npy::encode(transposed), "t.npy");
  ASSERT_EQ(back.shape(), (Shape{3, 2}));
  const std::int32_t* src = t.data<std::int32_t>();
  const std::int32_t* got = back.data<std::int32_t>();
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 2; ++c) EXPECT_EQ(got[r * 2 + c], src[c * 3 + r]) << r << ", " << c;
}

// ---- the header we write -------------------------------------------------------------------

TEST(Npy, WritesNumpysVersion1HeaderAlignedTo64) {
  const Bytes file = npy::encode(Tensor(DType::f32, {2, 3}).view());
  ASSERT_GE(file.size(), 10u);
  EXPECT_EQ(std::memcmp(file.data(), "\x93NUMPY\x01\x00", 8), 0);
  const std::string h = header_text(file);
  EXPECT_EQ((10 + h.size()) % 64, 0u);
  EXPECT_EQ(file.size(), 10 + h.size() + 24);
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  EXPECT_EQ(h, dict + std::string(h.size() - dict.size() - 1, ' ') + "\n");
}

TEST(Npy, WritesOneAndZeroDimensionalShapesAsPythonTuples) {
  EXPECT_NE(header_text(npy::encode(Tensor(DType::u8, {7}).view())).find("'shape': (7,), }"), std::string::npos);
  EXPECT_NE(header_text(npy::encode(Tensor(DType::u8, {}).view())).find("'shape': (), }"), std::string::npos);
}

TEST(Npy, WritesVersion2WhenTheHeaderOutgrowsSixteenBits) {
  // 30000 dimensions of 1 make a header longer than version 1.0's 65535-byte limit.
  const Shape shape(30000, 1);
  Tensor t(DType::f32, shape);
  t.data<float>()[0] = 1.5f;
  const Bytes file = npy::encode(t.view());
  ASSERT_GT(file.size(), 12u);
  EXPECT_EQ(file[6], 2);
  EXPECT_EQ(file[7], 0);
  const std::size_t len = file[8] | (file[9] << 8) | (file[10] << 16) | (static_cast<std::size_t>(file[11]) << 24);
  EXPECT_GT(len, 65535u);
  EXPECT_EQ((12 + len) % 64, 0u);
  const Tensor back = npy::decode(file, "t.npy");
  EXPECT_EQ(back.shape(), shape);
  EXPECT_EQ(back.data<float>()[0], 1.5f);
}

// ---- versions and spellings we read --------------------------------------------------------

TEST(Npy, ReadsVersions2And3WrittenByHand) {
  const Bytes data = {1, 2, 3, 4, 5, 6};
  for (int major : {2, 3}) {
    SCOPED_TRACE(major);
    const Tensor t = npy::decode(hand_made(major, "{'descr': '<u2', 'fortran_order': False, 'shape': (3,), }\n", data),
                                 "t.npy");
    EXPECT_EQ(t.dtype(), DType::u16);
    EXPECT_EQ(t.shape(), (Shape{3}));
    EXPECT_EQ(bytes_of(t), data);
  }
}

TEST(Npy, ReadsUnalignedHeadersKeysInAnyOrderAndDoubleQuotes) {
  // Older writers aligned to 16 bytes; a dict may list its keys in any order.
  const Tensor t =
      npy::decode(hand_made(1, "{\"shape\": (2,1), 'fortran_order':False,'descr':'|i1'}  \n", {0xFF, 0x01}), "t.npy");
  EXPECT_EQ(t.dtype(), DType::i8);
  EXPECT_EQ(t.shape(), (Shape{2, 1}));
  EXPECT_EQ(t.data<std::int8_t>()[0], -1);
}

TEST(Npy, OneByteTypesAcceptAnyByteOrderMark) {
  for (const char* descr : {"|u1", "<u1", ">u1", "=u1"}) {
    SCOPED_TRACE(descr);
    const Tensor t = npy::decode(
        hand_made(1, std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (1,), }\n", {9}),
        "t.npy");
    EXPECT_EQ(t.dtype(), DType::u8);
  }
}

// ---- malformed files: each a qexact::Error naming the problem ------------------------------

std::string header_with(const std::string& descr, const std::string& fortran, const std::string& shape) {
  return "{'descr': " + descr + ", 'fortran_order': " + fortran + ", 'shape': " + shape + ", }\n";
}

TEST(NpyMalformed, BadMagic) {
  Bytes f = npy::encode(Tensor(DType::f32, {1}).view());
  f[1] = 'X';
  EXPECT_NE(decode_error(f).find("magic"), std::string::npos);
  EXPECT_NE(decode_error({}).find("magic"), std::string::npos);
  EXPECT_NE(decode_error({'h', 'e', 'l', 'l', 'o'}).find("magic"), std::string::npos);
}

TEST(NpyMalformed, UnsupportedVersion) {
  Bytes f = npy::encode(Tensor(DType::f32, {1}).view());
  f[6] = 4;
  EXPECT_NE(decode_error(f).find("version 4.0"), std::string::npos);
  f[6] = 1;
  f[7] = 1;
  EXPECT_NE(decode_error(f).find("version 1.1"), std::string::npos);
  f[6] = 0;
  f[7] = 0;
  EXPECT_NE(decode_error(f).find("version 0.0"), std::string::npos);
}

TEST(NpyMalformed, TruncatedBeforeTheHeaderLength) {
  const Bytes f = npy::encode(Tensor(DType::f32, {1}).view());
  EXPECT_NE(decode_error(Bytes(f.begin(), f.begin() + 7)).find("truncated header"), std::string::npos);
  EXPECT_NE(decode_error(Bytes(f.begin(), f.begin() + 9)).find("truncated header"), std::string::npos);
  const Bytes v2 = hand_made(2, "{}");  // a version 2.0 length needs 4 bytes
  EXPECT_NE(decode_error(Bytes(v2.begin(), v2.begin() + 11)).find("truncated header"), std::string::npos);
}

TEST(NpyMalformed, HeaderLengthPastEndOfFile) {
  Bytes f = npy::encode(Tensor(DType::f32, {1}).view());
  f[8] = 0xFF;
  f[9] = 0xFF;
  EXPECT_NE(decode_error(f).find("header length 65535 runs past the end of the file"), std::string::npos);
  Bytes v2 = hand_made(2, "{}");
  v2[8] = v2[9] = v2[10] = v2[11] = 0xFF;
  EXPECT_NE(decode_error(v2).find("past the end"), std::string::npos);
}

TEST(NpyMalformed, TruncatedData) {
  const Bytes f = npy::encode(Tensor(DType::f32, {2, 3}).view());
  const std::string msg = decode_error(Bytes(f.begin(), f.end() - 1));
  EXPECT_NE(msg.find("truncated data"), std::string::npos) << msg;
  EXPECT_NE(msg.find("23 bytes"), std::string::npos) << msg;
  EXPECT_NE(msg.find("needs 24"), std::string::npos) << msg;
}

TEST(NpyMalformed, ExtraDataAfterTheArray) {
  Bytes f = npy::encode(Tensor(DType::f32, {2}).view());
  f.push_back(0);
  EXPECT_NE(decode_error(f).find("extra bytes"), std::string::npos);
}

TEST(NpyMalformed, EveryTruncationIsAnError) {
  const Bytes f = npy::encode(patterned(DType::f16, {3, 5}).view());
  for (std::size_t n = 0; n < f.size(); ++n) {
    SCOPED_TRACE(n);
    EXPECT_THROW(npy::decode(Bytes(f.begin(), f.begin() + static_cast<std::ptrdiff_t>(n)), "x.npy"), Error);
  }
}

TEST(NpyMalformed, ShapeWhoseByteCountOverflows) {
  EXPECT_NE(decode_error(hand_made(1, header_with("'<f4'", "False", "(4294967296, 4294967296)"))).find("overflow"),
            std::string::npos);
  // itemsize pushes it over: 2^61 elements of 4 bytes.
  EXPECT_NE(decode_error(hand_made(1, header_with("'<f4'", "False", "(2305843009213693952,)"))).find("overflow"),
            std::string::npos);
  // A zero dimension does not excuse the others.
  EXPECT_NE(decode_error(hand_made(1, header_with("'<f4'", "False", "(0, 4294967296, 4294967296)"))).find("overflow"),
            std::string::npos);
  EXPECT_NE(decode_error(hand_made(1, header_with("'<f4'", "False", "(99999999999999999999,)"))).find("overflow"),
            std::string::npos);
}

TEST(NpyMalformed, AbsurdShapeAgainstATinyFileIsTruncatedNotAllocated) {
  EXPECT_NE(decode_error(hand_made(1, header_with("'<f4'", "False", "(1000000000000,)"))).find("truncated data"),
            std::string::npos);
}

TEST(NpyMalformed, NegativeDimension) {
  EXPECT_NE(decode_error(hand_made(1, header_with("'<f4'", "False", "(2, -3)"))).find("negative dimension -3"),
            std::string::npos);
}

TEST(NpyMalformed, FortranOrder) {
  EXPECT_NE(decode_error(hand_made(1, header_with("'<f4'", "True", "(1,)"), {0, 0, 0, 0}))
                .find("Fortran-order arrays are not supported"),
            std::string::npos);
}

TEST(NpyMalformed, BigEndian) {
  for (const char* descr : {"'>f4'", "'>f2'", "'>u2'", "'>i4'", "'>f8'"}) {
    SCOPED_TRACE(descr);
    EXPECT_NE(decode_error(hand_made(1, header_with(descr, "False", "(1,)"), Bytes(8, 0))).find("big-endian"),
              std::string::npos);
  }
}

TEST(NpyMalformed, UnknownDescr) {
  for (const char* descr : {"'<c8'", "'|b1'", "'<U3'", "'=f4'", "'f4'", "''", "'<f4 '", "'|V2'"}) {
    SCOPED_TRACE(descr);
    EXPECT_NE(decode_error(hand_made(1, header_with(descr, "False", "(1,)"), Bytes(4, 0))).find("unsupported dtype"),
              std::string::npos);
  }
}

TEST(NpyMalformed, ObjectAndOtherNonNumericDtypes) {
  for (const char* descr : {"'|O'", "'<M8[ns]'", "'|S5'", "'<U1'", "'|b1'"}) {
    SCOPED_TRACE(descr);
    EXPECT_NE(decode_error(hand_made(1, header_with(descr, "False", "(1,)"), Bytes(8, 0))).find("unsupported dtype"),
              std::string::npos);
  }
}

TEST(NpyMalformed, StructuredDtype) {
  EXPECT_NE(decode_error(hand_made(1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': ()}\n", Bytes(4, 0)))
                .find("structured dtypes"),
            std::string::npos);
}

TEST(NpyMalformed, HeaderThatIsNotADict) {
  for (const char* header : {"[1, 2]\n", "'descr'\n", "(1,)\n", "  \n"}) {
    SCOPED_TRACE(header);
    EXPECT_NE(decode_error(hand_made(1, header)).find("the header dict does not start with '{'"), std::string::npos);
  }
}

TEST(NpyMalformed, Version3Utf8HeaderIsReadAsUtf8Text) {
  // Version 3.0 exists for UTF-8 headers (field names); its non-ASCII text reaches the checks
  // intact rather than being misparsed.
  const std::string key = "caf\xc3\xa9";
  EXPECT_NE(decode_error(hand_made(3, "{'descr': '<f4', 'fortran_order': False, 'shape': (), '" + key + "': ()}\n",
                                   Bytes(4, 0)))
                .find("unexpected key '" + key + "'"),
            std::string::npos);
  EXPECT_NE(decode_error(hand_made(3, "{'descr': '<f\xc3\xa9', 'fortran_order': False, 'shape': ()}\n", Bytes(4, 0)))
                .find("unsupported dtype '<f\xc3\xa9'"),
            std::string::npos);
  const Tensor t = npy::decode(hand_made(3, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,)}\n", Bytes(4, 0)), "t");
  EXPECT_EQ(t.dtype(), DType::f32);
}

TEST(NpyMalformed, MissingKeys) {
  EXPECT_NE(decode_error(hand_made(1, "{'descr': '<f4', 'fortran_order': False}\n")).find("missing key 'shape'"),
            std::string::npos);
  EXPECT_NE(decode_error(hand_made(1, "{'descr': '<f4', 'shape': ()}\n")).find("missing key 'fortran_order'"),
            std::string::npos);
  EXPECT_NE(decode_error(hand_made(1, "{'fortran_order': False, 'shape': ()}\n")).find("missing key 'descr'"),
            std::string::npos);
  EXPECT_NE(decode_error(hand_made(1, "{}\n")).find("missing key"), std::string::npos);
}

TEST(NpyMalformed, KeysOfTheWrongKind) {
  EXPECT_NE(decode_error(hand_made(1, header_with("'<f4'", "'no'", "(1,)"))).find("'fortran_order' is not True or False"),
            std::string::npos);
  EXPECT_NE(decode_error(hand_made(1, header_with("'<f4'", "False", "'(1,)'"))).find("'shape' is not a tuple"),
            std::string::npos);
  EXPECT_NE(decode_error(hand_made(1, header_with("(1,)", "False", "(1,)"))).find("'descr' is not a string"),
            std::string::npos);
}

TEST(NpyMalformed, UnexpectedAndDuplicateKeys) {
  EXPECT_NE(decode_error(hand_made(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (), 'x': ()}\n"))
                .find("unexpected key 'x'"),
            std::string::npos);
  EXPECT_NE(decode_error(hand_made(1, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': ()}\n"))
                .find("duplicate key 'descr'"),
            std::string::npos);
}

TEST(NpyMalformed, GarbageDict) {
  for (const char* header :
       {"hello\n", "", "{\n", "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }}\n",
        "{'descr' '<f4'}\n", "{'descr': <f4}\n", "{'descr': '<f4\n", "{'descr': '<f4', 'shape': (1 2)}\n",
        "{'descr': '<f4', 'shape': (1,,)}\n", "{'descr': '\\x3cf4'}\n", "{'shape': (a,)}\n", "{descr: '<f4'}\n",
        "{'descr': '<f4' 'fortran_order': False}\n", "{'descr': '<f4', 'fortran_order': Falsey}\n"}) {
    SCOPED_TRACE(header);
    EXPECT_NE(decode_error(hand_made(1, header)).find("malformed header"), std::string::npos);
  }
}

TEST(NpyMalformed, ParenthesisedIntegerIsNotAShape) {
  EXPECT_NE(decode_error(hand_made(1, header_with("'<f4'", "False", "(3)"), Bytes(12, 0))).find("not a tuple"),
            std::string::npos);
}

TEST(NpyMalformed, RandomCorruptionNeverCrashes) {
  const std::uint32_t seed = 20261130;
  std::cout << "seed " << seed << "\n";
  SCOPED_TRACE(seed);
  std::mt19937 rng(seed);
  const Bytes valid = npy::encode(patterned(DType::f32, {3, 4}).view());
  for (int trial = 0; trial < 20000; ++trial) {
    Bytes f = valid;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < flips; ++i) f[rng() % f.size()] = static_cast<std::uint8_t>(rng());
    if (rng() % 4 == 0) f.resize(rng() % f.size());
    try {
      const Tensor t = npy::decode(f, "x.npy");
      // Anything accepted is self-consistent.
      EXPECT_EQ(t.nbytes(), static_cast<std::size_t>(t.numel()) * dtype_size(t.dtype()));
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::bad_file) << e.what();
    }
  }
}

// ---- files ---------------------------------------------------------------------------------

TEST(NpyFile, ReadsWhatWasWrittenToDisk) {
  const auto path = std::filesystem::path(::testing::TempDir()) / "qexact_test_npy_read.npy";
  const Tensor t = patterned(DType::f16, {4, 2});
  const Bytes file = npy::encode(t.view());
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(file.data()), static_cast<std::streamsize>(file.size()));
  }
  const Tensor back = npy::read(path);
  std::filesystem::remove(path);
  EXPECT_EQ(back.dtype(), DType::f16);
  EXPECT_EQ(bytes_of(back), bytes_of(t));
}

TEST(NpyFile, MissingFileAndDirectoryAreIoErrors) {
  const auto dir = std::filesystem::path(::testing::TempDir());
  for (const auto& path : {dir / "qexact_test_npy_no_such_file.npy", dir}) {
    SCOPED_TRACE(path.string());
    try {
      npy::read(path);
      ADD_FAILURE() << "read succeeded";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::io);
      EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace qexact
