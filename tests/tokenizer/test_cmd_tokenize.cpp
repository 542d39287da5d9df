// `ripplekv tokenize`: the printed ids equal the expected ids of llama.cpp's vocabulary vectors, and usage or input
// errors exit with code 2.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "common/assets.hpp"
#include "core/atomic_file.hpp"
#include "core/subprocess.hpp"
#include "tokenizer/vector_files.hpp"

namespace {

namespace fs = std::filesystem;

struct CliResult {
  int exit_code;
  std::string out;
};

/// Runs `ripplekv tokenize ARGS...` with an argument vector (no shell: core/subprocess.hpp); returns its exit status
/// and its stdout (stderr is discarded).
CliResult run_cli(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {std::string(RKV_TEST_BINARY_DIR) + "/bin/ripplekv", "tokenize"};
  argv.insert(argv.end(), args.begin(), args.end());
  const std::string out_path = (fs::temp_directory_path() / ("rkv_cmd_tok_out_" + std::to_string(::getpid()))).string();
  const int code = rkv::run_program(argv, "", out_path, "");
  std::string out;
  try {
    out = rkv::read_file(out_path);
  } catch (const std::exception&) {
  }
  std::remove(out_path.c_str());
  return {code, out};
}

std::string join(const std::vector<int32_t>& ids) {
  std::string s;
  for (std::size_t i = 0; i < ids.size(); ++i) s += (i ? " " : "") + std::to_string(ids[i]);
  return s + "\n";
}

TEST(CmdTokenize, PrintsTheVectorIds) {
  const fs::path dir = rkv_test::tokenizer_vectors_dir();
  const fs::path text_file = fs::temp_directory_path() / ("rkv_cmd_tok_" + std::to_string(::getpid()) + ".txt");
  int checked = 0;
  for (const std::string vocab : {"gpt-2", "llama-bpe", "llama-spm", "phi-3", "qwen2", "starcoder"}) {
    const std::string path = (dir / ("ggml-vocab-" + vocab + ".gguf")).string();
    RKV_REQUIRE_ASSET(path);
    const auto cases = rkv_test::read_vocab_cases(path);
    // The longest case (mixed scripts, emoji, code) and two whitespace-only ones.
    std::size_t longest = 0;
    for (std::size_t i = 0; i < cases.size(); ++i)
      if (cases[i].text.size() > cases[longest].text.size()) longest = i;
    for (std::size_t i : {longest, std::size_t{3}, std::size_t{7}}) {
      std::ofstream(text_file, std::ios::binary) << cases[i].text;
      const CliResult r = run_cli({"--model", path, "--text-file", text_file.string()});
      EXPECT_EQ(r.exit_code, 0) << vocab;
      EXPECT_EQ(r.out, join(cases[i].ids)) << vocab << " case " << i;
      ++checked;
    }
  }
  fs::remove(text_file);
  EXPECT_EQ(checked, 18);
}

TEST(CmdTokenize, UsageAndInputErrorsExitWith2) {
  EXPECT_EQ(run_cli({"--help"}).exit_code, 0);
  EXPECT_EQ(run_cli({}).exit_code, 2);                                               // no --model
  EXPECT_EQ(run_cli({"--model", "x.gguf"}).exit_code, 2);                                 // no --text-file
  EXPECT_EQ(run_cli({"--model", "/nonexistent.gguf", "--text-file", "/nonexistent"}).exit_code, 2);
  EXPECT_EQ(run_cli({"--bogus"}).exit_code, 2);
  const fs::path text_file = fs::temp_directory_path() / ("rkv_cmd_tok_e_" + std::to_string(::getpid()) + ".txt");
  std::ofstream(text_file) << "hello";
  EXPECT_EQ(run_cli({"--model", "/nonexistent.gguf", "--text-file", text_file.string()}).exit_code, 2);
  EXPECT_EQ(run_cli({"--model", text_file.string(), "--text-file", text_file.string()}).exit_code, 2);
  fs::remove(text_file);
}

}  // namespace
