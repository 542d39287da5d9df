// Tokenizer core: special-token partition, BPE/SPM encoding of the stretches between, decoding (see tokenizer.hpp).
#include "tokenizer/tokenizer.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <optional>
#include <unordered_map>

#include "core/cancel.hpp"
#include "core/errors.hpp"
#include "tokenizer/bpe.hpp"
#include "tokenizer/byte_level.hpp"
#include "tokenizer/pre_tokenizer.hpp"
#include "tokenizer/spm.hpp"
#include "tokenizer/utf8.hpp"

namespace rkv {

namespace {

const std::string kSpace = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK, SentencePiece's space

std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size());
  std::size_t pos = 0;
  for (std::size_t hit; (hit = s.find(from, pos)) != std::string_view::npos; pos = hit + from.size())
    out.append(s.substr(pos, hit - pos)).append(to);
  out.append(s.substr(pos));
  return out;
}

/// The byte of an SPM byte token "<0xXX>", or -1 when `text` does not have that form.
int parse_byte_token(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
  int value = 0;
  for (char c : text.substr(3, 2)) {
    value <<= 4;
    if (c >= '0' && c <= '9') value |= c - '0';
    else if (c >= 'A' && c <= 'F') value |= c - 'A' + 10;
    else if (c >= 'a' && c <= 'f') value |= c - 'a' + 10;
    else return -1;
  }
  return value;
}

bool is_c_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

}  // namespace

struct Tokenizer::Impl {
  VocabData v;
  std::vector<int32_t> eog;                         // sorted
  std::unordered_map<std::string_view, int32_t> ids;  // views into v.tokens[i].text (never modified after build)
  std::vector<float> scores;                        // SPM
  BpeRanks ranks;                                   // BPE
  std::optional<PreTokenizer> pre;                  // BPE
  std::vector<int32_t> specials;                    // control/user-defined/unknown ids, longest text first
  std::vector<std::string> pieces;                  // decoded text of each token (special ones rendered)
  std::array<int32_t, 256> byte_token{};            // SPM byte fallback id per byte, -1 when none

  int32_t find(std::string_view text) const {
    const auto it = ids.find(text);
    return it == ids.end() ? -1 : it->second;
  }

  void check_id(int32_t id) const {
    if (id < 0 || id >= static_cast<int32_t>(v.tokens.size()))
      throw InputError("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                       std::to_string(v.tokens.size()) + ")");
  }

  /// One stretch of the input: a special token, or bytes [off, off + len) of the text.
  struct Fragment {
    int32_t token;  // -1 for raw text
    std::size_t off, len;
  };

  std::vector<Fragment> partition(std::string_view text, bool parse_special) const {
    std::vector<Fragment> frags, next;
    if (!text.empty()) frags.push_back({-1, 0, text.size()});
    for (int32_t id : specials) {
      const VocabToken& tok = v.tokens[id];
      if (!parse_special && (tok.attr & (kTokenControl | kTokenUnknown))) continue;
      const std::string_view needle = tok.text;
      next.clear();
      for (const Fragment& f : frags) {
        if (f.token >= 0) {
          next.push_back(f);
          continue;
        }
        std::size_t base = f.off;
        const std::size_t end = f.off + f.len;
        const std::string_view window = text.substr(0, end);
        while (base < end) {
          const std::size_t hit = window.find(needle, base);
          if (hit == std::string_view::npos) {
            next.push_back({-1, base, end - base});
            break;
          }
          std::size_t left_end = hit;
          if (tok.attr & kTokenLstrip)
            while (left_end > base && is_c_space(text[left_end - 1])) --left_end;
          if (left_end > base) next.push_back({-1, base, left_end - base});
          next.push_back({id, hit, needle.size()});
          base = hit + needle.size();
          if (tok.attr & kTokenRstrip)
            while (base < end && is_c_space(text[base])) ++base;
        }
      }
      frags.swap(next);
    }
    return frags;
  }

