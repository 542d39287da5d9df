// libFuzzer target: Tokenizer::encode / decode on arbitrary bytes, with real vocabularies.
//
// Vocabularies: the GGUF files listed in $RIPPLEKV_FUZZ_VOCABS (separated by ':'), loaded once; default: the
// SmolLM2 model of the asset cache, ${RIPPLEKV_CACHE:-~/.cache/ripplekv}/models/SmolLM2-135M-Instruct.Q4_1.gguf
// (byte-level BPE). scripts/fuzz.sh adds llama.cpp's SentencePiece vocabulary (ggml-vocab-llama-spm.gguf) from
// ../shared/tokenizer-vectors when it is there.
//
// Per vocabulary and input text t, checked (the properties tokenizer.hpp promises):
//  - encode(t, add_bos, parse_special) never throws, for all four flag combinations; every id is in [0, n_vocab);
//    with add_bos the first id is bos();
//  - decode and token_to_piece accept every id encode returned, with and without render_special;
//  - BPE (no user-defined tokens with strip flags): decode(encode(t, false, false)) == t with every byte that does not
//    start a well-formed UTF-8 sequence replaced by U+FFFD (a second implementation of that rule is below), and then
//    every byte whose byte-level character has no token removed (encode drops those bytes, as llama.cpp does; SmolLM2
//    lacks 21 of the 256). The removal is exact only when no token contains such a character; otherwise a text with
//    such bytes is only checked for not crashing;
//  - SPM with byte fallback: decode(encode(t, false, false)) == t when t contains no U+2581;
//  - decoding ids taken from the input bytes never fails inside [0, n_vocab) and throws InputError outside it.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "core/errors.hpp"
#include "fuzz_support.hpp"
#include "tokenizer/tokenizer.hpp"

