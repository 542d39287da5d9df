// Backend-ops tests: every CUDA kernel against the CPU backend's function (or a double-precision reference where the
// CPU backend has no standalone function) on the same inputs.
#include <cstring>
#include <limits>

#include "backend/cpu/blas.hpp"
#include "backend/cpu/ops.hpp"
#include "backend/cuda/compression.hpp"
#include "backend/cuda/device_cache.hpp"
#include "backend/cuda/gemm.hpp"
#include "backend/cuda/kernels/kernels.hpp"
#include "backend/cuda/kernels/perturb_row.hpp"
#include "cache/attention_stats.hpp"
#include "cache/codec.hpp"
#include "cache/compaction.hpp"
#include "cache/selection.hpp"
#include "core/errors.hpp"
#include "gpu_test.hpp"
#include "model/rope.hpp"

using namespace rkv_gpu_test;
using rc::kernels::DType;
using Lcg = rkv::SyntheticRng;

namespace {

class OpsTest : public GpuTest {
 protected:
  /// Device copy of `v` stored as `t`.
  rc::DeviceBuffer put(const std::vector<float>& v, DType t) {
    if (t == DType::F32) return rc::upload(*ctx, v);
    std::vector<uint16_t> h(v.size());
    for (size_t i = 0; i < v.size(); ++i) h[i] = rkv::fp32_to_bf16(v[i]);
    return rc::upload(*ctx, h);
  }
  /// `n` values of type `t` from device memory, as float.
  std::vector<float> get(const void* p, size_t n, DType t) {
    if (t == DType::F32) return rc::download<float>(*ctx, p, n);
    const std::vector<uint16_t> h = rc::download<uint16_t>(*ctx, p, n);
    std::vector<float> out(n);
    for (size_t i = 0; i < n; ++i) out[i] = rkv::bf16_to_fp32(h[i]);
    return out;
  }
  /// The values a kernel reading `t` storage sees.
  static std::vector<float> stored(const std::vector<float>& v, DType t) {
    if (t == DType::F32) return v;
    std::vector<float> o(v.size());
    for (size_t i = 0; i < v.size(); ++i) o[i] = bf16_round(v[i]);
    return o;
  }
  cudaStream_t s() const { return ctx->stream(); }
};

/// |got - want| <= abs_tol + rel_tol * |want| for every element; reports the first few failures.
void expect_close(const std::vector<float>& got, const std::vector<float>& want, double abs_tol, double rel_tol,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int failures = 0;
  for (size_t i = 0; i < got.size() && failures < 5; ++i) {
    const double d = std::fabs(static_cast<double>(got[i]) - static_cast<double>(want[i]));
    if (!(d <= abs_tol + rel_tol * std::fabs(static_cast<double>(want[i])))) {
      ADD_FAILURE() << what << " [" << i << "]: got " << got[i] << ", want " << want[i];
      ++failures;
    }
  }
}

const DType kBoth[] = {DType::F32, DType::BF16};
const char* name(DType t) { return t == DType::F32 ? "f32" : "bf16"; }

TEST_F(OpsTest, DequantizeKvEqualsTheHostCodecBitForBit) {
  // kernels::dequantize_kv on bytes the host codec packed (cache/codec.hpp) gives exactly rkv::decode_key_unit /
  // decode_value_row's floats (float32 storage), and those rounded to bfloat16 once (bf16 storage); every format
  // (f16 included),
  // keys and values, 64 entries of d = 64 with an outlier channel.
  const int64_t d = 64, n = 64;
  Lcg r(11);
  std::vector<float> x(static_cast<size_t>(n * d));
  for (size_t i = 0; i < x.size(); ++i) x[i] = 3.0f * r.next() + (i % d == 7 ? 25.0f : 0.0f);
  std::vector<rkv::CodecSpec> specs(7);
  specs[0].format = rkv::CodecFormat::integer;  // int4 asymmetric g32
  specs[1].format = rkv::CodecFormat::integer;
  specs[1].bits = 8;
  specs[1].symmetric = true;
  specs[2].format = rkv::CodecFormat::integer;
  specs[2].bits = 2;
  specs[2].group = 16;
  specs[3].format = rkv::CodecFormat::kivi;
  specs[3].bits = 2;
  specs[4].format = rkv::CodecFormat::q8_0;
  specs[5].format = rkv::CodecFormat::q4_0;
  specs[6].format = rkv::CodecFormat::f16;  // per-token precision's 16-bit class
  for (const rkv::CodecSpec& spec : specs)
    for (bool keys : {true, false}) {
      SCOPED_TRACE(spec.label() + (keys ? " keys" : " values"));
      const int64_t unit = keys ? rkv::codec_key_quantum(spec) : 1;
      const size_t ub = keys ? rkv::codec_key_unit_bytes(spec, d) : rkv::codec_value_row_bytes(spec, d);
      std::vector<uint8_t> packed(static_cast<size_t>(n / unit) * ub);
      std::vector<float> want(x.size());
      for (int64_t u = 0; u < n / unit; ++u) {
        const float* src = x.data() + u * unit * d;
        uint8_t* dst = packed.data() + static_cast<size_t>(u) * ub;
        if (keys) {
          rkv::encode_key_unit(spec, src, d, dst);
          rkv::decode_key_unit(spec, dst, d, want.data() + u * unit * d);
        } else {
          rkv::encode_value_row(spec, src, d, dst);
          rkv::decode_value_row(spec, dst, d, want.data() + u * d);
        }
      }
      rc::kernels::CodecLayout layout;
      layout.format = spec.format == rkv::CodecFormat::integer ? rc::kernels::kCodecInteger
                      : spec.format == rkv::CodecFormat::kivi  ? rc::kernels::kCodecKivi
                      : spec.format == rkv::CodecFormat::q8_0  ? rc::kernels::kCodecQ8_0
                      : spec.format == rkv::CodecFormat::f16   ? rc::kernels::kCodecF16
                                                               : rc::kernels::kCodecQ4_0;
      layout.bits = spec.bits;
      layout.group = spec.group;
      layout.symmetric = spec.symmetric;
      layout.head_dim = d;
      const rc::DeviceBuffer src = rc::upload(*ctx, packed);
      for (DType t : {DType::F32, DType::BF16}) {
        rc::DeviceBuffer out(*ctx, x.size() * rc::kernels::dtype_size(t));
        RKV_CUDA_CHECK(rc::kernels::dequantize_kv(t, layout, keys, src.as<uint8_t>(), n, out.data(), s()));
        EXPECT_EQ(get(out.data(), x.size(), t), stored(want, t)) << (t == DType::F32 ? "f32" : "bf16");
      }
    }
}

TEST_F(OpsTest, EmbedGathersRows) {
  Lcg r(11);
  const int64_t V = 50, D = 576;
  const std::vector<float> table = rkv::synthetic_uniform(r, V * D, 1.0f);
  const std::vector<int32_t> tokens = {3, 0, 49, 3, 17};
  for (DType t : kBoth) {
    rc::DeviceBuffer dt = put(table, t), dtok = rc::upload(*ctx, tokens);
    rc::DeviceBuffer x(*ctx, tokens.size() * D * sizeof(float));
    RKV_CUDA_CHECK(rc::kernels::embed(t, dt.data(), dtok.as<int32_t>(), 5, D, x.as<float>(), s()));
    const std::vector<float> got = get(x.data(), tokens.size() * D, DType::F32);
    const std::vector<float> tab = stored(table, t);
    for (size_t i = 0; i < tokens.size(); ++i)
      for (int64_t c = 0; c < D; ++c)
        ASSERT_EQ(got[i * D + c], tab[tokens[i] * D + c]) << name(t) << " row " << i << " col " << c;
  }
}

TEST_F(OpsTest, RmsNormMatchesCpu) {
  Lcg r(12);
  const int64_t rows = 7, n = 576;
  const std::vector<float> x = rkv::synthetic_uniform(r, rows * n, 3.0f), w = rkv::synthetic_uniform(r, n, 0.2f, 1.0f);
  std::vector<float> want(x.size());
  for (int64_t i = 0; i < rows; ++i) rkv::cpu::rmsnorm_row(x.data() + i * n, w.data(), 1e-5f, n, want.data() + i * n);
  rc::DeviceBuffer dx = rc::upload(*ctx, x), dw = rc::upload(*ctx, w);
  for (DType t : kBoth) {
    rc::DeviceBuffer y(*ctx, x.size() * 4);
    RKV_CUDA_CHECK(rc::kernels::rmsnorm(dx.as<float>(), dw.as<float>(), 1e-5f, rows, n, t, y.data(), s()));
    // The double sum of squares may round the scale differently in the last bit.
    expect_close(get(y.data(), x.size(), t), stored(want, t), 0.0, t == DType::F32 ? 3e-7 : 8e-3,
                 std::string("rmsnorm ") + name(t));
  }
}

TEST_F(OpsTest, QkvRopeAppendMatchesCpu) {
  struct Case {
    int H, Hkv, d;
    rkv::RopeScaling scaling;
    double theta;
  };
  rkv::RopeScaling llama3;
  llama3.type = "llama3";
  llama3.factor = 8.0;
  const Case cases[] = {{9, 3, 64, rkv::RopeScaling{}, 100000.0}, {8, 2, 128, llama3, 500000.0}};
  for (const Case& cs : cases) {
    Lcg r(13);
    const int64_t n = 5, ld = (cs.H + 2 * cs.Hkv) * cs.d, cap = 20, first = 3, half = cs.d / 2;
    const std::vector<int64_t> positions = {0, 1, 7, 1000, 40000};
    const std::vector<double> inv_freq = rkv::rope_inv_freq(cs.d, cs.theta, cs.scaling);
    const std::vector<float> qkv = rkv::synthetic_uniform(r, n * ld, 2.0f), bias = rkv::synthetic_uniform(r, ld, 0.5f);
    for (DType t : kBoth) {
      for (bool with_bias : {false, true}) {
        // CPU: bias, then rope_tables + rope_rotate_half (forward.cpp's order).
        std::vector<float> want = qkv;
        std::vector<float> cosv, sinv;
        rkv::rope_tables(inv_freq, positions.data(), n, cosv, sinv);
        for (int64_t i = 0; i < n; ++i) {
          float* row = want.data() + i * ld;
          if (with_bias) rkv::cpu::add_bias(row, bias.data(), ld);
          for (int hh = 0; hh < cs.H + cs.Hkv; ++hh)
            rkv::rope_rotate_half(row + hh * cs.d, half, cosv.data() + i * half, sinv.data() + i * half);
        }
        rc::DeviceBuffer dqkv = rc::upload(*ctx, qkv), db = rc::upload(*ctx, bias),
                         dp = rc::upload(*ctx, positions), df = rc::upload(*ctx, inv_freq);
        rc::DeviceBuffer dq(*ctx, static_cast<size_t>(n * cs.H * cs.d) * 4);
        const size_t cache_elems = static_cast<size_t>(cs.Hkv * cap * cs.d);
        rc::DeviceBuffer kc = put(std::vector<float>(cache_elems, 7.0f), t),
                         vc = put(std::vector<float>(cache_elems, 7.0f), t);
        RKV_CUDA_CHECK(rc::kernels::qkv_rope_append(t, dqkv.as<float>(), n, ld, with_bias ? db.as<float>() : nullptr,
                                                    dp.as<int64_t>(), df.as<double>(), cs.H, cs.Hkv, cs.d, dq.data(),
                                                    kc.data(), vc.data(), cap, first, s()));
        const std::vector<float> got_q = get(dq.data(), static_cast<size_t>(n * cs.H * cs.d), t);
        const std::vector<float> got_k = get(kc.data(), cache_elems, t), got_v = get(vc.data(), cache_elems, t);
        const std::string what = std::string(name(t)) + " d " + std::to_string(cs.d) + (with_bias ? " bias" : "");
        const double rel = t == DType::F32 ? 1e-6 : 4e-3, abs_tol = 1e-6;
        for (int64_t i = 0; i < n; ++i) {
          std::vector<float> gq(got_q.begin() + i * cs.H * cs.d, got_q.begin() + (i + 1) * cs.H * cs.d);
          std::vector<float> wq(want.begin() + i * ld, want.begin() + i * ld + cs.H * cs.d);
          expect_close(gq, stored(wq, t), abs_tol, rel, what + " q row " + std::to_string(i));
          for (int g = 0; g < cs.Hkv; ++g) {
            const size_t c0 = static_cast<size_t>((g * cap + first + i) * cs.d);
            std::vector<float> gk(got_k.begin() + c0, got_k.begin() + c0 + cs.d);
            std::vector<float> gv(got_v.begin() + c0, got_v.begin() + c0 + cs.d);
            const float* wk = want.data() + i * ld + (cs.H + g) * cs.d;
            const float* wv = want.data() + i * ld + (cs.H + cs.Hkv + g) * cs.d;
            expect_close(gk, stored(std::vector<float>(wk, wk + cs.d), t), abs_tol, rel, what + " k");
            expect_close(gv, stored(std::vector<float>(wv, wv + cs.d), t), 0.0, 0.0, what + " v");  // exact
          }
        }
        // Rows outside [first, first + n) are untouched.
        EXPECT_EQ(got_k[0], 7.0f);
        EXPECT_EQ(got_v[static_cast<size_t>((cap - 1) * cs.d)], 7.0f);
      }
    }
  }
}

TEST_F(OpsTest, SiluMulMatchesCpu) {
  Lcg r(14);
  const int64_t n = 3, F = 1536;
  const std::vector<float> gu = rkv::synthetic_uniform(r, n * 2 * F, 6.0f);
  for (DType t : kBoth) {
    const std::vector<float>& in = gu;
    std::vector<float> want(n * F);
    for (int64_t i = 0; i < n; ++i) {
      std::vector<float> g(in.begin() + i * 2 * F, in.begin() + i * 2 * F + F);
      rkv::cpu::silu_mul(g.data(), in.data() + i * 2 * F + F, F);
      std::copy(g.begin(), g.end(), want.begin() + i * F);
    }
    rc::DeviceBuffer dg = rc::upload(*ctx, gu), da(*ctx, want.size() * 4);
    RKV_CUDA_CHECK(rc::kernels::silu_mul(t, dg.as<float>(), n, F, da.data(), s()));
    expect_close(get(da.data(), want.size(), t), stored(want, t), 1e-7, t == DType::F32 ? 1e-6 : 4e-3,
                 std::string("silu_mul ") + name(t));
  }
}

TEST_F(OpsTest, LinearMatchesCpu) {
  Lcg r(15);
  const int64_t rows = 5, in = 576, out = 960;
  const std::vector<float> W = rkv::synthetic_uniform(r, out * in, 0.08f), x = rkv::synthetic_uniform(r, rows * in, 1.0f),
                           y0 = rkv::synthetic_uniform(r, rows * out, 1.0f);
  for (DType t : kBoth) {
    for (float beta : {0.0f, 1.0f}) {
      const std::vector<float> Wt = stored(W, t), xt = stored(x, t);
      std::vector<float> want = y0;
      rkv::cpu::linear(xt.data(), rows, in, Wt.data(), out, want.data(), beta);
      rc::DeviceBuffer dW = put(W, t), dx = put(x, t), dy = rc::upload(*ctx, y0);
      rc::linear(*ctx, rows, in, out, dW.data(), t, dx.data(), t, dy.data(), DType::F32, beta);
      const double scale = max_abs(want);
      expect_close(get(dy.data(), want.size(), DType::F32), want, 1e-5 * scale, 0.0,
                   std::string("linear ") + name(t) + " beta " + std::to_string(beta));
    }
  }
}

/// Naive causal attention in double: out [n, H d] (row stride H d), lse [H, n].
void reference_attention(const std::vector<float>& q, int64_t q_ld, int64_t n, const std::vector<float>& K,
                         const std::vector<float>& V, int64_t cap, int64_t first, int H, int Hkv, int d,
                         std::vector<float>& out, std::vector<float>& lse) {
  const int G = H / Hkv;
  out.assign(static_cast<size_t>(n * H * d), 0.0f);
  lse.assign(static_cast<size_t>(H * n), 0.0f);
  for (int h = 0; h < H; ++h) {
    const int g = h / G;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t len = first + i + 1;
      std::vector<double> sc(static_cast<size_t>(len));
      double mx = -1e300;
      for (int64_t j = 0; j < len; ++j) {
        double dot = 0.0;
        for (int e = 0; e < d; ++e)
          dot += static_cast<double>(q[i * q_ld + h * d + e]) * static_cast<double>(K[(g * cap + j) * d + e]);
        sc[static_cast<size_t>(j)] = dot * static_cast<double>(1.0f / std::sqrt(static_cast<float>(d)));
        mx = std::max(mx, sc[static_cast<size_t>(j)]);
      }
      double sum = 0.0;
      for (auto& v : sc) sum += (v = std::exp(v - mx));
      for (int e = 0; e < d; ++e) {
        double o = 0.0;
        for (int64_t j = 0; j < len; ++j) o += sc[static_cast<size_t>(j)] * static_cast<double>(V[(g * cap + j) * d + e]);
        out[static_cast<size_t>(i * H * d + h * d + e)] = static_cast<float>(o / sum);
      }
      lse[static_cast<size_t>(h * n + i)] = static_cast<float>(mx + std::log(sum));
    }
  }
}

