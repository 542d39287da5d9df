// describe_model (model/model.hpp), the header-only path of `ripplekv model info`: the same text as a full load except
// the sha256 line, the same parameter count, no tensor data read, and the CLI's output and --sha256.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/atomic_file.hpp"
#include "core/errors.hpp"
#include "core/sha256.hpp"
#include "core/subprocess.hpp"
#include "model/gguf.hpp"
#include "model/model.hpp"
#include "model/model_info.hpp"
#include "model_writers.hpp"

namespace {

namespace fs = std::filesystem;
using rkv_test::GgufWriter;

/// A fresh path in the test folder, private to this process (ctest runs these tests in parallel processes).
fs::path tmp(const std::string& name) {
  fs::path p = fs::path(testing::TempDir()) / ("rkv_describe_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(p);
  return p;
}

/// Removes this process's tmp() paths when the tests end.
class RemoveTmpPaths : public testing::Environment {
 public:
  void TearDown() override {
    const std::string prefix = "rkv_describe_" + std::to_string(::getpid()) + "_";
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(testing::TempDir(), ec))
      if (e.path().filename().string().rfind(prefix, 0) == 0) fs::remove_all(e.path(), ec);
  }
};
const testing::Environment* const kRemoveTmpPaths = testing::AddGlobalTestEnvironment(new RemoveTmpPaths);

std::string info_text(const rkv::Model& m) {
  std::ostringstream os;
  rkv::print_model_info(m, os);
  return os.str();
}

/// `text` with its "sha256:" line replaced by "sha256: -".
std::string without_sha256(const std::string& text) {
  std::istringstream in(text);
  std::string line, out;
  while (std::getline(in, line)) out += (line.rfind("sha256:", 0) == 0 ? "sha256: -" : line) + "\n";
  return out;
}

/// The model files the comparisons run on: synthetic GGUFs of each architecture and matrix type, one with
/// rope_freqs.weight, and Hugging Face folders (F32, BF16, qwen2 untied).
std::vector<fs::path> sample_models() {
  std::vector<fs::path> paths;
  auto gguf = [&](const std::string& name, const rkv::Model& m, uint32_t type) {
    paths.push_back(tmp(name + ".gguf"));
    rkv_test::gguf_writer_for(m, type).write(paths.back().string());
  };
  rkv::ModelConfig llama = rkv::synthetic_config("llama", 4, 2, 32, 2);  // d = 32: rows of whole Q8_0/Q4 blocks
  llama.d_model = 64;
  llama.d_ff = 96;
  const rkv::Model l = rkv::synthetic_model(llama, 3);
  gguf("llama_f32", l, 0);
  gguf("llama_q8_0", l, 8);
  gguf("llama_q4_1", l, 3);
  rkv::ModelConfig qwen = rkv::synthetic_config("qwen2", 4, 1, 8, 1);
  qwen.tied_embeddings = false;
  const rkv::Model q = rkv::synthetic_model(qwen, 4);
  gguf("qwen2", q, 0);
  gguf("gemma3", rkv::synthetic_model(rkv::synthetic_config("gemma3", 4, 1, 8, 6), 5), 0);
  {
    GgufWriter w = rkv_test::gguf_writer_for(l);
    w.add_tensor_f32("rope_freqs.weight", {16}, std::vector<float>(16, 2.0f));
    paths.push_back(tmp("ropefreqs.gguf"));
    w.write(paths.back().string());
  }
  paths.push_back(tmp("llama_hf"));
  rkv_test::write_hf_folder(l, paths.back());
  paths.push_back(tmp("llama_hf_bf16"));
  rkv_test::write_hf_folder(l, paths.back(), "BF16");
  paths.push_back(tmp("qwen2_hf"));
  rkv_test::write_hf_folder(q, paths.back());
  return paths;
}

TEST(DescribeModel, PrintsWhatAFullLoadPrintsButTheSha256) {
  for (const fs::path& p : sample_models()) {
    SCOPED_TRACE(p.string());
    const rkv::Model d = rkv::describe_model(p.string());
    for (const rkv::WeightStorage storage : {rkv::WeightStorage::f32, rkv::WeightStorage::quantized}) {
      const rkv::Model m = rkv::load_model(p.string(), storage);
      const std::string loaded = info_text(m), described = info_text(d);
      EXPECT_EQ(without_sha256(described), without_sha256(loaded));
      EXPECT_NE(loaded.find("sha256:            " + m.sha256 + "\n"), std::string::npos) << loaded;
      EXPECT_NE(described.find("sha256:            (not computed; --sha256 reads the whole file)\n"),
                std::string::npos)
          << described;
      // The count from the tensor infos is the count of the weights a load holds.
      EXPECT_EQ(m.source_parameters, m.held_parameter_count());
      EXPECT_EQ(d.parameter_count(), m.held_parameter_count());
      EXPECT_EQ(rkv::model_sha256(p.string()), m.sha256);
    }
    EXPECT_TRUE(d.sha256.empty());
    EXPECT_EQ(d.held_parameter_count(), 0);  // no weights
    EXPECT_TRUE(d.layers.empty());
  }
}

TEST(DescribeModel, GoldenTextOfASyntheticGguf) {
  rkv::ModelConfig c = rkv::synthetic_config("llama");
  const fs::path p = tmp("golden.gguf");
  GgufWriter w = rkv_test::gguf_writer_for(rkv::synthetic_model(c, 7));
  w.add_string("general.name", "Synthetic Llama");
  w.write(p.string());
  std::string text = info_text(rkv::describe_model(p.string()));
  const std::string path_line = "path:              " + p.string() + "\n";
  ASSERT_EQ(text.rfind(path_line, 0), 0u) << text;
  text = "path:              GOLDEN.gguf\n" + text.substr(path_line.size());
  const fs::path golden = fs::path(RKV_TEST_SOURCE_DIR) / "tests" / "fixtures" / "model_info" / "synthetic_llama.txt";
  EXPECT_EQ(text, rkv::read_file(golden.string())) << "to update: write the text above to " << golden;
}

/// Maps `path` as a GgufFile, then makes every whole page of its tensor data region unreadable (PROT_NONE), so any
/// read of tensor data kills the process with SIGSEGV. Returns the file; `protected_bytes` gets the bytes protected.
std::shared_ptr<const rkv::GgufFile> open_with_data_unreadable(const std::string& path, size_t* protected_bytes) {
  auto f = std::make_shared<const rkv::GgufFile>(path);
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t base = reinterpret_cast<uintptr_t>(f->file_data());
  const uintptr_t begin = (base + f->data_offset() + page - 1) / page * page;
  const uintptr_t end = (base + f->file_size() + page - 1) / page * page;
  *protected_bytes = end > begin ? end - begin : 0;
  if (*protected_bytes > 0 && ::mprotect(reinterpret_cast<void*>(begin), end - begin, PROT_NONE) != 0) std::abort();
  return f;
}

// If describe_model read any tensor's data (a dequantize, a hash of the file, a copy of the weights), the read would
// hit the unreadable pages: the child dies instead of exiting 0. The full load on the same setup dies, which shows
// the protection catches a read.
TEST(DescribeModelDeathTest, ReadsNoTensorData) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  rkv::ModelConfig c = rkv::synthetic_config("llama");
  c.vocab_size = 2048;  // embeddings of 128 KiB: the data spans many pages, the header one
  const fs::path p = tmp("unreadable.gguf");
  rkv_test::gguf_writer_for(rkv::synthetic_model(c, 11)).write(p.string());
  {
    const rkv::GgufFile f(p.string());
    ASSERT_LT(f.data_offset(), 4096u);
    ASSERT_GT(f.file_size() - f.data_offset(), size_t{128} << 10);
  }
  EXPECT_EXIT(
      {
        size_t n = 0;
        const auto f = open_with_data_unreadable(p.string(), &n);
        const rkv::Model m = rkv::describe_gguf_model(f);
        const bool ok = n > (size_t{128} << 10) && m.config.vocab_size == 2048 && m.parameter_count() > 2048 * 16 &&
                        m.source_tensors.size() == 2 + 2 * 9 && info_text(m).find("parameters:") != std::string::npos;
        std::_Exit(ok ? 0 : 3);
      },
      testing::ExitedWithCode(0), "");
  EXPECT_EXIT(
      {
        size_t n = 0;
        const auto f = open_with_data_unreadable(p.string(), &n);
        (void)rkv::load_gguf_model(f, rkv::WeightStorage::f32);
        std::_Exit(0);
      },
      [](int status) { return !(WIFEXITED(status) && WEXITSTATUS(status) == 0); }, "");
}

