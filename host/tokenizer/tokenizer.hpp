// Text <-> token ids for the model families ripplekv runs: byte-level BPE (GPT-2, Llama 3, Qwen2, StarCoder, SmolLM2
// and the other pre-tokenizer families llama.cpp names) and SentencePiece-style "llama" vocabularies (Llama 2,
// Mistral, Phi-3), with special tokens, BOS/EOS and every end-of-generation id, loaded from GGUF metadata or a Hugging
// Face tokenizer.json. Token ids equal llama.cpp's (llama_tokenize) for the same file and text; the tests check this
// on llama.cpp's own vocabulary test vectors.
//
// Encoding (llama.cpp llama_vocab::impl::tokenize):
//  1. Special tokens are cut out of the text first, longest text first: user-defined (added) tokens always, control
//     and unknown tokens only when `parse_special` is true. Strip flags drop the whitespace beside them.
//  2. Each remaining stretch is tokenized on its own:
//     BPE: invalid UTF-8 bytes become U+FFFD (each byte that does not start a well-formed sequence), the pre-tokenizer
//          regexes cut the stretch into pieces, each piece is byte-level encoded and merged by rank; a piece that is a
//          token as a whole is emitted directly when the family ignores merges (Llama 3).
//     SPM: a space is put in front when the vocabulary adds a space prefix and the stretch is the first one or follows
//          a special token; spaces become U+2581; score-ordered merges; characters missing from the vocabulary are
//          spelled with <0xXX> byte tokens. Invalid UTF-8 is kept byte-exact through the byte tokens: each byte that
//          does not start a well-formed sequence is a character of its own (llama.cpp lets an invalid lead byte take
//          the next bytes with it; the ids agree on valid UTF-8).
//  NUL bytes are ordinary text (U+0000). No input makes encode() fail or crash.
//
// Decoding (llama.cpp llama_detokenize with remove_special = false): the concatenation of each token's text, where a
// byte-level token is mapped back to its bytes, "▁" becomes a space and <0xXX> its byte; control and unknown tokens
// are rendered as their text unless `render_special` is false; for SPM vocabularies with a space prefix, one leading
// space of the first token is dropped. No clean-up of spaces before punctuation is done, so
// decode(encode(t, false, false)) == t for every valid UTF-8 text t of a BPE vocabulary and for every byte string of an
// SPM vocabulary with byte fallback, unless user-defined tokens with strip flags eat whitespace, and except that a
// U+2581 in the text of an SPM vocabulary (SentencePiece's own space mark) may decode as a space. A BPE vocabulary may
// lack tokens for some of the 256 byte characters (SmolLM2 lacks 21: 0x04, 0x06, 0x13, 0x14, 0x16, 0x1D, 0xC0, 0xC1,
// 0xF1, 0xF2, 0xF5..0xFF); such bytes are dropped by encode(), as llama.cpp drops them, so they do not round-trip.
//
// Thread rules: a Tokenizer is immutable after loading; all const methods may run concurrently. Copies share the data.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.hpp"

namespace rkv {

class GgufFile;

class Tokenizer {
 public:
  /// Loads the tokenizer from GGUF metadata (the weights are not read): `tokenizer.ggml.model` ("gpt2" -> BPE,
  /// "llama" -> SPM), `.pre`, `.tokens`, `.scores`, `.token_type`, `.merges`, `.bos_token_id`, `.eos_token_id`,
  /// `.eot_token_id`, `.eom_token_id`, `.unknown_token_id`, `.padding_token_id`, `.add_bos_token`, `.add_space_prefix`,
  /// and `tokenizer.chat_template`. Throws rkv::InputError naming the file and key when a key is missing or has the
  /// wrong type or length, for an unknown or unsupported model or pre-tokenizer (listing the supported ones), and for
  /// duplicate tokens or malformed merges.
  static Tokenizer from_gguf(const GgufFile& file);

  /// Loads the tokenizer of a Hugging Face model folder: tokenizer.json (byte-level BPE: model.type "BPE" with a
  /// ByteLevel pre-tokenizer, optionally in a Sequence after Split/Digits steps; added_tokens become control tokens
  /// when "special", user-defined otherwise, with their lstrip/rstrip), tokenizer_config.json (bos_token, eos_token,
  /// add_bos_token, chat_template) and generation_config.json (eos_token_id: one id or a list, added to the
  /// end-of-generation set), the last two optional. A "NFC" normalizer is accepted and not applied, as in llama.cpp.
  /// Throws rkv::InputError naming the file and field for anything else (SentencePiece-style tokenizer.json,
  /// other normalizers or pre-tokenizers, missing files, malformed JSON).
  static Tokenizer from_hf_dir(const std::filesystem::path& dir);

  /// Loads from `path`: a folder is a Hugging Face model folder (from_hf_dir), anything else a GGUF file (from_gguf;
  /// only its metadata is used). Throws rkv::InputError as those do, or when `path` does not exist.
  static Tokenizer from_path(const std::filesystem::path& path);

  /// Builds a tokenizer from vocabulary data (what the loaders produce). Runs finalize_vocab(); throws rkv::InputError
  /// for duplicate tokens, merges whose halves are empty, or regexes that do not compile.
  static Tokenizer from_vocab(VocabData data);

  /// Token ids of `text`. `add_bos`: prepend bos() (throws rkv::InputError when the vocabulary has no BOS token);
  /// `parse_special`: also cut control tokens (e.g. "<|im_start|>") out of the text, for prompts made by a chat template.
  /// Never fails on any byte string (see the file comment for invalid UTF-8 and NUL). Throws rkv::Cancelled when the
  /// thread's CancelScope (core/cancel.hpp) is cancelled meanwhile (polled every few thousand pieces).
  std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special) const;

  /// Text of `ids` (see the file comment). Throws rkv::InputError for an id outside [0, n_vocab()).
  std::string decode(const std::vector<int32_t>& ids, bool render_special = true) const;

  /// The text one token contributes to decode() (without the SPM leading-space rule). Throws for a bad id.
  std::string token_to_piece(int32_t id, bool render_special = true) const;
  /// The token's text as stored in the vocabulary. Throws rkv::InputError for a bad id.
  const std::string& token_text(int32_t id) const;
  /// TokenAttr bits of a token. Throws rkv::InputError for a bad id.
  uint32_t token_attr(int32_t id) const;
  /// Id of the token whose stored text is `text`, or -1.
  int32_t token_id(std::string_view text) const;

  int32_t bos() const;  ///< -1 when none
  int32_t eos() const;  ///< -1 when none
  int32_t eot() const;  ///< end of turn (e.g. <|eot_id|>, <|im_end|>), -1 when none
  int32_t unk() const;  ///< -1 when none
  /// Whether the model wants BOS prepended to a prompt (GGUF add_bos_token / tokenizer_config add_bos_token, else the
  /// llama.cpp default for the vocabulary type and family). Pass it as encode(text, add_bos_by_default(), ...).
  bool add_bos_by_default() const;
  /// True for every id that ends generation: EOS, EOT, EOM and the tokens llama.cpp treats as such (see vocab.hpp).
  bool is_end_of_generation(int32_t id) const;
  /// The end-of-generation ids, sorted.
  const std::vector<int32_t>& end_of_generation_ids() const;

  int32_t n_vocab() const;
  VocabType type() const;
  /// "bpe/<pre-tokenizer>" or "spm", for messages.
  std::string description() const;
  /// The model's Jinja chat template ("" when the file has none).
  const std::string& chat_template() const;

 private:
  struct Impl;
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

}  // namespace rkv