struct AttnCase {
  int H, Hkv, d;
  int64_t n, first;
};

TEST_F(OpsTest, PrefillAttentionMatchesReference) {
  // d = 256 (Gemma 2/3): the V tile shares the K tile's shared memory; 140 keys make three tiles, the last partial.
  const AttnCase cases[] = {{9, 3, 64, 100, 0}, {9, 3, 64, 70, 50}, {8, 2, 128, 130, 10}, {9, 3, 64, 1, 0},
                            {4, 1, 256, 130, 10}};
  for (const AttnCase& c : cases) {
    Lcg r(16);
    const int64_t ld = (c.H + 2 * c.Hkv) * c.d, cap = c.first + c.n + 3;
    const std::vector<float> q = rkv::synthetic_uniform(r, c.n * ld, 2.0f);
    const std::vector<float> K = rkv::synthetic_uniform(r, c.Hkv * cap * c.d, 2.0f), V = rkv::synthetic_uniform(r, c.Hkv * cap * c.d, 1.0f);
    for (DType t : kBoth) {
      std::vector<float> want, want_lse;
      reference_attention(stored(q, t), ld, c.n, stored(K, t), stored(V, t), cap, c.first, c.H, c.Hkv, c.d, want,
                          want_lse);
      rc::DeviceBuffer dq = put(q, t), dk = put(K, t), dv = put(V, t);
      rc::DeviceBuffer dout(*ctx, want.size() * 4), dlse(*ctx, want_lse.size() * 4);
      const rc::kernels::AttentionShape shape{c.H, c.Hkv, c.d, 1.0f / std::sqrt(static_cast<float>(c.d))};
      RKV_CUDA_CHECK(rc::kernels::prefill_attention(t, dq.data(), ld, c.n, dk.data(), dv.data(), cap, c.first, shape,
                                                    dout.data(), static_cast<int64_t>(c.H) * c.d,
                                                    dlse.as<float>(), s()));
      const std::string what = std::string("prefill ") + name(t) + " H " + std::to_string(c.H) + " d " +
                               std::to_string(c.d) + " n " + std::to_string(c.n) + " first " + std::to_string(c.first);
      expect_close(get(dout.data(), want.size(), t), want, 2e-5, t == DType::F32 ? 2e-5 : 8e-3, what);
      expect_close(get(dlse.data(), want_lse.size(), DType::F32), want_lse, 2e-5, 2e-6, what + " lse");
    }
  }
}