/// Runs the CLI with `args`; its exit status, stdout in `out` and stderr in `err`.
int cli(const std::vector<std::string>& args, std::string& out, std::string& err) {
  static int n = 0;
  const fs::path o = tmp("cli_out" + std::to_string(n)), e = tmp("cli_err" + std::to_string(n++));
  std::vector<std::string> argv = {RKV_TEST_BINARY_DIR "/bin/ripplekv"};
  argv.insert(argv.end(), args.begin(), args.end());
  const int rc = rkv::run_program(argv, "", o.string(), e.string());
  out = rkv::read_file(o.string());
  err = rkv::read_file(e.string());
  return rc;
}

TEST(ModelInfoCli, PrintsTheDescriptionAndTheSha256OnRequest) {
  const std::vector<fs::path> models = sample_models();
  for (const fs::path& p : {models.front(), models[models.size() - 3]}) {  // a GGUF and an HF folder
    SCOPED_TRACE(p.string());
    const rkv::Model m = rkv::load_model(p.string());
    std::string out, err;
    ASSERT_EQ(cli({"model", "info", p.string()}, out, err), 0) << err;
    EXPECT_EQ(out, info_text(rkv::describe_model(p.string())));
    EXPECT_EQ(without_sha256(out), without_sha256(info_text(m)));
    ASSERT_EQ(cli({"model", "info", p.string(), "--sha256"}, out, err), 0) << err;
    EXPECT_EQ(out, info_text(m));  // the hash a load computes, every other line as before
  }
  std::string out, err;
  ASSERT_EQ(cli({"model", "--help"}, out, err), 0) << err;
  EXPECT_NE(out.find("--sha256"), std::string::npos) << out;
}

TEST(ModelInfoCli, BadModelsAreClearErrors) {
  rkv::ModelConfig c = rkv::synthetic_config("llama");
  std::vector<uint8_t> b = rkv_test::gguf_writer_for(rkv::synthetic_model(c, 12)).bytes();
  const std::string needle = "blk.1.ffn_up.weight";
  auto it = std::search(b.begin(), b.end(), needle.begin(), needle.end());
  ASSERT_NE(it, b.end());
  *(it + 8) = 'X';
  const fs::path p = tmp("cli_missing.gguf");
  GgufWriter::write_file(p.string(), b);
  std::string out, err;
  EXPECT_EQ(cli({"model", "info", p.string()}, out, err), 2);
  EXPECT_NE(err.find(p.string() + ": missing tensor 'blk.1.ffn_up.weight' (expected shape [24, 16]"),
            std::string::npos)
      << err;
  EXPECT_EQ(out, "");
}

}  // namespace
