// RULER's needle-in-a-haystack generator (NVIDIA/RULER scripts/data/synthetic/niah.py; eval/ruler_text.hpp).
#include <algorithm>
#include <cmath>

#include "core/errors.hpp"
#include "eval/ruler_families.hpp"

namespace rkv {

namespace {
const char* kNoise = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";

/// np.round(np.linspace(0, 100, num=40)): insertion depths in percent (no value is a tie for rounding).
double depth_percent(int64_t i) { return std::round(100.0 * static_cast<double>(i) / 39.0); }

std::string plural(RulerItem t) { return t == RulerItem::Words ? "words" : t == RulerItem::Numbers ? "numbers" : "uuids"; }

/// A number, a uuid, or an adjective-noun word key (RULER: random.choice of the sorted adjective-noun pairs, which is
/// an adjective and a noun drawn uniformly when no two pairs spell the same; the evaluation text's pools are its
/// vocabulary twice).
std::string random_item(RulerRng& rng, RulerItem t, const RulerSources& src) {
  if (t == RulerItem::Numbers) return ruler_random_number(rng, 7);
  if (t == RulerItem::Uuids) return ruler_uuid(rng);
  if (src.key_adjectives.empty() || src.key_nouns.empty())
    throw InputError("ruler: the word pool has no words for needle keys");
  const std::string& a =
      src.key_adjectives[static_cast<size_t>(ruler_uniform(rng, 0, static_cast<int64_t>(src.key_adjectives.size()) - 1))];
  return a + "-" + src.key_nouns[static_cast<size_t>(ruler_uniform(rng, 0, static_cast<int64_t>(src.key_nouns.size()) - 1))];
}

std::string needle_sentence(const std::string& type_plural, const std::string& key, const std::string& value) {
  return "One of the special magic " + type_plural + " for " + key + " is: " + value + ".";
}

/// `size` essay words from the first (RULER: repeated when `size` is larger) or from a seeded start (wrapping), cut into
/// sentences, with the needles inserted at sampled depths.
std::string essay_context(RulerRng& rng, int64_t size, const std::vector<std::string>& needles,
                          const RulerSources& src) {
  const std::vector<std::string>& essay = src.essay_words;
  if (essay.empty()) throw InputError("ruler: the essay haystack has no words");
  const int64_t n = static_cast<int64_t>(essay.size());
  const int64_t start = src.essay_from_start ? 0 : ruler_uniform(rng, 0, n - 1);
  std::vector<std::string> words;
  for (int64_t i = 0; i < size; ++i) words.push_back(essay[static_cast<size_t>((start + i) % n)]);
  const std::vector<std::string> sents = ruler_sentences(words);
  const double n_sents = static_cast<double>(sents.size());
  std::vector<int64_t> at = {0};
  for (int64_t d : ruler_sample(rng, 40, static_cast<int64_t>(needles.size())))
    at.push_back(static_cast<int64_t>(n_sents * (depth_percent(d) / 100.0)));
  std::sort(at.begin() + 1, at.end());
  at.push_back(static_cast<int64_t>(sents.size()));
  std::string context;
  for (size_t i = 1; i < at.size(); ++i) {  // " ".join of the pieces, empty pieces included (as the reference)
    std::string piece;
    for (int64_t j = at[i - 1]; j < at[i]; ++j) piece += (j > at[i - 1] ? " " : "") + sents[static_cast<size_t>(j)];
    context += (i > 1 ? " " : "") + piece;
    if (i - 1 < needles.size()) context += " " + needles[i - 1];
  }
  return context;
}

/// `sentences` with the needles inserted at sampled indexes (largest first), joined by newlines.
std::string list_context(RulerRng& rng, std::vector<std::string> sentences, const std::vector<std::string>& needles) {
  std::vector<int64_t> at = ruler_sample(rng, static_cast<int64_t>(sentences.size()), static_cast<int64_t>(needles.size()));
  std::sort(at.rbegin(), at.rend());
  for (size_t i = 0; i < at.size(); ++i) sentences.insert(sentences.begin() + at[i], needles[i]);
  std::string context;
  for (size_t i = 0; i < sentences.size(); ++i) context += (i ? "\n" : "") + sentences[i];
  return context;
}
}  // namespace

RulerText ruler_niah_text(const RulerSubtask& s, int64_t size, uint64_t seed, const RulerSources& src) {
  RulerRng rng(seed);
  const int64_t num_keys = std::max(s.num_keys, s.num_queries);
  const std::string values_word = plural(s.value_type);
  std::vector<std::string> keys, needles;
  std::vector<std::vector<std::string>> values;
  for (int64_t k = 0; k < num_keys; ++k) {
    keys.push_back(random_item(rng, s.key_type, src));
    values.emplace_back();
    for (int64_t v = 0; v < s.num_values; ++v) {
      values.back().push_back(random_item(rng, s.value_type, src));
      needles.push_back(needle_sentence(values_word, keys.back(), values.back().back()));
    }
  }
  ruler_shuffle(rng, needles);
  std::string context;
  if (s.haystack == RulerHaystack::Essay) {
    context = essay_context(rng, size, needles, src);
  } else {
    std::vector<std::string> hay;
    for (int64_t i = 0; i < size; ++i)
      hay.push_back(s.haystack == RulerHaystack::Noise
                        ? std::string(kNoise)
                        : needle_sentence(values_word, random_item(rng, s.key_type, src),
                                          random_item(rng, s.value_type, src)));
    context = list_context(rng, std::move(hay), needles);
  }
  RulerText t;
  std::vector<std::string> queries;
  for (int64_t i : ruler_sample(rng, num_keys, s.num_queries)) {
    queries.push_back(keys[static_cast<size_t>(i)]);
    t.queries.push_back(keys[static_cast<size_t>(i)]);
    for (const auto& v : values[static_cast<size_t>(i)]) t.answers.push_back(v);
  }
  std::string query = queries.back();
  if (queries.size() > 1) {
    query.clear();
    for (size_t i = 0; i + 1 < queries.size(); ++i) query += (i ? ", " : "") + queries[i];
    query += ", and " + queries.back();
  }
  // constants.py's template; with one answer niah.py replaces Some -> A, are all -> is, are -> is, drops the "s".
  const bool one = s.num_queries * s.num_values == 1;
  const std::string v = one ? values_word.substr(0, values_word.size() - 1) : values_word;
  const std::string head = (one ? "A special magic " + v + " is" : "Some special magic " + v + " are") +
                           " hidden within the following text. Make sure to memorize it. I will quiz you about the " + v +
                           " afterwards.\n";
  const std::string question = std::string(one ? "\nWhat is the" : "\nWhat are all the") + " special magic " + v +
                               " for " + query + " mentioned in the provided text?";
  t.user = head + context + question;
  t.question_at = t.user.size() - question.size();
  t.answer_prefix = "The special magic " + v + " for " + query + " mentioned in the provided text " + (one ? "is" : "are");
  return t;
}

}  // namespace rkv