TEST_F(OpsTest, DecodeAttentionMatchesReference) {
  const int64_t long_len = kEmulated ? 1500 : 5000;
  struct Case {
    AttnCase a;
    int splits;  // 0: decode_attention_splits()
  };
  const Case cases[] = {{{9, 3, 64, 1, 0}, 0},        {{9, 3, 64, 1, 999}, 0}, {{9, 3, 64, 1, 999}, 7},
                        {{8, 2, 128, 1, long_len - 1}, 0}, {{32, 8, 128, 1, 300}, 3}, {{4, 1, 256, 1, 700}, 0},
                        {{8, 1, 256, 1, 300}, 5}};
  for (const Case& cs : cases) {
    const AttnCase& c = cs.a;
    Lcg r(17);
    const int64_t len = c.first + 1, cap = len + 5;
    const std::vector<float> q = rkv::synthetic_uniform(r, c.H * c.d, 2.0f);
    const std::vector<float> K = rkv::synthetic_uniform(r, c.Hkv * cap * c.d, 2.0f), V = rkv::synthetic_uniform(r, c.Hkv * cap * c.d, 1.0f);
    const rc::kernels::AttentionShape shape{c.H, c.Hkv, c.d, 1.0f / std::sqrt(static_cast<float>(c.d))};
    const int splits = cs.splits > 0 ? cs.splits : rc::kernels::decode_attention_splits(len, c.Hkv, ctx->sm_count());
    for (DType t : kBoth) {
      std::vector<float> want, want_lse;
      reference_attention(stored(q, t), c.H * c.d, 1, stored(K, t), stored(V, t), cap, c.first, c.H, c.Hkv, c.d, want,
                          want_lse);
      rc::DeviceBuffer dq = put(q, t), dk = put(K, t), dv = put(V, t), dout(*ctx, want.size() * 4);
      rc::DeviceBuffer ws(*ctx, rc::kernels::decode_attention_workspace_floats(splits, shape) * sizeof(float));
      RKV_CUDA_CHECK(rc::kernels::decode_attention(t, dq.data(), dk.data(), dv.data(), cap, len, shape, splits,
                                                   ws.as<float>(), dout.data(), s()));
      expect_close(get(dout.data(), want.size(), t), want, 2e-5, t == DType::F32 ? 2e-5 : 8e-3,
                   std::string("decode ") + name(t) + " len " + std::to_string(len) + " splits " +
                       std::to_string(splits));
    }
  }
}

