// Tokenizer::from_path: picks the loader from what the path is.
#include "core/errors.hpp"
#include "core/regular_file.hpp"
#include "model/gguf.hpp"
#include "tokenizer/tokenizer.hpp"

namespace rkv {

Tokenizer Tokenizer::from_path(const std::filesystem::path& path) {
  std::string why;
  const PathKind kind = path_kind(path.string(), &why);
  if (kind == PathKind::directory) return from_hf_dir(path);
  if (kind == PathKind::missing) throw InputError(path.string() + ": no such file or folder");
  if (kind == PathKind::error) throw InputError(path.string() + ": cannot be read: " + why);
  const GgufFile file(path.string());  // refuses a FIFO or a device without blocking
  return from_gguf(file);
}

}  // namespace rkv
