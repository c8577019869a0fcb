// GGUF v3 files (io/gguf.hpp): what layout() writes, parse() reads back, value for value; and
// every malformed file is a bad_file error naming the problem, never a crash or an allocation
// from an unchecked size. (gguf-py reading qexact's files: python/peer_tests/test_gguf_model.py.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "io/gguf.hpp"
#include "qexact/error.hpp"

namespace qexact {
namespace {

using gguf::GgmlType;
using gguf::Value;
using gguf::ValueType;
using Bytes = std::vector<std::uint8_t>;

gguf::Metadata sample_metadata() {
  return {{"general.architecture", {ValueType::string, ValueType::u8, "llama"}},
          {"llama.block_count", {ValueType::u32, ValueType::u8, 2u}},
          {"llama.rope.freq_base", {ValueType::f32, ValueType::u8, 10000.0f}},
          {"general.flag", {ValueType::boolean, ValueType::u8, true}},
          {"tokenizer.ggml.tokens", {ValueType::array, ValueType::string, nlohmann::json::array({"a", "b c", ""})}},
          {"tokenizer.ggml.token_type", {ValueType::array, ValueType::i32, nlohmann::json::array({1, 3, -1})}}};
}

std::vector<gguf::TensorInfo> sample_tensors() {
  return {{"token_embd.weight", {4, 64}, GgmlType::q8_0, 0, 0},
          {"blk.0.attn_norm.weight", {3}, GgmlType::f32, 0, 0},
          {"blk.0.ffn_down.weight", {2, 32}, GgmlType::mxfp4, 0, 0},
          {"output.weight", {5, 7}, GgmlType::bf16, 0, 0}};
}

// A whole file: the head, then each tensor's data filled with its index.
Bytes sample_file() {
  const auto tensors = sample_tensors();
  const gguf::Written w = gguf::layout(sample_metadata(), tensors);
  Bytes b(static_cast<std::size_t>(w.file_size), 0);
  std::memcpy(b.data(), w.head.data(), w.head.size());
  for (std::size_t i = 0; i < tensors.size(); ++i)
    std::memset(b.data() + w.offsets[i], static_cast<int>(i + 1),
                static_cast<std::size_t>(gguf::tensor_bytes(tensors[i].type, tensors[i].shape, tensors[i].name)));
  return b;
}

std::string error_of(const Bytes& b) {
  try {
    gguf::parse(b, "m.gguf");
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::bad_file) << e.what();
    return e.what();
  }
  return "";
}

void put_u64(Bytes& b, std::size_t at, std::uint64_t v) { std::memcpy(b.data() + at, &v, 8); }

TEST(Gguf, WhatIsWrittenIsReadBack) {
  const Bytes b = sample_file();
  const gguf::File f = gguf::parse(b, "m.gguf");
  EXPECT_EQ(f.version, 3u);
  EXPECT_EQ(f.alignment, 32u);
  EXPECT_EQ(f.data_start % 32, 0u);
  ASSERT_EQ(f.metadata.size(), sample_metadata().size());
  for (std::size_t i = 0; i < f.metadata.size(); ++i) {
    EXPECT_EQ(f.metadata[i].first, sample_metadata()[i].first);
    EXPECT_EQ(f.metadata[i].second.type, sample_metadata()[i].second.type);
    EXPECT_EQ(f.metadata[i].second.value, sample_metadata()[i].second.value) << f.metadata[i].first;
  }
  ASSERT_EQ(f.tensors.size(), 4u);
  const std::vector<std::uint64_t> bytes = {4 * 2 * 34, 12, 2 * 17, 70};
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(f.tensors[i].name, sample_tensors()[i].name);
    EXPECT_EQ(f.tensors[i].shape, sample_tensors()[i].shape);
    EXPECT_EQ(f.tensors[i].type, sample_tensors()[i].type);
    EXPECT_EQ(f.tensors[i].nbytes, bytes[i]);
    EXPECT_EQ(f.tensors[i].offset % 32, 0u);
    EXPECT_EQ(b[static_cast<std::size_t>(f.data_start + f.tensors[i].offset)], i + 1);
  }
  // The file stores dimensions innermost first: token_embd's [4, 64] is ne = {64, 4}.
  std::uint64_t ne0 = 0;
  const std::string name = "token_embd.weight";
  const auto at = std::search(b.begin(), b.end(), name.begin(), name.end()) - b.begin();
  std::memcpy(&ne0, b.data() + at + name.size() + 4, 8);
  EXPECT_EQ(ne0, 64u);
  EXPECT_EQ(b.size() % 32, 0u) << "the last tensor is padded too";
}

