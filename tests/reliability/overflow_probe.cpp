// Helper program for test_output_overflow (sanitizer build only): loads the overflow fixture library and makes ONE
// host call of the kind named on the command line through the host's own call path (run_scorer, run_allocator,
// run_signal). Under AddressSanitizer the plugin's write past its output aborts the process with a
// heap-buffer-overflow report on stderr; without one, the program prints "no overflow detected" and exits 0.
//   usage: rkv_overflow_probe LIBRARY scorer|allocator|signal
#include <cstdio>
#include <string>

#include "cache/kv_cache.hpp"
#include "plugin/allocator_call.hpp"
#include "plugin/instance.hpp"
#include "plugin/params.hpp"
#include "plugin/registry.hpp"
#include "plugin/scorer_call.hpp"
#include "plugin/signal_call.hpp"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: rkv_overflow_probe LIBRARY scorer|allocator|signal\n");
    return 2;
  }
  const std::string kind = argv[2];
  rkv::PluginRegistry reg;
  reg.load_library(argv[1]);
  rkv::HostServices host;
  const rkv::PluginInfo& info = reg.resolve("org.test.overflow_" + kind);
  const rkv::PluginInstance inst = rkv::PluginInstance::create(info, rkv::ParamSet::validate(*info.descriptor, {}), host);
  if (kind == "scorer") {
    const rkv_attention_shape shape{sizeof(rkv_attention_shape), 1, 2, 2, 4};
    const rkv::ScorerRequirements req = rkv::query_scorer_requirements(inst, shape);
    rkv::LayerKV kv;  // H_kv = 2, T = 5, d = 4
    kv.n_kv_heads = 2;
    kv.head_dim = 4;
    kv.capacity = kv.length = 5;
    kv.k.assign(2 * 5 * 4, 0.5f);
    kv.v.assign(2 * 5 * 4, 0.5f);
    rkv::ScorerCallInputs in;
    in.layer = 0;
    in.n_heads = 2;
    in.kv = &kv;
    rkv::run_scorer(inst, req, in);
  } else if (kind == "allocator") {
    rkv::run_allocator(inst, {}, 12, 10, 3, -1);
  } else if (kind == "signal") {
    rkv::run_signal(inst, 3, 2, nullptr);
  } else {
    std::fprintf(stderr, "rkv_overflow_probe: unknown kind '%s'\n", kind.c_str());
    return 2;
  }
  std::printf("no overflow detected\n");
  return 0;
}