namespace {

struct Vocab {
  std::string path;
  rkv::Tokenizer tok;
  bool bpe_round_trip = false;  // no user-defined tokens with strip flags
  bool missing[256] = {};       // BPE: the byte's byte-level character is not a token
  bool missing_in_tokens = false;  // BPE: some token contains a missing byte's character
  bool spm_round_trip = false;  // SPM with all 256 byte tokens
};

std::string default_vocabs() {
  if (const char* v = std::getenv("RIPPLEKV_FUZZ_VOCABS"); v && *v) return v;
  std::filesystem::path cache;
  if (const char* c = std::getenv("RIPPLEKV_CACHE"); c && *c) {
    cache = c;
  } else {
    const char* home = std::getenv("HOME");
    cache = std::filesystem::path(home ? home : "/root") / ".cache" / "ripplekv";
  }
  return (cache / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf").string();
}

/// GPT-2's byte-level alphabet (bytes_to_unicode in openai/gpt-2 encoder.py): the printable bytes '!'..'~',
/// 0xA1..0xAC and 0xAE..0xFF stand for themselves, the other 68 bytes for U+0100.. in byte order. UTF-8 of byte b's
/// character. Written independently of tokenizer/byte_level.cpp.
std::string byte_level_char(int b) {
  auto printable = [](int x) { return (x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF); };
  int cp = b;
  if (!printable(b)) {
    cp = 256;
    for (int x = 0; x < b; ++x) cp += printable(x) ? 0 : 1;
  }
  std::string out;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return out;
}

Vocab load_vocab(const std::string& path) {
  if (!std::filesystem::exists(path)) {
    std::fprintf(stderr,
                 "fuzz_tokenizer: vocabulary '%s' does not exist. Fetch the model with scripts/fetch-assets or set "
                 "RIPPLEKV_FUZZ_VOCABS to ':'-separated GGUF files with a vocabulary.\n",
                 path.c_str());
    std::exit(2);
  }
  Vocab v{path, rkv::Tokenizer::from_path(path)};
  if (v.tok.type() == rkv::VocabType::bpe) {
    v.bpe_round_trip = true;
    for (int32_t id = 0; id < v.tok.n_vocab(); ++id) {
      const uint32_t a = v.tok.token_attr(id);
      if ((a & rkv::kTokenUserDefined) && (a & (rkv::kTokenLstrip | rkv::kTokenRstrip))) v.bpe_round_trip = false;
    }
    std::vector<std::string> missing_chars;
    for (int b = 0; b < 256; ++b) {
      v.missing[b] = v.tok.token_id(byte_level_char(b)) < 0;
      if (v.missing[b]) missing_chars.push_back(byte_level_char(b));
    }
    for (int32_t id = 0; id < v.tok.n_vocab() && !missing_chars.empty(); ++id)
      for (const std::string& ch : missing_chars)
        if (v.tok.token_text(id).find(ch) != std::string::npos) v.missing_in_tokens = true;
  } else {
    v.spm_round_trip = true;
    char name[8];
    for (int b = 0; b < 256; ++b) {
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      if (v.tok.token_id(name) < 0) v.spm_round_trip = false;
    }
  }
  std::fprintf(stderr, "fuzz_tokenizer: %s (%s, %d tokens)\n", path.c_str(), v.tok.description().c_str(),
               v.tok.n_vocab());
  return v;
}

const std::vector<Vocab>& vocabs() {
  static const std::vector<Vocab> all = [] {
    std::vector<Vocab> out;
    std::stringstream ss(default_vocabs());
    for (std::string p; std::getline(ss, p, ':');)
      if (!p.empty()) out.push_back(load_vocab(p));
    return out;
  }();
  return all;
}

/// Reference for the BPE input rule (Unicode 3.9, table 3-7): each byte that does not start a well-formed UTF-8
/// sequence becomes U+FFFD and decoding resumes at the next byte. Written independently of tokenizer/utf8.cpp.
std::string replace_ill_formed(std::string_view s) {
  std::string out;
  size_t i = 0;
  auto in = [&](size_t k, unsigned lo, unsigned hi) {
    return k < s.size() && static_cast<unsigned char>(s[k]) >= lo && static_cast<unsigned char>(s[k]) <= hi;
  };
  while (i < s.size()) {
    const unsigned b = static_cast<unsigned char>(s[i]);
    size_t n = 0;
    if (b <= 0x7F) n = 1;
    else if (b >= 0xC2 && b <= 0xDF) n = in(i + 1, 0x80, 0xBF) ? 2 : 0;
    else if (b == 0xE0) n = in(i + 1, 0xA0, 0xBF) && in(i + 2, 0x80, 0xBF) ? 3 : 0;
    else if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) n = in(i + 1, 0x80, 0xBF) && in(i + 2, 0x80, 0xBF) ? 3 : 0;
    else if (b == 0xED) n = in(i + 1, 0x80, 0x9F) && in(i + 2, 0x80, 0xBF) ? 3 : 0;
    else if (b == 0xF0) n = in(i + 1, 0x90, 0xBF) && in(i + 2, 0x80, 0xBF) && in(i + 3, 0x80, 0xBF) ? 4 : 0;
    else if (b >= 0xF1 && b <= 0xF3) n = in(i + 1, 0x80, 0xBF) && in(i + 2, 0x80, 0xBF) && in(i + 3, 0x80, 0xBF) ? 4 : 0;
    else if (b == 0xF4) n = in(i + 1, 0x80, 0x8F) && in(i + 2, 0x80, 0xBF) && in(i + 3, 0x80, 0xBF) ? 4 : 0;
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      i += 1;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

std::string escaped(std::string_view s) {
  std::string out;
  char buf[8];
  for (unsigned char c : s.substr(0, 200)) {
    if (c >= 32 && c < 127 && c != '\\') {
      out += static_cast<char>(c);
    } else {
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    }
  }
  return s.size() > 200 ? out + "..." : out;
}

void check_vocab(const Vocab& v, std::string_view text, const uint8_t* data, size_t size) {
  const rkv::Tokenizer& tok = v.tok;
  for (bool special : {false, true}) {
    for (bool bos : {false, true}) {
      if (bos && tok.bos() < 0) continue;  // encode throws InputError by contract
      const std::vector<int32_t> ids = tok.encode(text, bos, special);
      for (int32_t id : ids)
        if (id < 0 || id >= tok.n_vocab()) rkv_fuzz::fuzz_fail(v.path + ": encode returned id " + std::to_string(id));
      if (bos && (ids.empty() || ids[0] != tok.bos())) rkv_fuzz::fuzz_fail(v.path + ": add_bos did not put BOS first");
      if (!bos && !special && text.empty() && !ids.empty()) rkv_fuzz::fuzz_fail(v.path + ": empty text gave tokens");
      for (bool render : {true, false}) {
        const std::string back = tok.decode(ids, render);
        if (!bos && !special && render) {
          std::string want;
          bool has_missing = false;
          for (char ch : replace_ill_formed(text)) {
            const bool gone = v.missing[static_cast<unsigned char>(ch)];
            has_missing = has_missing || gone;
            if (!gone) want += ch;
          }
          if (v.bpe_round_trip && !(has_missing && v.missing_in_tokens)) {
            if (back != want)
              rkv_fuzz::fuzz_fail(v.path + ": BPE round trip: text '" + escaped(text) + "' decodes as '" +
                                  escaped(back) + "', expected '" + escaped(want) + "'");
          }
          if (v.spm_round_trip && text.find("\xE2\x96\x81") == std::string_view::npos && back != text)
            rkv_fuzz::fuzz_fail(v.path + ": SPM round trip: text '" + escaped(text) + "' decodes as '" +
                                escaped(back) + "'");
        }
      }
      for (int32_t id : ids) tok.token_to_piece(id, special);
    }
  }
  // Ids from the input bytes (3 bytes each, little-endian, taken modulo 2 * n_vocab and shifted so that a quarter
  // fall outside the vocabulary on either side).
  const int64_t n = tok.n_vocab();
  std::vector<int32_t> ids;
  bool outside = false;
  for (size_t k = 0; k + 3 <= size && ids.size() < 256; k += 3) {
    const int64_t raw = data[k] | (data[k + 1] << 8) | (data[k + 2] << 16);
    const int64_t id = raw % (2 * n) - n / 2;
    outside = outside || id < 0 || id >= n;
    ids.push_back(static_cast<int32_t>(id));
  }
  for (bool render : {true, false}) {
    try {
      tok.decode(ids, render);
      if (outside) rkv_fuzz::fuzz_fail(v.path + ": decode accepted an id outside the vocabulary");
    } catch (const rkv::InputError&) {
      if (!outside) rkv_fuzz::fuzz_fail(v.path + ": decode rejected ids inside the vocabulary");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const Vocab& v : vocabs()) check_vocab(v, text, data, size);
  return 0;
}
