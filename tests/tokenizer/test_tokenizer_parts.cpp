// Unit tests of the tokenizer's parts with hand-worked expectations: UTF-8 handling, the GPT-2 byte map, the
// pre-tokenizer regex semantics, the BPE and SPM merge loops, special-token partition and strip flags, invalid UTF-8 and
// NUL bytes, decoding, end-of-generation ids.
#include <gtest/gtest.h>

#include "core/errors.hpp"
#include "tokenizer/bpe.hpp"
#include "tokenizer/byte_level.hpp"
#include "tokenizer/pre_tokenizer.hpp"
#include "tokenizer/spm.hpp"
#include "tokenizer/tokenizer.hpp"
#include "tokenizer/utf8.hpp"

namespace {

using Pieces = std::vector<std::string>;

Pieces split(const rkv::PreTokenizer& pre, std::string_view text) {
  Pieces out;
  for (auto p : pre.split(text)) out.emplace_back(p);
  return out;
}

rkv::PreTokenizer family(const std::string& name) {
  const rkv::PreTokenizerFamily* fam = rkv::find_pre_tokenizer_family(name);
  if (!fam) throw std::runtime_error("no family " + name);
  return rkv::PreTokenizer(name, fam->regexes);
}

// ---- UTF-8 -----------------------------------------------------------------------------------------------------------

TEST(Utf8, DecodesWellFormedSequences) {
  char32_t cp = 0;
  EXPECT_EQ(rkv::utf8::decode("A", 0, cp), 1u);
  EXPECT_EQ(cp, U'A');
  EXPECT_EQ(rkv::utf8::decode("\xC3\xA9", 0, cp), 2u);  // é U+00E9
  EXPECT_EQ(cp, 0xE9u);
  EXPECT_EQ(rkv::utf8::decode("\xE2\x82\xAC", 0, cp), 3u);  // € U+20AC
  EXPECT_EQ(cp, 0x20ACu);
  EXPECT_EQ(rkv::utf8::decode("\xF0\x9F\x98\x80", 0, cp), 4u);  // 😀 U+1F600
  EXPECT_EQ(cp, 0x1F600u);
}

TEST(Utf8, RejectsIllFormedSequences) {
  char32_t cp = 0;
  EXPECT_EQ(rkv::utf8::decode("\x80", 0, cp), 0u);              // lone continuation
  EXPECT_EQ(rkv::utf8::decode("\xC0\xAF", 0, cp), 0u);          // overlong '/'
  EXPECT_EQ(rkv::utf8::decode("\xED\xA0\x80", 0, cp), 0u);      // surrogate U+D800
  EXPECT_EQ(rkv::utf8::decode("\xF4\x90\x80\x80", 0, cp), 0u);  // U+110000
  EXPECT_EQ(rkv::utf8::decode("\xE2\x82", 0, cp), 0u);          // truncated
  EXPECT_EQ(rkv::utf8::decode("\xFF", 0, cp), 0u);
}

TEST(Utf8, SanitizeReplacesEachBadByteWithFFFD) {
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(rkv::utf8::sanitize("a\xFF" "b"), "a" + fffd + "b");
  EXPECT_EQ(rkv::utf8::sanitize("\xE2\x82"), fffd + fffd);  // two bytes, neither starts a valid sequence
  EXPECT_EQ(rkv::utf8::sanitize("\xC0\xAF"), fffd + fffd);
  EXPECT_EQ(rkv::utf8::sanitize(std::string("x\0y", 3)), std::string("x\0y", 3));  // NUL is valid
  EXPECT_EQ(rkv::utf8::sanitize("\xC3\xA9\xE2\x82\xAC"), "\xC3\xA9\xE2\x82\xAC");
}

TEST(Utf8, SequenceLengthFromLeadByte) {
  EXPECT_EQ(rkv::utf8::sequence_length(0x41), 1u);
  EXPECT_EQ(rkv::utf8::sequence_length(0x80), 1u);  // stray continuation: its own piece
  EXPECT_EQ(rkv::utf8::sequence_length(0xC3), 2u);
  EXPECT_EQ(rkv::utf8::sequence_length(0xE2), 3u);
  EXPECT_EQ(rkv::utf8::sequence_length(0xF0), 4u);
  EXPECT_EQ(rkv::utf8::sequence_length(0xFF), 4u);
}

// ---- GPT-2 byte map ---------------------------------------------------------------------------------------------------

TEST(ByteLevel, MapMatchesGpt2BytesToUnicode) {
  // Printable bytes map to themselves; the others count up from U+0100 in byte order: 0x00..0x20 -> U+0100..U+0120,
  // 0x7F..0xA0 -> U+0121..U+0142, 0xAD -> U+0143.
  EXPECT_EQ(rkv::byte_level::char_of_byte('A'), U'A');
  EXPECT_EQ(rkv::byte_level::char_of_byte(0x00), 0x100u);
  EXPECT_EQ(rkv::byte_level::char_of_byte(' '), 0x120u);   // 'Ġ'
  EXPECT_EQ(rkv::byte_level::char_of_byte('\n'), 0x10Au);  // 'Ċ'
  EXPECT_EQ(rkv::byte_level::char_of_byte(0x7F), 0x121u);
  EXPECT_EQ(rkv::byte_level::char_of_byte(0xA0), 0x142u);
  EXPECT_EQ(rkv::byte_level::char_of_byte(0xA1), 0xA1u);
  EXPECT_EQ(rkv::byte_level::char_of_byte(0xAD), 0x143u);
  EXPECT_EQ(rkv::byte_level::char_of_byte(0xFF), 0xFFu);
  EXPECT_EQ(rkv::byte_level::encode(" a\n"), "\xC4\xA0" "a" "\xC4\x8A");
}

TEST(ByteLevel, EveryByteRoundTrips) {
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  EXPECT_EQ(rkv::byte_level::decode(rkv::byte_level::encode(all)), all);
  EXPECT_EQ(rkv::byte_level::decode("\xE2\x82\xAC"), "\xE2\x82\xAC");  // U+20AC is not in the map: copied through
}

// ---- Pre-tokenizers ---------------------------------------------------------------------------------------------------

TEST(PreTokenizer, Gpt2Pieces) {
  // "  3": \s+(?!\S) takes one space (the second is followed by '3'); " 3" is ` ?\p{N}+`.
  EXPECT_EQ(split(family("gpt-2"), "Hello world's  3.14!\n"),
            (Pieces{"Hello", " world", "'s", " ", " 3", ".", "14", "!", "\n"}));
}

TEST(PreTokenizer, StarcoderIsolatesDigitsFirst) {
  EXPECT_EQ(split(family("smollm"), "ab 123"), (Pieces{"ab", " ", "1", "2", "3"}));
}

TEST(PreTokenizer, Llama3CaseInsensitiveContractionsAndDigitTriples) {
  EXPECT_EQ(split(family("llama-bpe"), "I'M 12345\r\n\n x"),
            (Pieces{"I", "'M", " ", "123", "45", "\r\n\n", " x"}));
}

TEST(PreTokenizer, Qwen2SingleDigits) {
  EXPECT_EQ(split(family("qwen2"), "x=42"), (Pieces{"x", "=", "4", "2"}));
}

TEST(PreTokenizer, EmptyMatchesCutThePiece) {
  // superbpe: \p{N}+ then the lookahead (?=(\d{3})+(?!\d)) matches empty at 1 and 4 -> groups of three from the right.
  EXPECT_EQ(split(family("superbpe"), "1234567"), (Pieces{"1", "234", "567"}));
}

TEST(PreTokenizer, WhitespaceIsUnicodeWhiteSpaceIncludingNel) {
  // U+0085 NEL is White_Space: "\x85\x85b" -> \s+(?!\S) takes one NEL, the second (before 'b') is left between matches.
  // With PCRE2 10.42's own \s (no NEL), [^\s\p{L}\p{N}]+ would take both NELs as one piece.
  EXPECT_EQ(split(family("gpt-2"), "a\xC2\x85\xC2\x85" "b"), (Pieces{"a", "\xC2\x85", "\xC2\x85", "b"}));
}

TEST(PreTokenizer, PiecesAlwaysConcatenateToTheInput) {
  const std::string text = "Ünïcödé   tëxt\t\t42\xE2\x80\xA8 x\xF0\x9F\xA6\x99.cpp  ";
  for (const auto& fam : rkv::pre_tokenizer_families()) {
    const rkv::PreTokenizer pre(fam.name, fam.regexes);
    std::string joined;
    for (auto p : pre.split(text)) {
      EXPECT_FALSE(p.empty()) << fam.name;
      joined += p;
    }
    EXPECT_EQ(joined, text) << fam.name;
  }
}

TEST(PreTokenizer, RewritesWhitespaceClasses) {
  const std::string ws =
      R"(\t\n\x{0B}\f\r\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";
  EXPECT_EQ(rkv::rewrite_whitespace_classes(R"(\s+(?!\S))"), "[" + ws + "]+(?![^" + ws + "])");
  EXPECT_EQ(rkv::rewrite_whitespace_classes(R"([^\s\p{L}])"), "[^" + ws + R"(\p{L}])");
  EXPECT_EQ(rkv::rewrite_whitespace_classes(R"(\\s)"), R"(\\s)");  // an escaped backslash, then a literal 's'
  EXPECT_EQ(rkv::rewrite_whitespace_classes(R"([]\s]x)"), "[]" + ws + "]x");  // ']' first in a class is literal
}

TEST(PreTokenizer, BadRegexIsAnInputError) {
  EXPECT_THROW(rkv::PreTokenizer("bad", {"(unclosed"}), rkv::InputError);
}

TEST(PreTokenizer, EveryFamilyCompiles) {
  for (const auto& fam : rkv::pre_tokenizer_families()) {
    EXPECT_NO_THROW(rkv::PreTokenizer(fam.name, fam.regexes)) << fam.name;
    EXPECT_EQ(rkv::find_pre_tokenizer_family(fam.name), &fam);
  }
  EXPECT_EQ(rkv::find_pre_tokenizer_family("no-such-family"), nullptr);
}

// ---- Merge loops ------------------------------------------------------------------------------------------------------

TEST(Bpe, LowestRankFirstAndStaleCandidatesSkipped) {
  // Ranks: ab=0, abc=1, bc=2. "abcbc": ab (r0) -> [ab c b c]; ab+c (r1) -> [abc b c]; the bc at 1 is stale; bc at 3.
  rkv::BpeRanks ranks;
  ranks.add("a", "b");
  ranks.add("ab", "c");
  ranks.add("b", "c");
  const auto out = rkv::bpe_merge("abcbc", ranks);
  EXPECT_EQ(Pieces(out.begin(), out.end()), (Pieces{"abc", "bc"}));
}

TEST(Bpe, EqualRanksMergeLeftmostFirst) {
  rkv::BpeRanks ranks;
  ranks.add("a", "a");
  const auto out = rkv::bpe_merge("aaa", ranks);
  EXPECT_EQ(Pieces(out.begin(), out.end()), (Pieces{"aa", "a"}));
}

TEST(Bpe, FirstRankOfADuplicatePairWins) {
  rkv::BpeRanks ranks;
  ranks.add("x", "y");
  ranks.add("y", "z");
  ranks.add("x", "y");  // ignored: keeps rank 0
  std::string scratch;
  EXPECT_EQ(ranks.find("x", "y", scratch), 0);
  EXPECT_EQ(ranks.find("y", "z", scratch), 1);
  EXPECT_EQ(ranks.find("z", "z", scratch), -1);
}

TEST(Spm, HighestScoreFirst) {
  // "abc": candidates ab (-1) and bc (-0.5); bc wins, then a+bc = abc (-2) if it exists.
  std::vector<std::string> texts = {"a", "b", "c", "ab", "bc", "abc"};
  std::vector<float> scores = {0, 0, 0, -1.0f, -0.5f, -2.0f};
  std::unordered_map<std::string_view, int32_t> ids;
  for (int32_t i = 0; i < 6; ++i) ids.emplace(texts[i], i);
  auto out = rkv::spm_merge("abc", ids, scores);
  EXPECT_EQ(Pieces(out.begin(), out.end()), (Pieces{"abc"}));
  ids.erase("abc");
  out = rkv::spm_merge("abc", ids, scores);
  EXPECT_EQ(Pieces(out.begin(), out.end()), (Pieces{"a", "bc"}));
}

// ---- A small byte-level vocabulary -------------------------------------------------------------------------------------

// Ids 0..255: the 256 byte characters (id == byte value); 256 "he", 257 "ll", 258 "hell", 259 "hello";
// 260 "<|s|>" control, 261 "<u>" user-defined, 262 "<r>" user-defined rstrip, 263 "<l>" user-defined lstrip,
// 264 "<|im_end|>" control, 265 "<|s|>x" control (longer than 260, which it starts with).
rkv::Tokenizer toy_bpe() {
  rkv::VocabData v;
  v.source = "toy";
  v.type = rkv::VocabType::bpe;
  v.pre_name = "gpt-2";
  v.pre_regexes = rkv::find_pre_tokenizer_family("gpt-2")->regexes;
  for (int b = 0; b < 256; ++b) v.tokens.push_back({rkv::byte_level::encode(std::string(1, static_cast<char>(b)))});
  for (const char* t : {"he", "ll", "hell", "hello"}) v.tokens.push_back({t});
  v.tokens.push_back({"<|s|>", 0, rkv::kTokenControl});
  v.tokens.push_back({"<u>", 0, rkv::kTokenUserDefined});
  v.tokens.push_back({"<r>", 0, rkv::kTokenUserDefined | rkv::kTokenRstrip});
  v.tokens.push_back({"<l>", 0, rkv::kTokenUserDefined | rkv::kTokenLstrip});
  v.tokens.push_back({"<|im_end|>", 0, rkv::kTokenControl});
  v.tokens.push_back({"<|s|>x", 0, rkv::kTokenControl});
  v.merges = {{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}};
  v.bos = 260;
  return rkv::Tokenizer::from_vocab(v);
}

using Ids = std::vector<int32_t>;

TEST(TokenizerBpe, MergesAndSpecialTokens) {
  const auto tok = toy_bpe();
  EXPECT_EQ(tok.encode("hello", false, false), (Ids{259}));
  EXPECT_EQ(tok.encode("hello", true, false), (Ids{260, 259}));
  EXPECT_EQ(tok.encode("hello<|s|>hello", false, true), (Ids{259, 260, 259}));
  // Not parsed: the gpt2 regex cuts "hello", "<|", "s", "|>", "hello"; no merges apply inside the middle pieces.
  EXPECT_EQ(tok.encode("hello<|s|>hello", false, false), (Ids{259, '<', '|', 's', '|', '>', 259}));
  // User-defined tokens are cut out even without parse_special.
  EXPECT_EQ(tok.encode("a<u>b", false, false), (Ids{'a', 261, 'b'}));
  // Longest special text first: "<|s|>x" (265) beats "<|s|>" (260).
  EXPECT_EQ(tok.encode("<|s|>x<|s|>", false, true), (Ids{265, 260}));
}

TEST(TokenizerBpe, StripFlagsDropAdjacentWhitespace) {
  const auto tok = toy_bpe();
  const int32_t sp = ' ';
  EXPECT_EQ(tok.encode("a <r>  b", false, false), (Ids{'a', sp, 262, 'b'}));   // rstrip eats the two spaces after
  EXPECT_EQ(tok.encode("a  <l> b", false, false), (Ids{'a', 263, sp, 'b'}));   // lstrip eats the two before
}

TEST(TokenizerBpe, InvalidUtf8BecomesReplacementCharacters) {
  const auto tok = toy_bpe();
  // 0xFF -> U+FFFD = EF BF BD -> three byte tokens (ids equal the byte values in this vocabulary).
  EXPECT_EQ(tok.encode("a\xFF", false, false), (Ids{'a', 0xEF, 0xBF, 0xBD}));
  EXPECT_EQ(tok.decode(tok.encode("a\xFF", false, false)), "a\xEF\xBF\xBD");
  // Every byte string encodes without failing.
  std::string all;
  for (int b = 255; b >= 0; --b) all += static_cast<char>(b);
  EXPECT_NO_THROW(tok.encode(all, true, true));
}

TEST(TokenizerBpe, NulBytesAreOrdinaryText) {
  const auto tok = toy_bpe();
  const std::string text("a\0b\0", 4);
  EXPECT_EQ(tok.encode(text, false, false), (Ids{'a', 0, 'b', 0}));
  EXPECT_EQ(tok.decode(tok.encode(text, false, false)), text);
}

TEST(TokenizerBpe, DecodeRendersOrSkipsSpecialTokens) {
  const auto tok = toy_bpe();
  EXPECT_EQ(tok.decode({260, 259, ' ', 261, 264}), "<|s|>hello <u><|im_end|>");
  EXPECT_EQ(tok.decode({260, 259, ' ', 261, 264}, /*render_special=*/false), "hello <u>");  // user-defined stays
  EXPECT_EQ(tok.token_to_piece(256), "he");
  EXPECT_THROW(tok.decode({-1}), rkv::InputError);
  EXPECT_THROW(tok.decode({266}), rkv::InputError);
  EXPECT_THROW(tok.token_text(100000), rkv::InputError);
}

TEST(TokenizerBpe, EndOfGenerationIdsFromText) {
  const auto tok = toy_bpe();
  // No eos id given; "<|im_end|>" is on llama.cpp's end-of-generation list and becomes eot.
  EXPECT_EQ(tok.end_of_generation_ids(), (Ids{264}));
  EXPECT_TRUE(tok.is_end_of_generation(264));
  EXPECT_FALSE(tok.is_end_of_generation(260));
  EXPECT_EQ(tok.eot(), 264);
  EXPECT_EQ(tok.eos(), -1);
}

TEST(TokenizerBpe, NoBosIsAnErrorOnlyWhenAsked) {
  rkv::VocabData v;
  v.source = "nobos";
  v.pre_regexes = rkv::find_pre_tokenizer_family("gpt-2")->regexes;
  for (int b = 0; b < 256; ++b) v.tokens.push_back({rkv::byte_level::encode(std::string(1, static_cast<char>(b)))});
  const auto tok = rkv::Tokenizer::from_vocab(v);
  EXPECT_EQ(tok.encode("ab", false, false), (Ids{'a', 'b'}));
  EXPECT_THROW(tok.encode("ab", true, false), rkv::InputError);
  EXPECT_FALSE(tok.add_bos_by_default());
}

TEST(TokenizerBpe, DuplicateTokensAreAnInputError) {
  rkv::VocabData v;
  v.source = "dup";
  v.pre_regexes = rkv::find_pre_tokenizer_family("gpt-2")->regexes;
  v.tokens = {{"a"}, {"b"}, {"a"}};
  EXPECT_THROW(rkv::Tokenizer::from_vocab(v), rkv::InputError);
}

// ---- A small SPM vocabulary ---------------------------------------------------------------------------------------------

// 0 <unk>, 1 <s>, 2 </s>, 3..258 <0x00>..<0xFF>, 259 "▁", 260 "h", 261 "i", 262 "▁h", 263 "▁hi", 264 "<ctl>" control.
rkv::Tokenizer toy_spm() {
  rkv::VocabData v;
  v.source = "toy-spm";
  v.type = rkv::VocabType::spm;
  v.tokens.push_back({"<unk>", 0, rkv::kTokenUnknown});
  v.tokens.push_back({"<s>", 0, rkv::kTokenControl});
  v.tokens.push_back({"</s>", 0, rkv::kTokenControl});
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    v.tokens.push_back({name, 0, rkv::kTokenByte});
  }
  v.tokens.push_back({"\xE2\x96\x81", -1.0f});
  v.tokens.push_back({"h", -2.0f});
  v.tokens.push_back({"i", -2.0f});
  v.tokens.push_back({"\xE2\x96\x81h", -3.0f});
  v.tokens.push_back({"\xE2\x96\x81hi", -4.0f});
  v.tokens.push_back({"<ctl>", 0, rkv::kTokenControl});
  v.bos = 1;
  v.eos = 2;
  v.unk = 0;
  v.add_bos = true;
  v.add_space_prefix = true;
  return rkv::Tokenizer::from_vocab(v);
}

