// RULER's essays and word lists on disk (eval/ruler_assets.hpp).
#include "eval/ruler_assets.hpp"

#include <algorithm>
#include <filesystem>

#include "core/atomic_file.hpp"
#include "core/errors.hpp"
#include "core/sha256.hpp"

namespace rkv {

namespace fs = std::filesystem;

namespace {
const char* kFetchHint = "; run scripts/fetch-assets (it puts RULER's essays and word lists in the asset cache)";

std::string sha256_of(const std::string& s) { return sha256_hex(s.data(), s.size()); }
}  // namespace

std::string ruler_essays_dir(const std::string& cache_dir) {
  return (fs::path(cache_dir) / "ruler" / "paul_graham_essays").string();
}

std::string ruler_wonderwords_dir(const std::string& cache_dir) {
  return (fs::path(cache_dir) / "ruler" / "wonderwords").string();
}

RulerEssayTexts read_ruler_essays(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw InputError("ruler: the Paul Graham essays folder " + dir + " does not exist" + kFetchHint);
  RulerEssayTexts e;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".txt") == 0) e.files.push_back(name);
  }
  if (ec) throw InputError("ruler: cannot list the essays folder " + dir + ": " + ec.message() + kFetchHint);
  if (e.files.empty()) throw InputError("ruler: the essays folder " + dir + " holds no .txt file" + kFetchHint);
  std::sort(e.files.begin(), e.files.end());  // byte order, as Python's sorted(glob(...))
  for (const std::string& name : e.files) {
    const std::string path = (fs::path(dir) / name).string();
    try {
      e.text += read_file(path);
    } catch (const InputError& err) {
      throw InputError(std::string(err.what()) + kFetchHint);
    }
  }
  e.sha256 = sha256_of(e.text);
  return e;
}

std::vector<std::string> ruler_word_list(const std::string& text) {
  std::vector<std::string> words;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    size_t e = end;
    while (e > at && (text[e - 1] == ' ' || text[e - 1] == '\t' || text[e - 1] == '\r' || text[e - 1] == '\f' ||
                      text[e - 1] == '\v'))
      --e;
    words.push_back(text.substr(at, e - at));
    at = end + 1;
  }
  return words;
}

RulerWordLists read_ruler_word_lists(const std::string& dir) {
  RulerWordLists w;
  std::string all;
  const std::pair<const char*, std::vector<std::string>*> lists[] = {
      {"nounlist.txt", &w.nouns}, {"adjectivelist.txt", &w.adjectives}, {"verblist.txt", &w.verbs}};
  for (const auto& [name, out] : lists) {
    const std::string path = (fs::path(dir) / name).string();
    std::error_code ec;
    if (!fs::exists(path, ec)) throw InputError("ruler: the word list " + path + " does not exist" + kFetchHint);
    std::string text;
    try {
      text = read_file(path);
    } catch (const InputError& err) {
      throw InputError(std::string(err.what()) + kFetchHint);
    }
    *out = ruler_word_list(text);
    if (out->empty()) throw InputError("ruler: the word list " + path + " holds no word" + kFetchHint);
    all += text;
  }
  w.sha256 = sha256_of(all);
  return w;
}

}  // namespace rkv
