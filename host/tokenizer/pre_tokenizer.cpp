// Pre-tokenizer regexes by family and their PCRE2 matcher (see pre_tokenizer.hpp).
#include "tokenizer/pre_tokenizer.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stdexcept>

#include "core/cancel.hpp"
#include "core/errors.hpp"
#include "tokenizer/utf8.hpp"

namespace rkv {

// ---- The families ---------------------------------------------------------------------------------------------------
// Regex texts from llama.cpp src/llama-vocab.cpp (llm_tokenizer_bpe), which records the tokenizer.json original of each
// adapted regex; the originals are used here. Written as raw strings: PCRE2 reads the escapes.
namespace {

const char* const kGpt2 = R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))re";

const char* const kLlama3 =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

const char* const kQwen2 =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

const char* const kGpt4o =
    R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

const char* const kDeepseekV3Main =
    R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

const char* const kCjkKana = R"re([一-龥぀-ゟ゠-ヿ]+)re";
const char* const kCjkHangul = R"re([一-龥ࠀ-一가-퟿]+)re";

std::vector<PreTokenizerFamily> make_families() {
  std::vector<PreTokenizerFamily> f;
  auto add = [&](std::vector<std::string> aliases, std::vector<std::string> regexes, bool ignore_merges = false,
                 bool add_bos = false) {
    PreTokenizerFamily fam;
    fam.name = aliases.front();
    fam.aliases = std::move(aliases);
    fam.regexes = std::move(regexes);
    fam.ignore_merges = ignore_merges;
    fam.add_bos = add_bos;
    f.push_back(std::move(fam));
  };
  add({"default"}, {R"re([\p{P}\$\+<=>\^~\|]+)re", kGpt2, R"re(\p{N}+)re", R"re([0-9][0-9][0-9])re"});
  add({"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum",
       "modern-bert", "jina-v1-en", "jina-v2-code", "roberta-bpe", "mpt", "olmo", "jais", "trillion", "granite-docling",
       "exaone4"},
      {kGpt2});
  add({"starcoder", "smollm", "refact", "command-r", "codeshell", "exaone", "minerva-7b", "mellum2"},
      {R"re(\p{N})re", kGpt2});
  add({"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano"},
      {kLlama3}, /*ignore_merges=*/true, /*add_bos=*/true);
  add({"dbrx", "smaug-bpe"}, {kLlama3});
  add({"chatglm-bpe", "glm4"}, {kLlama3});
  add({"jais-2"},
      {R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1})re"});
  add({"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez", "stablelm2", "hunyuan", "solar-open", "grok-2"},
      {kQwen2});
  add({"qwen35"},
      {R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"});
  // deepseek-llm's letter class: code points that Unicode normalization would fold (U+1F7D, U+1FBE, U+1FD3, U+1FDB,
  // U+2126, U+212A) are written as escapes so the source text cannot change them.
  add({"deepseek-llm"},
      {R"re([\r\n])re",
       R"re(\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-\x{1F7D}ᾀ-ᾴᾶ-ᾼ\x{1FBE}ῂ-ῄῆ-ῌῐ-\x{1FD3}ῖ-\x{1FDB}ῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤ\x{2126}ℨ\x{212A}-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+)re",
       R"re(\s?[!-/:-~！-／：-～‘-‟　-。]+)re", R"re(\s+$)re", kCjkHangul, R"re(\p{N}+)re"});
  add({"deepseek-coder"}, {R"re([\r\n])re", R"re(\s?\p{L}+)re", R"re(\s?\p{P}+)re", kCjkHangul, R"re(\p{N})re"});
  add({"deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4"}, {R"re(\p{N}{1,3})re", kCjkKana, kDeepseekV3Main});
  add({"spark2_5"},
      {R"re(\p{N}{1,3})re", kCjkKana,
       R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+|[\r\n]|\s+(?!\S)|\s+)re",
       R"re(\p{N})re"});
  add({"youtu"},
      {R"re([가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|[一-龥぀-ゟ゠-ヿ]+)re",
       R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"},
      /*ignore_merges=*/true);
  add({"falcon"}, {R"re([\p{P}\$\+<=>\^~\|`]+)re", kGpt2, R"re([0-9][0-9][0-9])re"});
  add({"poro-chat", "bloom", "gpt3-finnish"}, {R"re( ?[^(\s|.,!?…。，、।۔،)]+)re"});
  add({"viking"}, {R"re( ?[^(\s|.,!?…。，、।۔،)]+)re", R"re(\p{N})re"});
  add({"tekken"},
      {R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"},
      /*ignore_merges=*/true, /*add_bos=*/true);
  add({"chameleon"},
      {R"re(<sentinel:[0-9]+>)re", R"re((IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z)re", "([\\t\\n]|    |  )", R"re(\p{N})re",
       R"re([\p{P}!-/:-@\[-`{-~])re", kGpt2},
      /*ignore_merges=*/false, /*add_bos=*/true);
  add({"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"}, {kGpt4o});
  add({"granite-embed-multi-97m"},
      {R"re([^\r\n\p{L}\p{N}]?((?=[\p{L}\p{M}])([^a-z]))*((?=[\p{L}\p{M}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}\p{M}])([^a-z]))+((?=[\p{L}\p{M}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"},
      /*ignore_merges=*/true);
  add({"tiny_aya", "cohere2moe"}, {R"re(\d{1,3}(?=(?:\d{3})*\b))re", kGpt4o});
  add({"superbpe"}, {R"re(\p{N}+)re", R"re((?=(\d{3})+(?!\d)))re"});
  add({"bailingmoe", "bailingmoe2", "llada-moe"},
      {R"re('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)re"});
  add({"seed-coder"},
      {R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)re"});
  add({"ufakzeka"}, {R"re([^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"});
  add({"laguna"}, {R"re([^\n]+|[\n]+)re", kQwen2});
  add({"exaone-moe"},
      {R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+)re"});
  add({"minicpm5"},
      {R"re(\p{N}{1,3})re",
       R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"},
      /*ignore_merges=*/true);
  return f;
}

}  // namespace

const std::vector<PreTokenizerFamily>& pre_tokenizer_families() {
  static const std::vector<PreTokenizerFamily> families = make_families();
  return families;
}

const PreTokenizerFamily* find_pre_tokenizer_family(std::string_view gguf_pre) {
  for (const auto& fam : pre_tokenizer_families())
    for (const auto& alias : fam.aliases)
      if (alias == gguf_pre) return &fam;
  return nullptr;
}

const std::vector<std::string>& unsupported_pre_tokenizer_names() {
  static const std::vector<std::string> names = {"kimi-k2",    "afmoe",  "gemma4", "granite-embed-multi-311m",
                                                 "sarvam-moe", "whitespace"};
  return names;
}

// ---- \s rewriting ---------------------------------------------------------------------------------------------------

std::string rewrite_whitespace_classes(std::string_view pattern) {
  static const std::string ws =
      R"(\t\n\x{0B}\f\r\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";
  std::string out;
  out.reserve(pattern.size() + 64);
  bool in_class = false;
  std::size_t class_start = 0;  // index in `pattern` of the first member of the current class
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char n = pattern[i + 1];
      if (n == 's') {
        out += in_class ? ws : "[" + ws + "]";
      } else if (n == 'S' && !in_class) {
        out += "[^" + ws + "]";
      } else {
        out += c;
        out += n;
      }
      ++i;
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      class_start = i + 1;
      continue;
    }
    if (in_class && c == ']' && i != class_start) in_class = false;  // a ']' first in a class is a literal
    out += c;
  }
  return out;
}

// ---- PCRE2 matcher --------------------------------------------------------------------------------------------------

struct PreTokenizer::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() {
    if (code) pcre2_code_free(code);
  }
};

PreTokenizer::PreTokenizer(std::string name, std::vector<std::string> regexes)
    : name_(std::move(name)), regexes_(std::move(regexes)) {
  for (const auto& re : regexes_) {
    const std::string pattern = rewrite_whitespace_classes(re);
    int err = 0;
    PCRE2_SIZE err_off = 0;
    auto compiled = std::make_unique<Compiled>();
    compiled->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &err_off, nullptr);
    if (!compiled->code) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      throw InputError("pre-tokenizer '" + name_ + "': regex does not compile at offset " + std::to_string(err_off) +
                       " (" + reinterpret_cast<const char*>(msg) + "): " + re);
    }
    pcre2_jit_compile(compiled->code, PCRE2_JIT_COMPLETE);  // optional speed-up; the interpreter is the fallback
    compiled_.push_back(std::move(compiled));
  }
}