  void encode_bpe(std::string_view raw, std::vector<int32_t>& out) const {
    const std::string text = utf8::sanitize(raw);
    uint32_t polls = 0;
    for (std::string_view piece : pre->split(text)) {
      if ((++polls & 1023) == 0) throw_if_cancelled();  // a run's Ctrl-C / SIGTERM (core/cancel.hpp)
      const std::string word = byte_level::encode(piece);
      if (v.ignore_merges) {
        const int32_t whole = find(word);
        if (whole >= 0) {
          out.push_back(whole);
          continue;
        }
      }
      for (std::string_view sym : bpe_merge(word, ranks)) {
        const int32_t id = find(sym);
        if (id >= 0) {
          out.push_back(id);
          continue;
        }
        // Not in the vocabulary (only with incomplete vocabularies, e.g. SmolLM2 has no token for the bytes 0x04,
        // 0x16, 0xF1, ...): each single byte of the symbol that is a token on its own is emitted, the rest is
        // dropped, never <unk> (llama.cpp llm_tokenizer_bpe_session::tokenize; found by fuzz/fuzz_tokenizer.cpp:
        // "a\x16b" gave [a, <unk>, b] where llama.cpp gives [a, b]).
        for (char byte : sym) {
          const int32_t c = find(std::string_view(&byte, 1));
          if (c >= 0) out.push_back(c);
        }
      }
    }
  }

  void encode_spm(std::string_view raw, bool prefix_space, std::vector<int32_t>& out) const {
    std::string text;
    if (prefix_space) text = " ";
    text.append(raw);
    text = replace_all(text, " ", kSpace);
    for (std::string_view sym : spm_merge(text, ids, scores)) {
      const int32_t id = find(sym);
      if (id >= 0) {
        out.push_back(id);
        continue;
      }
      for (char c : sym) {  // byte fallback
        const int32_t b = byte_token[static_cast<unsigned char>(c)];
        if (b >= 0) out.push_back(b);
        else if (v.unk >= 0) out.push_back(v.unk);
      }
    }
  }

  std::string piece_of(int32_t id) const {
    const VocabToken& t = v.tokens[id];
    if (t.attr & (kTokenControl | kTokenUnknown | kTokenUserDefined)) return t.text;
    if (t.attr & kTokenNormal)
      return v.type == VocabType::bpe ? byte_level::decode(t.text) : replace_all(t.text, kSpace, " ");
    if (t.attr & kTokenByte) {
      const int b = parse_byte_token(t.text);
      if (b >= 0) return std::string(1, static_cast<char>(b));
      return t.text;
    }
    return {};  // unused or undefined tokens decode to nothing (llama.cpp token_to_piece)
  }
};