TEST(TokenizerSpm, LeadingSpaceAndByteFallback) {
  const auto tok = toy_spm();
  EXPECT_EQ(tok.encode("hi", false, false), (Ids{263}));          // "▁hi"
  EXPECT_EQ(tok.encode("hi", true, false), (Ids{1, 263}));
  // 'x' is not in the vocabulary: byte fallback <0x78> = id 3 + 0x78.
  EXPECT_EQ(tok.encode("hix", false, false), (Ids{263, 3 + 'x'}));
  // After a special token the next stretch gets the space prefix again (llama.cpp is_prev_special).
  EXPECT_EQ(tok.encode("hi<ctl>hi", false, true), (Ids{263, 264, 263}));
  EXPECT_EQ(tok.decode({263, 264, 263}), "hi<ctl> hi");  // only the first token loses its leading space
  EXPECT_TRUE(tok.add_bos_by_default());
}

TEST(TokenizerSpm, InvalidUtf8IsKeptByteExact) {
  const auto tok = toy_spm();
  const std::string text = "hi\xFF\xE2\x82";
  const auto ids = tok.encode(text, false, false);
  EXPECT_EQ(ids, (Ids{263, 3 + 0xFF, 3 + 0xE2, 3 + 0x82}));
  EXPECT_EQ(tok.decode(ids), text);
  // 0xFF would start a 4-byte sequence by its high bits; it stands alone, so the escaped space after it survives.
  EXPECT_EQ(tok.encode("hi\xFF hi", false, false), (Ids{263, 3 + 0xFF, 263}));
  EXPECT_EQ(tok.decode(tok.encode("hi\xFF hi", false, false)), "hi\xFF hi");
  const std::string nul("h\0i", 3);
  EXPECT_EQ(tok.decode(tok.encode(nul, false, false)), nul);
}

TEST(TokenizerSpm, EndOfGenerationIncludesEos) {
  const auto tok = toy_spm();
  EXPECT_EQ(tok.end_of_generation_ids(), (Ids{2}));  // "</s>" is eos and on the text list
}

}  // namespace
