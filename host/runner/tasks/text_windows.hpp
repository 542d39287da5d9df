// Token windows drawn from plain-text files: the calibration examples of a sensitivity profile (prefix + window) and
// the runner's evaluation examples.
//
// Each file is tokenized on its own with the model's tokenizer (no BOS, special tokens not parsed: the text is text).
// A window never spans two files. Windows are non-overlapping and deterministic given the seed:
//   1. each file f of M_f tokens holds k_f = floor(M_f / length) slots of `length` tokens, laid on a grid that starts
//      at a seeded phase in [0, M_f - k_f * length];
//   2. the K = sum_f k_f slots (files in the given order) are cut into n strata [floor(j K / n), floor((j+1) K / n)),
//      and window j is a seeded uniform slot of stratum j, so the windows spread over all the text.
// Random numbers come from std::mt19937_64(seed) (its sequence is fixed by the C++ standard) reduced modulo the range,
// so the same files, tokenizer, n, length and seed give the same windows on every platform.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.hpp"

namespace rkv {

/// One file's token ids.
struct TokenizedFile {
  std::string path;
  std::vector<int32_t> tokens;
};

/// One window: `length` consecutive token ids of `file`, starting at token index `offset` of that file.
struct TextWindow {
  std::vector<int32_t> tokens;
  std::string file;
  int64_t offset = 0;
};

/// Reads and tokenizes each file (tok.encode(text, add_bos = false, parse_special = false)).
/// Throws rkv::InputError naming a file that cannot be read or is not a regular file (a FIFO, a device, a folder);
/// rkv::Cancelled when the thread's CancelScope (core/cancel.hpp) is cancelled while a file is read or encoded.
/// Thread-safe (the tokenizer is immutable).
std::vector<TokenizedFile> tokenize_files(const Tokenizer& tok, const std::vector<std::string>& files);

/// Draws n non-overlapping windows of `length` tokens from `files` as described at the top of this file, in stratum
/// order (increasing position in the concatenated text). Throws rkv::InputError when n < 1 or length < 1, or when the
/// files hold fewer than n whole windows (the message gives the token count of each file and what is needed).
std::vector<TextWindow> draw_windows(const std::vector<TokenizedFile>& files, int64_t n, int64_t length, uint64_t seed);

/// tokenize_files then draw_windows.
std::vector<TextWindow> draw_text_windows(const Tokenizer& tok, const std::vector<std::string>& files, int64_t n,
                                          int64_t length, uint64_t seed);

}  // namespace rkv
