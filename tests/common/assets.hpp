// Locating downloaded assets (scripts/fetch-assets) from tests.
//
// The asset cache is $RIPPLEKV_CACHE (default ~/.cache/ripplekv). A test that needs an absent asset skips with a
// message naming the asset and the command that fetches it; under CI=true a missing asset fails the test instead
// (docs/ARCHITECTURE.md "Real inputs").
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace rkv_test {

/// The asset cache folder: $RIPPLEKV_CACHE, else $HOME/.cache/ripplekv.
inline std::filesystem::path asset_cache_dir() {
  if (const char* c = std::getenv("RIPPLEKV_CACHE"); c && *c) return c;
  const char* home = std::getenv("HOME");
  return std::filesystem::path(home ? home : "/root") / ".cache" / "ripplekv";
}

/// The SmolLM2-135M-Instruct GGUF that scripts/fetch-assets unpacks.
inline std::filesystem::path smollm2_gguf() { return asset_cache_dir() / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"; }

/// The folder of the six Austen novels as plain text (one .txt per novel).
inline std::filesystem::path austen_dir() { return asset_cache_dir() / "austen"; }

/// The shared tokenizer vectors (../shared/tokenizer-vectors beside the checkout).
inline std::filesystem::path tokenizer_vectors_dir() { return std::filesystem::path(RKV_TEST_SHARED_DIR) / "tokenizer-vectors"; }

inline bool running_in_ci() {
  const char* ci = std::getenv("CI");
  return ci && std::string(ci) == "true";
}

}  // namespace rkv_test

/// Skip the current test when `path` does not exist (fail under CI=true). Use at the top of a TEST body.
#define RKV_REQUIRE_ASSET(asset)                                                                               \
  do {                                                                                                          \
    const std::filesystem::path rkv_asset_path_ = (asset);                                                      \
    if (!std::filesystem::exists(rkv_asset_path_)) {                                                            \
      if (rkv_test::running_in_ci()) {                                                                          \
        FAIL() << "missing asset " << rkv_asset_path_ << " (CI=true); fetch it with scripts/fetch-assets";      \
      } else {                                                                                                  \
        GTEST_SKIP() << "missing asset " << rkv_asset_path_ << "; fetch it with scripts/fetch-assets";          \
      }                                                                                                         \
    }                                                                                                           \
  } while (0)
