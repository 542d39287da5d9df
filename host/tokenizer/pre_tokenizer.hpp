// Pre-tokenizers of byte-level BPE: the text is cut into pieces by an ordered list of regular expressions before the
// merges run inside each piece.
//
// Semantics (llama.cpp unicode_regex_split, HF tokenizers Split with behavior "Isolated"): the list of pieces starts as
// the whole text; each regex in turn re-cuts every piece on its own (lookarounds and `$` see the piece's ends), keeping
// both the matches and the stretches between them as pieces, in order. An empty match cuts the piece at its position.
// Empty pieces are dropped. The pieces always concatenate back to the input.
//
// Regexes are PCRE2 (UTF + UCP, JIT where available), so \p{L}, \p{N}, \p{M}, \p{Lu}, lookarounds, possessive
// quantifiers and (?i:) work as in the Oniguruma engine of HF tokenizers. `\s` and `\S` are rewritten to the Unicode
// White_Space property (U+0009..U+000D, U+0020, U+0085, U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029, U+202F, U+205F,
// U+3000), which is what Oniguruma and llama.cpp use (PCRE2 10.42's `\s` under UCP omits U+0085).
//
// The families (tokenizer.ggml.pre names) and their regexes are llama.cpp's (src/llama-vocab.cpp, llm_tokenizer_bpe);
// where llama.cpp rewrote a tokenizer.json regex for std::regex, the original tokenizer.json regex is used, since PCRE2
// runs it as written.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace rkv {

/// A byte-level BPE pre-tokenizer family as named by GGUF `tokenizer.ggml.pre`.
struct PreTokenizerFamily {
  std::string name;                  ///< the canonical name (the first of `aliases`)
  std::vector<std::string> aliases;  ///< every tokenizer.ggml.pre value that selects this family
  std::vector<std::string> regexes;  ///< applied in order (see the file comment)
  bool ignore_merges = false;        ///< a piece that is itself a vocabulary token is emitted whole (HF ignore_merges)
  bool add_bos = false;              ///< the family's default for prepending BOS (GGUF add_bos_token overrides it)
};

/// The family whose aliases include `gguf_pre` (exact, case-sensitive), or nullptr.
const PreTokenizerFamily* find_pre_tokenizer_family(std::string_view gguf_pre);

/// Every supported family, in a fixed order (for error messages and docs).
const std::vector<PreTokenizerFamily>& pre_tokenizer_families();

/// llama.cpp pre-tokenizer names this implementation does not support (they need custom code there), for messages.
const std::vector<std::string>& unsupported_pre_tokenizer_names();

/// A compiled list of regexes. Immutable after construction; split() may be called from many threads at once.
class PreTokenizer {
 public:
  /// Compiles `regexes` (PCRE2 syntax, UTF-8). `name` is only used in messages. Throws rkv::InputError naming the
  /// regex and PCRE2's message when one does not compile.
  PreTokenizer(std::string name, std::vector<std::string> regexes);
  ~PreTokenizer();
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;

  /// Cuts `text` into pieces (views into `text`, in order, non-empty, concatenating to `text`). `text` should be
  /// valid UTF-8 (callers replace invalid bytes first); invalid sequences never match a regex and end up inside the
  /// stretches between matches. Throws std::runtime_error only if PCRE2 itself fails (e.g. its match limit), and
  /// rkv::Cancelled when the thread's CancelScope (core/cancel.hpp) is cancelled meanwhile.
  std::vector<std::string_view> split(std::string_view text) const;

  const std::string& name() const { return name_; }
  const std::vector<std::string>& regexes() const { return regexes_; }

 private:
  struct Compiled;
  std::string name_;
  std::vector<std::string> regexes_;
  std::vector<std::unique_ptr<Compiled>> compiled_;
};

/// Rewrites `\s` / `\S` in a PCRE2 pattern to explicit classes of the Unicode White_Space property (see the file
/// comment). Exposed for tests.
std::string rewrite_whitespace_classes(std::string_view pattern);

}  // namespace rkv