TEST(Gguf, BlocksOfTheQuantizedTypes) {
  EXPECT_EQ(gguf::tensor_bytes(GgmlType::q8_0, {3, 96}, "t"), 3u * 3 * 34);
  EXPECT_EQ(gguf::tensor_bytes(GgmlType::mxfp4, {1, 64}, "t"), 2u * 17);
  EXPECT_EQ(gguf::tensor_bytes(GgmlType::f16, {}, "t"), 2u);
  EXPECT_THROW(gguf::tensor_bytes(GgmlType::q8_0, {2, 48}, "t"), Error);
}

TEST(Gguf, MalformedFilesAreNamedErrors) {
  const Bytes good = sample_file();
  EXPECT_NE(error_of(Bytes(good.begin(), good.begin() + 3)).find("not a GGUF file"), std::string::npos);
  Bytes b = good;
  b[4] = 2;
  EXPECT_NE(error_of(b).find("version 2"), std::string::npos);
  b = good;
  put_u64(b, 16, std::uint64_t{1} << 60);  // metadata count
  EXPECT_NE(error_of(b).find("metadata pairs, more than the file holds"), std::string::npos);
  b = good;
  put_u64(b, 8, std::uint64_t{1} << 60);  // tensor count
  EXPECT_NE(error_of(b).find("tensors, more than the file holds"), std::string::npos);
  b = good;
  put_u64(b, 24, std::uint64_t{1} << 62);  // the first key's length
  EXPECT_NE(error_of(b).find("ends inside metadata key 0"), std::string::npos);
  // Every cut of the head is refused, and so is data cut short.
  const gguf::File f = gguf::parse(good, "m.gguf");
  for (std::size_t n = 0; n < f.data_start; n += 7) EXPECT_NE(error_of(Bytes(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n))), "") << n;
  EXPECT_NE(error_of(Bytes(good.begin(), good.end() - 40)).find("runs past the end of the file"), std::string::npos);
}

TEST(Gguf, UnknownTypesRepeatsAndBadOffsetsAreNamed) {
  const gguf::Written w = gguf::layout({{"a", {ValueType::u32, ValueType::u8, 1u}}}, {{"t", {32}, GgmlType::f32, 0, 0}});
  Bytes b = w.head;
  b.resize(static_cast<std::size_t>(w.file_size), 0);
  const std::size_t type_at = 8 + 8 + 8 + (8 + 1);  // after magic, version, counts, key "a"
  Bytes bad = b;
  bad[type_at] = 77;
  EXPECT_NE(error_of(bad).find("unknown value type 77"), std::string::npos);
  // The tensor info: name "t", 1 dimension, ne0 32, type, offset.
  const std::size_t info = type_at + 4 + 4;
  const std::size_t ggml_type_at = info + 8 + 1 + 4 + 8, offset_at = ggml_type_at + 4;
  bad = b;
  bad[ggml_type_at] = 2;  // Q4_1
  EXPECT_NE(error_of(bad).find("GGML type 2"), std::string::npos);
  bad = b;
  put_u64(bad, offset_at, 4);
  EXPECT_NE(error_of(bad).find("not a multiple of the alignment"), std::string::npos);
  bad = b;
  bad[info + 8 + 1] = 5;  // 5 dimensions
  EXPECT_NE(error_of(bad).find("5 dimensions"), std::string::npos);

  const gguf::Written two = gguf::layout({}, {{"t", {32}, GgmlType::f32, 0, 0}, {"t", {32}, GgmlType::f32, 0, 0}});
  Bytes rep = two.head;
  rep.resize(static_cast<std::size_t>(two.file_size), 0);
  EXPECT_NE(error_of(rep).find("repeats the tensor 't'"), std::string::npos);
  const gguf::Written keys = gguf::layout({{"k", {ValueType::u8, ValueType::u8, 1u}}, {"k", {ValueType::u8, ValueType::u8, 2u}}}, {});
  EXPECT_NE(error_of(keys.head).find("repeats the metadata key 'k'"), std::string::npos);
  const gguf::Written align = gguf::layout({{"general.alignment", {ValueType::u32, ValueType::u8, 24u}}}, {});
  EXPECT_NE(error_of(align.head).find("not a positive power of two"), std::string::npos);
  // A string value is arbitrary bytes in GGUF; the message that quotes it must not fail on the
  // bytes that are not UTF-8 (the fuzzer's finding: nlohmann's dump threw type_error 316).
  // layout() refuses a string alignment, so the key is written under another name and renamed.
  gguf::Written text = gguf::layout({{"general.alignmenX", {ValueType::string, ValueType::u8, std::string("(\xff\xfe\x00n", 5)}}}, {});
  const auto key_end = std::search(text.head.begin(), text.head.end(), std::begin("alignmenX"), std::end("alignmenX") - 1);
  ASSERT_NE(key_end, text.head.end());
  key_end[8] = 't';
  EXPECT_NE(error_of(text.head).find("general.alignment is \"(\xEF\xBF\xBD\xEF\xBF\xBD\\u0000n\": not a positive power of two"),
            std::string::npos) << error_of(text.head);
}

}  // namespace
}  // namespace qexact