TEST_F(OpsTest, AttentionStatsMatchCpu) {
  struct Case {
    int H, Hkv, d;
    int64_t T, window;
    std::vector<int64_t> chunks;
  };
  const Case cases[] = {{9, 3, 64, 150, 32, {150}}, {9, 3, 64, 150, 32, {90, 60}}, {8, 2, 128, 100, 7, {1, 40, 59}},
                        {4, 1, 256, 100, 16, {70, 30}}};
  for (const Case& c : cases) {
    Lcg r(18);
    const int64_t ld = (c.H + 2 * c.Hkv) * c.d, cap = c.T + 2;
    const std::vector<float> q = rkv::synthetic_uniform(r, c.T * ld, 2.0f), K = rkv::synthetic_uniform(r, c.Hkv * cap * c.d, 2.0f);
    // CPU: queries [H, T, d] and keys with stride cap * d.
    std::vector<float> qh(static_cast<size_t>(c.H * c.T * c.d));
    for (int h = 0; h < c.H; ++h)
      for (int64_t t = 0; t < c.T; ++t)
        std::memcpy(qh.data() + (h * c.T + t) * c.d, q.data() + t * ld + h * c.d, static_cast<size_t>(c.d) * 4);
    rkv::AttentionStatsOptions opt;
    opt.window_attention = opt.cumulative_attention = true;
    opt.window = c.window;
    const rkv::AttentionStats want = rkv::compute_attention_stats(
        rkv::QueriesView{qh.data(), c.H, c.T, c.d}, rkv::KeysView{K.data(), c.Hkv, c.T, c.d, cap * c.d}, opt);
    rc::DeviceBuffer dq = rc::upload(*ctx, q), dk = rc::upload(*ctx, K), dv = rc::upload(*ctx, K);
    const size_t ht = static_cast<size_t>(c.H * c.T);
    rc::DeviceBuffer win(*ctx, ht * 4), cum(*ctx, ht * 4), lse(*ctx, ht * 4), out(*ctx, c.T * c.H * c.d * 4);
    RKV_CUDA_CHECK(cudaMemsetAsync(win.data(), 0, ht * 4, s()));
    RKV_CUDA_CHECK(cudaMemsetAsync(cum.data(), 0, ht * 4, s()));
    const rc::kernels::AttentionShape shape{c.H, c.Hkv, c.d, 1.0f / std::sqrt(static_cast<float>(c.d))};
    int64_t first = 0;
    for (int64_t n : c.chunks) {
      const float* qc = dq.as<float>() + first * ld;
      RKV_CUDA_CHECK(rc::kernels::prefill_attention(DType::F32, qc, ld, n, dk.data(), dv.data(), cap, first, shape,
                                                    out.data(), c.H * c.d, lse.as<float>(), s()));
      RKV_CUDA_CHECK(rc::kernels::attention_stats(DType::F32, qc, ld, n, first, lse.as<float>(), dk.data(), cap, shape,
                                                  c.T, c.T - c.window, win.as<float>(), cum.as<float>(), s()));
      first += n;
    }
    const std::string what = "stats T " + std::to_string(c.T) + " chunks " + std::to_string(c.chunks.size());
    expect_close(get(win.data(), ht, DType::F32), want.window_attention, 2e-6 * c.window, 1e-5, what + " window");
    expect_close(get(cum.data(), ht, DType::F32), want.cumulative_attention, 2e-6 * c.T, 1e-5, what + " cumulative");
  }
}

