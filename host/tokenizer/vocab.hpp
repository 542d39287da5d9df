// The vocabulary a tokenizer is built from, as the loaders (GGUF metadata, HF tokenizer.json) read it, and the rules
// that complete it: special-token ids found by their text, the end-of-generation set, per-token strip flags.
//
// Token attributes follow llama.cpp's (llama_token_attr): GGUF `tokenizer.ggml.token_type` 1 normal, 2 unknown,
// 3 control, 4 user-defined, 5 unused, 6 byte; 0 and other values undefined (no attribute bits).
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace rkv {

/// Attribute bits of a token.
enum TokenAttr : uint32_t {
  kTokenNormal = 1u << 0,       ///< ordinary vocabulary entry
  kTokenUnknown = 1u << 1,      ///< the <unk> token
  kTokenUnused = 1u << 2,       ///< reserved slot; decodes to nothing
  kTokenControl = 1u << 3,      ///< special (BOS, EOS, <|im_start|>...): parsed from text only when asked
  kTokenUserDefined = 1u << 4,  ///< added token: always cut out of the text before the merges, rendered as its text
  kTokenByte = 1u << 5,         ///< SPM byte-fallback token <0xXX>
  kTokenLstrip = 1u << 6,       ///< when cut out of text, whitespace to its left is dropped
  kTokenRstrip = 1u << 7,       ///< when cut out of text, whitespace to its right is dropped
};

/// The merge algorithm.
enum class VocabType {
  bpe,  ///< byte-level BPE with merge ranks (GGUF tokenizer.ggml.model = "gpt2")
  spm,  ///< SentencePiece-style: score-ordered merges, byte fallback, "▁" for spaces (tokenizer.ggml.model = "llama")
};

struct VocabToken {
  std::string text;  ///< as stored in the file (byte-level encoded for BPE, with U+2581 for spaces in SPM)
  float score = 0.0f;  ///< SPM merge priority (higher merges first); unused by BPE
  uint32_t attr = kTokenNormal;  ///< TokenAttr bits
};

/// Everything read from a model file. Ids are indices into `tokens`; -1 means "none".
struct VocabData {
  VocabType type = VocabType::bpe;
  std::string source;  ///< file or folder it came from (for messages)

  // BPE
  std::string pre_name;                          ///< pre-tokenizer name, for messages
  std::vector<std::string> pre_regexes;          ///< PreTokenizer regexes (see pre_tokenizer.hpp)
  std::vector<std::pair<std::string, std::string>> merges;  ///< rank = position; byte-level encoded halves
  bool ignore_merges = false;                    ///< a whole piece found in the vocabulary skips the merges

  // SPM
  bool add_space_prefix = true;  ///< a space is put before the text (and before text that follows a special token)

  std::vector<VocabToken> tokens;
  bool add_bos = false;  ///< the model's own choice of prepending BOS (Tokenizer::add_bos_by_default)

  int32_t bos = -1, eos = -1, eot = -1, eom = -1, unk = -1, pad = -1;
  int32_t fim_pad = -1, fim_rep = -1, fim_sep = -1;
  std::vector<int32_t> extra_eog;  ///< more end-of-generation ids the file names (e.g. generation_config.json)

  std::string chat_template;  ///< Jinja text, "" when the file has none
  std::string model_name;     ///< GGUF general.name (a few per-model rules key on it, as in llama.cpp)
};

/// Completes `v` the way llama.cpp's llama_vocab::impl::load does after reading the arrays:
/// - special ids outside [0, n_vocab) become -1;
/// - eot, eom, fim_pad, fim_rep, fim_sep that the file leaves unset are found by their text ("<|eot_id|>",
///   "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", ... ; "<|eom_id|>"; "<|fim_pad|>", ...), searching ids
///   in increasing order, and such tokens are marked control;
/// - the end-of-generation set: fim_pad/fim_rep/fim_sep, every token whose text is on llama.cpp's EOG list (marked
///   control), eos, eot, eom and `extra_eog`; then "<|end|>" is dropped when "<|return|>" and "<|call|>" (or "<|calls|>"
///   and "<|flush|>") are present, and "</s>" when "<|tool_response>" is;
/// - "<|channel|>", "<|message|>", "<|start|>", "<|constrain|>" become user-defined (gpt-oss);
/// - for a model whose general.name contains "phi-3"/"phi3": every control/user-defined/unknown token and "</s>" get
///   kTokenRstrip, except "<unk>", "<s>", "<|endoftext|>".
/// Returns the end-of-generation ids, sorted. Throws rkv::InputError when two tokens have the same text.
std::vector<int32_t> finalize_vocab(VocabData& v);

}  // namespace rkv
