#include "runner/tasks/text_windows.hpp"

#include <fstream>
#include <random>
#include <sstream>

#include "core/cancel.hpp"
#include "core/errors.hpp"
#include "core/regular_file.hpp"

namespace rkv {

std::vector<TokenizedFile> tokenize_files(const Tokenizer& tok, const std::vector<std::string>& files) {
  std::vector<TokenizedFile> out;
  out.reserve(files.size());
  for (const auto& path : files) {
    // Only a regular file: a FIFO would block and /dev/zero never end. Reading and encoding poll the thread's
    // CancelScope (core/cancel.hpp), so a run's Ctrl-C / SIGTERM stops a long text at once.
    const std::string text = read_regular_file(path, "text file");
    out.push_back(TokenizedFile{path, tok.encode(text, /*add_bos=*/false, /*parse_special=*/false)});
  }
  return out;
}

std::vector<TextWindow> draw_windows(const std::vector<TokenizedFile>& files, int64_t n, int64_t length,
                                     uint64_t seed) {
  if (n < 1) throw InputError("draw_windows: need at least one window (got " + std::to_string(n) + ")");
  if (length < 1) throw InputError("draw_windows: window length must be >= 1 (got " + std::to_string(length) + ")");
  std::mt19937_64 rng(seed);
  // Slots of each file on a grid with a seeded phase.
  std::vector<int64_t> slots(files.size()), phase(files.size());
  int64_t total_slots = 0;
  for (size_t f = 0; f < files.size(); ++f) {
    const int64_t m = static_cast<int64_t>(files[f].tokens.size());
    slots[f] = m / length;
    const uint64_t spare = static_cast<uint64_t>(m - slots[f] * length);
    phase[f] = static_cast<int64_t>(rng() % (spare + 1));
    total_slots += slots[f];
  }
  if (total_slots < n) {
    std::ostringstream msg;
    msg << "the text files hold too few tokens for " << n << " non-overlapping windows of " << length
        << " tokens (only " << total_slots << " fit):";
    for (const auto& f : files) msg << " '" << f.path << "' has " << f.tokens.size() << " tokens;";
    msg << " add text files or lower the number of examples or the window length";
    throw InputError(msg.str());
  }
  std::vector<TextWindow> out;
  out.reserve(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) {
    const int64_t lo = j * total_slots / n, hi = (j + 1) * total_slots / n;  // hi > lo because total_slots >= n
    int64_t slot = lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo));
    size_t f = 0;
    while (slot >= slots[f]) slot -= slots[f++];
    TextWindow w;
    w.file = files[f].path;
    w.offset = phase[f] + slot * length;
    w.tokens.assign(files[f].tokens.begin() + w.offset, files[f].tokens.begin() + w.offset + length);
    out.push_back(std::move(w));
  }
  return out;
}

std::vector<TextWindow> draw_text_windows(const Tokenizer& tok, const std::vector<std::string>& files, int64_t n,
                                          int64_t length, uint64_t seed) {
  return draw_windows(tokenize_files(tok, files), n, length, seed);
}

}  // namespace rkv