TEST_F(OpsTest, SelectTopKMatchesCpuIncludingTies) {
  struct Case {
    int64_t T, budget;
    rkv::ProtectedSpec spec;
    bool ties;
  };
  const Case cases[] = {{300, 36, {4, 32}, true},  {300, 100, {4, 32}, true}, {300, 5, {4, 32}, true},
                        {300, 36, {4, 32}, false}, {300, 299, {0, 0}, true},  {300, 1, {0, 0}, false},
                        {300, 300, {4, 32}, true}, {5000, 500, {4, 32}, false}, {5000, 777, {0, 16}, true},
                        {40, 37, {40, 40}, true}};
  const int64_t Hkv = 3;
  for (const Case& c : cases) {
    Lcg r(19);
    std::vector<float> scores(static_cast<size_t>(Hkv * c.T));
    for (auto& x : scores) {
      const float u = r.next();
      x = c.ties ? std::floor(u * 5.0f) : u * 100.0f;
      if (x == 0.0f && r.next() > 0.0f) x = -0.0f;  // -0 and +0 must tie
    }
    const rkv::Selection want = rkv::select_positions(scores.data(), Hkv, c.T, c.budget, c.spec, 4);
    rc::DeviceBuffer ds = rc::upload(*ctx, scores);
    const rkv::Selection got = rc::select_positions(*ctx, ds.as<float>(), Hkv, c.T, c.budget, c.spec, 4);
    const std::string what = "T " + std::to_string(c.T) + " budget " + std::to_string(c.budget);
    EXPECT_EQ(got.untouched, want.untouched) << what;
    EXPECT_EQ(got.kept, want.kept) << what;
    EXPECT_EQ(got.positions, want.positions) << what;
    EXPECT_EQ(got.warnings, want.warnings) << what;
  }
}

