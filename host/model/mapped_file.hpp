// A read-only memory mapping of a whole file (POSIX mmap), used by the GGUF and safetensors readers.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace rkv {

/// Read-only mapping of a file. Move-only; unmaps on destruction. An empty file maps to size() == 0, data() == nullptr.
/// Thread rules: const access from any thread.
class MappedFile {
 public:
  MappedFile() = default;
  /// Maps `path` read-only. Throws rkv::InputError naming the path when it cannot be opened, is not a regular file,
  /// or cannot be mapped.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  void release();
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace rkv
