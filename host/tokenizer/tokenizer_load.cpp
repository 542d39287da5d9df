// Tokenizer::from_path: picks the loader from what the path is.
#include "core/errors.hpp"
#include "model/gguf.hpp"
#include "tokenizer/tokenizer.hpp"

namespace rkv {

Tokenizer Tokenizer::from_path(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return from_hf_dir(path);
  if (!std::filesystem::exists(path, ec)) throw InputError(path.string() + ": no such file or folder");
  const GgufFile file(path.string());
  return from_gguf(file);
}

}  // namespace rkv