TEST_F(OpsTest, SelectTopKRejectsNonFiniteScoresLikeCpu) {
  const int64_t Hkv = 2, T = 50;
  std::vector<float> scores(static_cast<size_t>(Hkv * T), 1.0f);
  scores[T + 20] = std::numeric_limits<float>::quiet_NaN();
  scores[T + 30] = INFINITY;
  scores[1] = -INFINITY;  // protected (sink): never looked at
  const rkv::ProtectedSpec spec{4, 8};
  std::string want, got;
  try {
    rkv::select_positions(scores.data(), Hkv, T, 20, spec, 3);
  } catch (const rkv::InputError& e) {
    want = e.what();
  }
  rc::DeviceBuffer ds = rc::upload(*ctx, scores);
  try {
    rc::select_positions(*ctx, ds.as<float>(), Hkv, T, 20, spec, 3);
  } catch (const rkv::InputError& e) {
    got = e.what();
  }
  EXPECT_FALSE(want.empty());
  EXPECT_EQ(got, want);
}

TEST_F(OpsTest, CompactionMatchesCpu) {
  Lcg r(20);
  const int64_t Hkv = 3, d = 64, T = 40;
  rkv::LayerKV host;
  host.n_kv_heads = Hkv;
  host.head_dim = d;
  host.capacity = host.length = T;
  host.k = rkv::synthetic_uniform(r, Hkv * T * d, 1.0f);
  host.v = rkv::synthetic_uniform(r, Hkv * T * d, 1.0f);
  std::vector<float> scores = rkv::synthetic_uniform(r, Hkv * T, 1.0f);
  const rkv::Selection sel = rkv::select_positions(scores.data(), Hkv, T, 13, {2, 4}, 0);
  for (DType t : kBoth) {
    rc::DeviceLayerKV dev = rc::upload_layer(*ctx, host, t, T + 8);  // spare capacity: strided source rows
    rkv::LayerKV cpu = host;
    if (t == DType::BF16) {
      for (auto& x : cpu.k) x = bf16_round(x);
      for (auto& x : cpu.v) x = bf16_round(x);
    }
    const rkv::CompactionReport want = rkv::compact_layer(cpu, sel);
    const rkv::CompactionReport got = rc::compact_layer(*ctx, dev, sel);
    EXPECT_EQ(got.length_after, want.length_after);
    EXPECT_EQ(dev.capacity, 13);
    EXPECT_EQ(got.bytes_after, static_cast<size_t>(2 * Hkv * 13 * d) * rc::kernels::dtype_size(t));
    const rkv::LayerKV back = rc::download_layer(*ctx, dev);
    EXPECT_EQ(back.k, cpu.k) << name(t);
    EXPECT_EQ(back.v, cpu.v) << name(t);
    // An untouched selection leaves the layer as it is.
    const rkv::Selection all = rkv::select_positions(scores.data(), Hkv, 13, 13, {}, 0);
    const rkv::CompactionReport same = rc::compact_layer(*ctx, dev, all);
    EXPECT_TRUE(same.untouched);
    EXPECT_EQ(rc::download_layer(*ctx, dev).v, cpu.v);
  }
}

