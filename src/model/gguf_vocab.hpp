// A model folder's tokenizer as llama.cpp reads it from GGUF metadata (tokenizer.ggml.*).
//
// A byte-level BPE tokenizer.json (model BPE, a ByteLevel decoder: GPT-2, Llama 3, Qwen, Mistral's
// tekken) becomes llama.cpp's "gpt2" vocabulary as convert_hf_to_gguf.py writes one: every id's
// token up to the model's vocab_size (ids the tokenizer lacks are "[PAD<id>]", type unused),
// token types (normal; control for special added tokens; user-defined for other added ones), the
// merges, tokenizer.ggml.pre "default", the special ids of config.json, and
// tokenizer_config.json's chat_template. Any other tokenizer (SentencePiece, WordPiece, none) is
// not converted: tokenizer.ggml.model "no_vocab", which llama.cpp loads as a model without a
// vocabulary (it runs on token ids); `converted` says which.
#pragma once
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "io/gguf.hpp"

namespace qexact::model {

struct VocabResult {
  bool converted = false;
  std::string why;  // why not, when not
};

// bad_input for a tokenizer.json that is malformed, or whose ids reach past `vocab_size`.
VocabResult add_vocab_metadata(gguf::Metadata& m, const std::filesystem::path& folder, const nlohmann::ordered_json& config,
                               std::int64_t vocab_size);

}  // namespace qexact::model
