// What a sliding-window layer holds (runner/compress/sliding_window.hpp): selection inside the window, worked by hand, and the
// window cut while decoding checked against the forward's own mask (a key older than the window has probability 0,
// so dropping it must leave the logits as they were) on a synthetic Gemma 3 model: window 16, layers 0 and 1 slide,
// layer 2 is global.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "backend/backend.hpp"
#include "core/errors.hpp"
#include "model/synthetic_model.hpp"
#include "runner/compress/compress_prompt.hpp"
#include "runner/compress/sliding_window.hpp"
#include "runner/decode/loop.hpp"

namespace {

using V = std::vector<int64_t>;

const rkv::Model& gemma_model() {
  static const rkv::Model m = rkv::synthetic_model(rkv::synthetic_config("gemma3", 4, 2, 8, 3), 5);
  return m;
}

std::vector<int32_t> ids(int64_t n, int64_t V) {
  std::vector<int32_t> t;
  for (int64_t i = 0; i < n; ++i) t.push_back(static_cast<int32_t>((i * 37 + 11) % V));
  return t;
}

// T = 10, a layer holding its last span = 4 positions [6, 10). Scores of one KV head: positions 0..5 score 9 (they
// would win without the window), then [1, 5, 3, 2]. Budget 2 with sinks 2 and recent 1: the sinks lie before the
// window (not held, not protected); recent protects position 9; the best other held position is 7 (score 5).
TEST(SlidingWindow, SelectionHappensInsideTheWindowWithoutSinks) {
  const std::vector<float> s = {9, 9, 9, 9, 9, 9, 1, 5, 3, 2};
  const rkv::Selection sel = rkv::select_in_window(s.data(), 1, 10, 4, 2, {2, 1}, 0);
  EXPECT_FALSE(sel.untouched);
  EXPECT_EQ(sel.prefix_tokens, 10);
  EXPECT_EQ(sel.positions, (V{7, 9}));
  // A budget of the whole span keeps [6, 10) and needs no scores.
  EXPECT_EQ(rkv::select_in_window(nullptr, 1, 10, 4, 4, {2, 1}, 0).positions, (V{6, 7, 8, 9}));
  // span = T is select_positions itself: the sinks 0 and 1 are kept.
  EXPECT_EQ(rkv::select_in_window(s.data(), 1, 10, 10, 3, {2, 1}, 0).positions, (V{0, 1, 9}));
  // Per head: head 0 keeps 1 (the recent 9), head 1 keeps 3 of [6, 10): 9, then 8 and 6 (scores 7, 6 over 1).
  const std::vector<float> s2 = {9, 9, 9, 9, 9, 9, 1, 5, 3, 2, 0, 0, 0, 0, 0, 0, 6, 1, 7, 0};
  const rkv::Selection ph = rkv::select_in_window_per_head(s2.data(), 2, 10, 4, {1, 3}, {2, 1}, 0);
  EXPECT_EQ(ph.positions, (V{9, 6, 8, 9}));
  EXPECT_THROW(rkv::select_in_window(s.data(), 1, 10, 11, 2, {}, 0), rkv::InputError);
}

// Decoding 24 tokens after a 40-token prompt token by token: the cut cache (sliding layers at 16 entries, the last
// ones) gives the logits of the cache that keeps everything and masks (the forward's sliding window).
TEST(SlidingWindow, DroppingEntriesOutsideTheWindowLeavesTheLogitsUnchanged) {
  const rkv::Model& m = gemma_model();
  ASSERT_TRUE(m.config.is_sliding(0) && m.config.is_sliding(1) && !m.config.is_sliding(2));
  ASSERT_EQ(m.config.sliding_window, 16);
  auto be = rkv::make_backend("cpu", m);
  const std::vector<int32_t> prompt = ids(40, m.config.vocab_size), more = ids(64, m.config.vocab_size);
  auto kept = be->prefill(prompt, {}).cache;
  auto cut = be->clone(*kept);
  EXPECT_EQ(rkv::drop_out_of_window(*be, *cut, 39), 2 * 2 * 24);  // 2 sliding layers x 2 KV heads x (40 - 16)
  EXPECT_EQ(cut->length(0), 16);
  EXPECT_EQ(cut->length(2), 40);
  EXPECT_EQ(be->layer_positions(*cut, 1).front(), 24);  // head 0's oldest entry: 39 - 24 = 15 < 16
  for (int64_t i = 0; i < 24; ++i) {
    const int64_t pos = 40 + i;
    const std::vector<float> want = be->extend(*kept, {more[static_cast<size_t>(i)]}, pos, rkv::LogitsFor::Last);
    const std::vector<float> got = rkv::extend_cache(*be, *cut, {more[static_cast<size_t>(i)]}, pos, rkv::LogitsFor::Last);
    ASSERT_EQ(got.size(), want.size());
    for (size_t v = 0; v < got.size(); ++v) ASSERT_NEAR(got[v], want[v], 1e-5f) << "token " << i << ", logit " << v;
    EXPECT_EQ(cut->length(0), 16) << i;
    EXPECT_EQ(cut->length(1), 16) << i;
    EXPECT_EQ(cut->length(2), pos + 1) << i;
  }
  EXPECT_LT(cut->bytes_in_use(), kept->bytes_in_use());
  // A global-only model is never cut.
  const rkv::Model llama = rkv::synthetic_model(rkv::synthetic_config("llama", 4, 2, 8, 2), 3);
  auto be2 = rkv::make_backend("cpu", llama);
  auto c2 = be2->prefill(ids(40, llama.config.vocab_size), {}).cache;
  EXPECT_EQ(rkv::drop_out_of_window(*be2, *c2, 39), 0);
  EXPECT_EQ(c2->length(0), 40);
}

}  // namespace