TEST_F(OpsTest, PerturbationNoiseMatchesHostBitForBit) {
  Lcg r(21);
  const int64_t Hkv = 3, cap = 50, prefix = 40;
  const int d = 64;
  const std::vector<float> v = rkv::synthetic_uniform(r, Hkv * cap * d, 1.0f);
  std::vector<uint8_t> mask(static_cast<size_t>(prefix), 0);
  for (int64_t p : rkv::protected_positions(prefix, {4, 4})) mask[static_cast<size_t>(p)] = 1;
  const double alpha = 0.3;
  const uint64_t seed = 12345678901ull;
  for (DType t : kBoth) {
    std::vector<float> want = stored(v, t);
    for (int64_t h = 0; h < Hkv; ++h)
      for (int64_t u = 0; u < prefix; ++u) {
        if (mask[static_cast<size_t>(u)]) continue;
        float* row = want.data() + (h * cap + u) * d;
        rkv::perturb_value_row(row, d, alpha, seed, 2, 5, 7, static_cast<uint32_t>(h), static_cast<uint32_t>(u));
      }
    want = stored(want, t);
    rc::DeviceBuffer dv = put(v, t), dm = rc::upload(*ctx, mask);
    RKV_CUDA_CHECK(rc::kernels::perturb_values(t, dv.data(), cap, Hkv, prefix, d, dm.as<uint8_t>(), alpha, seed, 2, 5,
                                               7, s()));
    const std::vector<float> got = get(dv.data(), v.size(), t);
    int64_t exact = 0, changed = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      if (got[i] == want[i]) ++exact;
      // Device double log/sin/cos may differ from the host libm in the last bit: one float ulp at most.
      ASSERT_LE(std::fabs(got[i] - want[i]), std::fabs(want[i]) * (t == DType::F32 ? 1.2e-7 : 8e-3)) << i;
      if (got[i] != stored(v, t)[i]) ++changed;
    }
    EXPECT_GE(exact, static_cast<int64_t>(got.size()) * 99 / 100) << name(t);
    EXPECT_GT(changed, Hkv * (prefix - 8) * d / 2) << name(t);
    // Protected rows and rows past the prefix are untouched.
    const std::vector<float> in = stored(v, t);
    for (int64_t h = 0; h < Hkv; ++h)
      for (int64_t u : {int64_t{0}, int64_t{3}, prefix - 1, prefix, cap - 1})
        for (int e = 0; e < d; ++e)
          ASSERT_EQ(got[(h * cap + u) * d + e], in[(h * cap + u) * d + e]) << "row " << u;
  }
}