Tokenizer Tokenizer::from_vocab(VocabData data) {
  auto impl = std::make_shared<Impl>();
  impl->eog = finalize_vocab(data);
  impl->v = std::move(data);
  Impl& m = *impl;
  const auto n = static_cast<int32_t>(m.v.tokens.size());
  if (n == 0) throw InputError(m.v.source + ": the vocabulary is empty");

  if (m.v.type == VocabType::bpe) {
    for (std::size_t r = 0; r < m.v.merges.size(); ++r) {
      const auto& [left, right] = m.v.merges[r];
      if (left.empty() || right.empty())
        throw InputError(m.v.source + ": merge " + std::to_string(r) + " has an empty half");
      m.ranks.add(left, right);
    }
    // The ranks hold every merge now: the pairs go before the id map and pieces are built, so the three never peak
    // together (about 3 MB of a 49k-merge vocabulary's load).
    std::vector<std::pair<std::string, std::string>>().swap(m.v.merges);
    m.pre.emplace(m.v.pre_name, m.v.pre_regexes);
  }

  m.ids.reserve(m.v.tokens.size());
  for (int32_t i = 0; i < n; ++i) m.ids.emplace(m.v.tokens[i].text, i);

  if (m.v.type != VocabType::bpe) {
    m.scores.resize(m.v.tokens.size());
    for (int32_t i = 0; i < n; ++i) m.scores[i] = m.v.tokens[i].score;
    m.byte_token.fill(-1);
    for (int b = 0; b < 256; ++b) {
      static const char* hex = "0123456789ABCDEF";
      const char name[7] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>', 0};
      int32_t id = m.find(name);
      if (id < 0) id = m.find(std::string(1, static_cast<char>(b)));
      m.byte_token[b] = id;
    }
  }

  for (int32_t i = 0; i < n; ++i)
    if (m.v.tokens[i].attr & (kTokenControl | kTokenUserDefined | kTokenUnknown) && !m.v.tokens[i].text.empty())
      m.specials.push_back(i);
  std::stable_sort(m.specials.begin(), m.specials.end(), [&](int32_t a, int32_t b) {
    return m.v.tokens[a].text.size() > m.v.tokens[b].text.size();
  });

  m.pieces.resize(m.v.tokens.size());
  for (int32_t i = 0; i < n; ++i) m.pieces[i] = m.piece_of(i);
  return Tokenizer(std::move(impl));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos, bool parse_special) const {
  const Impl& m = *impl_;
  std::vector<int32_t> out;
  if (add_bos) {
    if (m.v.bos < 0) throw InputError(m.v.source + ": BOS requested but the vocabulary has no BOS token");
    out.push_back(m.v.bos);
  }
  bool prev_special = true;  // SPM: the first stretch gets the space prefix
  for (const Impl::Fragment& f : m.partition(text, parse_special)) {
    if (f.token >= 0) {
      out.push_back(f.token);
      prev_special = true;
      continue;
    }
    const std::string_view raw = text.substr(f.off, f.len);
    if (m.v.type == VocabType::bpe) {
      m.encode_bpe(raw, out);
    } else {
      m.encode_spm(raw, m.v.add_space_prefix && prev_special, out);
    }
    prev_special = false;
  }
  return out;
}

std::string Tokenizer::token_to_piece(int32_t id, bool render_special) const {
  impl_->check_id(id);
  if (!render_special && (impl_->v.tokens[id].attr & (kTokenControl | kTokenUnknown))) return {};
  return impl_->pieces[id];
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool render_special) const {
  const Impl& m = *impl_;
  std::string out;
  for (std::size_t k = 0; k < ids.size(); ++k) {
    const int32_t id = ids[k];
    m.check_id(id);
    if (!render_special && (m.v.tokens[id].attr & (kTokenControl | kTokenUnknown))) continue;
    const std::string& piece = m.pieces[id];
    const bool strip = k == 0 && m.v.type == VocabType::spm && m.v.add_space_prefix && !piece.empty() && piece[0] == ' ';
    out.append(piece, strip ? 1 : 0, std::string::npos);
  }
  return out;
}

const std::string& Tokenizer::token_text(int32_t id) const {
  impl_->check_id(id);
  return impl_->v.tokens[id].text;
}

uint32_t Tokenizer::token_attr(int32_t id) const {
  impl_->check_id(id);
  return impl_->v.tokens[id].attr;
}

int32_t Tokenizer::token_id(std::string_view text) const { return impl_->find(text); }
int32_t Tokenizer::bos() const { return impl_->v.bos; }
int32_t Tokenizer::eos() const { return impl_->v.eos; }
int32_t Tokenizer::eot() const { return impl_->v.eot; }
int32_t Tokenizer::unk() const { return impl_->v.unk; }
bool Tokenizer::add_bos_by_default() const { return impl_->v.add_bos && impl_->v.bos >= 0; }
bool Tokenizer::is_end_of_generation(int32_t id) const {
  return std::binary_search(impl_->eog.begin(), impl_->eog.end(), id);
}
const std::vector<int32_t>& Tokenizer::end_of_generation_ids() const { return impl_->eog; }
int32_t Tokenizer::n_vocab() const { return static_cast<int32_t>(impl_->v.tokens.size()); }
VocabType Tokenizer::type() const { return impl_->v.type; }
std::string Tokenizer::description() const {
  return impl_->v.type == VocabType::bpe ? "bpe/" + impl_->v.pre_name : std::string("spm");
}
const std::string& Tokenizer::chat_template() const { return impl_->v.chat_template; }

}  // namespace rkv