PreTokenizer::~PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;

namespace {

struct MatchData {
  pcre2_match_data* md;
  MatchData() : md(pcre2_match_data_create(1, nullptr)) {
    if (!md) throw std::bad_alloc();
  }
  ~MatchData() { pcre2_match_data_free(md); }
};

/// One match attempt; falls back from JIT to the interpreter when the JIT stack runs out.
int match_once(const pcre2_code* code, std::string_view subject, std::size_t start, uint32_t options, MatchData& m) {
  int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(subject.data()), subject.size(), start, options, m.md,
                       nullptr);
  if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
    rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(subject.data()), subject.size(), start, options | PCRE2_NO_JIT,
                     m.md, nullptr);
  return rc;
}

}  // namespace

std::vector<std::string_view> PreTokenizer::split(std::string_view text) const {
  struct Span {
    std::size_t off, len;
  };
  std::vector<Span> pieces, next;
  if (!text.empty()) pieces.push_back({0, text.size()});
  MatchData m;
  uint32_t polls = 0;
  for (std::size_t r = 0; r < compiled_.size(); ++r) {
    const pcre2_code* code = compiled_[r]->code;
    next.clear();
    for (const Span& piece : pieces) {
      const std::string_view subject = text.substr(piece.off, piece.len);
      std::size_t pos = 0, prev_end = 0;
      uint32_t options = 0;
      while (pos <= subject.size()) {
        if ((++polls & 4095) == 0) throw_if_cancelled();  // a run's Ctrl-C / SIGTERM (core/cancel.hpp)
        const int rc = match_once(code, subject, pos, options, m);
        if (rc == PCRE2_ERROR_NOMATCH) {
          if (options == 0) break;
          // The non-empty retry after an empty match failed: move on by one character and search again.
          pos += pos < subject.size() ? utf8::sequence_length(static_cast<unsigned char>(subject[pos])) : 1;
          options = 0;
          continue;
        }
        if (rc < 0) {
          PCRE2_UCHAR msg[256];
          pcre2_get_error_message(rc, msg, sizeof msg);
          throw std::runtime_error("pre-tokenizer '" + name_ + "': regex match failed (" +
                                   reinterpret_cast<const char*>(msg) + "): " + regexes_[r]);
        }
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(m.md);
        const std::size_t s = ov[0], e = ov[1];
        if (s > prev_end) next.push_back({piece.off + prev_end, s - prev_end});
        if (e > s) next.push_back({piece.off + s, e - s});
        prev_end = e;
        pos = e;
        options = e == s ? (PCRE2_NOTEMPTY_ATSTART | PCRE2_ANCHORED) : 0;
      }
      if (prev_end < subject.size()) next.push_back({piece.off + prev_end, subject.size() - prev_end});
    }
    pieces.swap(next);
  }
  std::vector<std::string_view> out;
  out.reserve(pieces.size());
  for (const Span& p : pieces) out.push_back(text.substr(p.off, p.len));
  return out;
}

}  // namespace rkv