TEST_F(OpsTest, KlRowsMatchDoubleReference) {
  Lcg r(22);
  const int64_t rows = 3, V = 1000;
  const std::vector<float> p = rkv::synthetic_uniform(r, rows * V, 5.0f);
  std::vector<float> q = rkv::synthetic_uniform(r, rows * V, 0.3f);
  for (size_t i = 0; i < q.size(); ++i) q[i] += p[i];
  rc::DeviceBuffer dp = rc::upload(*ctx, p), dq = rc::upload(*ctx, q), dout(*ctx, rows * 8);
  RKV_CUDA_CHECK(rc::kernels::kl_rows(dp.as<float>(), dq.as<float>(), rows, V, dout.as<double>(), s()));
  const std::vector<double> got = rc::download<double>(*ctx, dout.data(), rows);
  for (int64_t i = 0; i < rows; ++i) {
    long double mp = -1e30L, mq = -1e30L, sp = 0, sq = 0, kl = 0;
    for (int64_t v = 0; v < V; ++v) {
      mp = std::max<long double>(mp, p[i * V + v]);
      mq = std::max<long double>(mq, q[i * V + v]);
    }
    for (int64_t v = 0; v < V; ++v) {
      sp += std::exp(static_cast<long double>(p[i * V + v]) - mp);
      sq += std::exp(static_cast<long double>(q[i * V + v]) - mq);
    }
    for (int64_t v = 0; v < V; ++v) {
      const long double lp = p[i * V + v] - mp - std::log(sp), lq = q[i * V + v] - mq - std::log(sq);
      kl += std::exp(lp) * (lp - lq);
    }
    EXPECT_NEAR(got[static_cast<size_t>(i)], static_cast<double>(kl), 1e-12 + 1e-9 * static_cast<double>(kl)) << i;
    EXPECT_GT(got[static_cast<size_t>(i)], 0.0);
  }
  RKV_CUDA_CHECK(rc::kernels::kl_rows(dp.as<float>(), dp.as<float>(), rows, V, dout.as<double>(), s()));
  for (double k : rc::download<double>(*ctx, dout.data(), rows)) EXPECT_EQ(k, 0.0);
}

}  // namespace
