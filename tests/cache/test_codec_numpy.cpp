// The codecs against an independent numpy reference (tests/reference/make_codec_fixture.py, written from the
// formats' definitions): the same float32 cache, packed and unpacked through cache/packed_kv.hpp, gives numpy's
// dequantized key and value rows, and attention over it gives numpy's attention output.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cache/codec.hpp"
#include "cache/packed_kv.hpp"

namespace {

/// The fixture's inputs: x(i) = float32((((i * 2654435761 + seed) mod 2^32) mod 20001 - 10000) / 1000).
float hashed(uint64_t i, uint64_t seed) {
  const uint64_t u = ((i * 2654435761ull + seed) % (uint64_t{1} << 32)) % 20001ull;
  return static_cast<float>((static_cast<double>(u) - 10000.0) / 1000.0);
}

const nlohmann::json& fixture() {
  static const nlohmann::json j = [] {
    std::ifstream f(std::string(RKV_TEST_SOURCE_DIR) + "/tests/fixtures/codecs/codec_numpy.json");
    return nlohmann::json::parse(f);
  }();
  return j;
}

rkv::CodecSpec spec_of(const nlohmann::json& s) {
  rkv::CodecSpec spec;
  spec.format = rkv::parse_codec_format(s.at("format").get<std::string>(), "fixture");
  spec.bits = s.value("bits", 4);
  spec.group = s.value("group", 32);
  spec.symmetric = s.value("symmetric", false);
  spec.residual = s.value("residual", 0);
  return spec;
}

/// o[h] = softmax(q[h] K^T / sqrt(d)) V over every entry of KV head 0, in double.
std::vector<double> attention(const std::vector<float>& q, const rkv::LayerKV& kv, int64_t heads) {
  const int64_t d = kv.head_dim, T = kv.head_length(0);
  std::vector<double> o(static_cast<size_t>(heads * d), 0.0);
  for (int64_t h = 0; h < heads; ++h) {
    std::vector<double> s(static_cast<size_t>(T));
    double top = -1e300, sum = 0;
    for (int64_t t = 0; t < T; ++t) {
      double dot = 0;
      for (int64_t c = 0; c < d; ++c) dot += double(q[static_cast<size_t>(h * d + c)]) * kv.k_at(0, t)[c];
      s[static_cast<size_t>(t)] = dot / std::sqrt(double(d));
      top = std::max(top, s[static_cast<size_t>(t)]);
    }
    for (double& x : s) sum += (x = std::exp(x - top));
    for (int64_t t = 0; t < T; ++t)
      for (int64_t c = 0; c < d; ++c) o[static_cast<size_t>(h * d + c)] += s[static_cast<size_t>(t)] / sum * kv.v_at(0, t)[c];
  }
  return o;
}

TEST(CodecNumpy, DequantizedCacheAndAttentionMatchNumpy) {
  const nlohmann::json& fx = fixture();
  const int64_t T = fx.at("T"), d = fx.at("d"), H = fx.at("heads");
  rkv::LayerKV cache = rkv::build_exact_layer(1, d, T, {}, true);
  for (int64_t t = 0; t < T; ++t) {
    *cache.pos_at(0, t) = static_cast<int32_t>(t);
    for (int64_t c = 0; c < d; ++c) {
      cache.k_at(0, t)[c] = hashed(static_cast<uint64_t>(t * d + c), 1) + (c == 5 ? 40.0f : 0.0f);
      cache.v_at(0, t)[c] = hashed(static_cast<uint64_t>(t * d + c), 2);
    }
  }
  std::vector<float> q(static_cast<size_t>(H * d));
  for (size_t i = 0; i < q.size(); ++i) q[i] = hashed(i, 3) / 4.0f;
  // The float32 cache's attention first: the inputs are numpy's.
  const std::vector<double> o_f32 = attention(q, cache, H);
  for (int64_t i = 0; i < H * d; ++i)
    ASSERT_NEAR(o_f32[static_cast<size_t>(i)], fx.at("attention_f32_cache")[static_cast<size_t>(i / d)][static_cast<size_t>(i % d)].get<double>(), 1e-9);
  for (const auto& [name, c] : fx.at("codecs").items()) {
    SCOPED_TRACE(name);
    const rkv::CodecSpec spec = spec_of(c.at("spec"));
    ASSERT_EQ(spec.label(), name);
    rkv::check_codec(spec, d, name);
    rkv::LayerKV tail = cache;
    rkv::PackedLayer packed = rkv::build_packed_layer(spec, 1, d);
    rkv::pack_oldest(packed, tail);
    rkv::LayerKV out;
    rkv::unpack_layer(packed, tail, 0, out);
    ASSERT_EQ(out.head_length(0), T);
    const auto& sampled = fx.at("sampled");
    for (size_t r = 0; r < sampled.size(); ++r) {
      const int64_t t = sampled[r];
      for (int64_t ch = 0; ch < d; ++ch) {
        // Same float32 operations on both sides but for contraction into FMA: agree to a few ulps.
        const double k_np = c.at("keys")[r][static_cast<size_t>(ch)], v_np = c.at("values")[r][static_cast<size_t>(ch)];
        EXPECT_NEAR(out.k_at(0, t)[ch], k_np, 1e-5 * (1 + std::fabs(k_np))) << "key t " << t << " c " << ch;
        EXPECT_NEAR(out.v_at(0, t)[ch], v_np, 1e-5 * (1 + std::fabs(v_np))) << "value t " << t << " c " << ch;
      }
    }
    const std::vector<double> o = attention(q, out, H);
    for (int64_t i = 0; i < H * d; ++i)
      EXPECT_NEAR(o[static_cast<size_t>(i)], c.at("attention")[static_cast<size_t>(i / d)][static_cast<size_t>(i % d)].get<double>(), 1e-4)
          << "attention head " << i / d << " channel " << i % d;
  }
}

}  // namespace
