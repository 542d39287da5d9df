// Gemma 2's attention-score soft-cap (ModelConfig::attn_logit_softcap) on a case worked by hand: one query head and
// one KV head of dimension 2, scale 1, query q = (3, 0) over keys (1, 0), (-1, 0), (0, 0) and values (1, 0), (0, 1),
// (0, 0). The scores 3, -3, 0 become 2 tanh(s / 2) = 1.810296, -1.810296, 0 with the cap c = 2, so
//   p = exp(capped) / sum = (0.8400732, 0.0224861, 0.1374407)   (without the cap: (0.9503302, 0.0023556, 0.0473142)).
// Checked in the forward's attention (the decode path, the probability rows scorers' statistics are summed from) and
// in the held-entry window attention of decode-time scoring.
#include <gtest/gtest.h>

#include <deque>

#include "backend/cpu/attention.hpp"
#include "model/model.hpp"
#include "runner/compress/held_scoring.hpp"

namespace {

const std::vector<double> kCapped = {0.8400732282179042, 0.022486070978982628, 0.13744070080311313};
const std::vector<double> kPlain = {0.9503302116973793, 0.0023556330807966803, 0.04731415522182404};

rkv::ModelConfig one_head(float cap) {
  rkv::ModelConfig c;
  c.architecture = "gemma2";
  c.n_heads = c.n_kv_heads = 1;
  c.head_dim = 2;
  c.attn_scale = 1.0f;
  c.attn_logit_softcap = cap;
  return c;
}

rkv::LayerKV three_entries() {
  rkv::LayerKV kv;
  kv.n_kv_heads = 1;
  kv.head_dim = 2;
  kv.capacity = kv.length = 3;
  kv.k = {1, 0, -1, 0, 0, 0};
  kv.v = {1, 0, 0, 1, 0, 0};
  kv.pos = {0, 1, 2};
  return kv;
}

TEST(SoftcapAttention, TheForwardsProbabilitiesAndOutputUseTheCappedScores) {
  for (const float cap : {2.0f, 0.0f}) {
    const std::vector<double>& want = cap > 0 ? kCapped : kPlain;
    const rkv::ModelConfig c = one_head(cap);
    const rkv::LayerKV kv = three_entries();
    const std::vector<float> q = {3, 0};
    rkv::cpu::Workspace ws;
    std::vector<float> out(2);
    rkv::cpu::attention(c, q.data(), 1, kv, {}, out.data(), ws, nullptr);  // one row, no hook: the split decode path
    EXPECT_NEAR(out[0], want[0], 1e-6) << "cap " << cap;
    EXPECT_NEAR(out[1], want[1], 1e-6) << "cap " << cap;
    std::vector<float> probs;
    rkv::cpu::LayerHooks hooks;  // observed rows: the blocked path whose rows feed the statistics
    hooks.on_attention_probs = [&](int64_t, int64_t, const float* p, int64_t len) { probs.assign(p, p + len); };
    rkv::cpu::attention(c, q.data(), 1, kv, {}, out.data(), ws, &hooks);
    ASSERT_EQ(probs.size(), 3u);
    for (size_t j = 0; j < 3; ++j) EXPECT_NEAR(probs[j], want[j], 1e-6) << "cap " << cap << " entry " << j;
    EXPECT_NEAR(out[0], want[0], 1e-6);
  }
}

TEST(SoftcapAttention, HeldWindowAttentionUsesTheCappedScores) {
  const rkv::LayerKV kv = three_entries();
  const std::deque<rkv::HeldQuery> window = {{2, {3, 0}}};
  for (const float cap : {2.0f, 0.0f}) {
    const std::vector<float> w = rkv::held_window_attention(kv, window, 1, 1.0f, cap);
    const std::vector<double>& want = cap > 0 ? kCapped : kPlain;
    ASSERT_EQ(w.size(), 3u);
    for (size_t j = 0; j < 3; ++j) EXPECT_NEAR(w[j], want[j], 1e-6) << "cap " << cap << " entry " << j;
  }
}

}  // namespace
