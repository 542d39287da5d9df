// A read-only memory mapping of a whole file (POSIX mmap), used by the GGUF and safetensors readers.
//
// Truncation while mapped: when another process truncates a mapped file, reading a page past the
// new end raises SIGBUS, which would kill the process (exit 135). Every MappedFile registers its address range with a
// process-wide SIGBUS handler; a fault inside a registered range is answered by mapping a zero page in its place (the
// read sees zeros) and marking the mapping as damaged. Readers then call check_unchanged() (also when they fail on
// what they read), which throws an rkv::InputError naming the file. A SIGBUS anywhere else goes to the handler that
// was installed before it (or to the default action).
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
  /// Maps `path` read-only. Throws rkv::InputError naming the path when it cannot be opened, is not a regular file
  /// (a FIFO is refused without blocking; see core/regular_file.hpp), or cannot be mapped.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

  /// Drops the resident pages wholly inside [p, p + n) (a range of data()) from this process (madvise
  /// MADV_DONTNEED): the bytes stay readable (a later read maps them in again from the file), they only stop counting
  /// in the resident set. For bytes the reader has copied and will not read again. Safe from any thread.
  void drop_pages(const uint8_t* p, size_t n) const;

  /// Why the file is no longer what was mapped, or "" when it is: a read of the mapping hit a page past its end
  /// (SIGBUS, answered with zeros; see the file comment); the open file's size, modification time or status change
  /// time differ from when it was mapped (truncated, or written in place: a private mapping sees such writes; the
  /// ctime also catches a writer that restored size and mtime, and changes with chmod, chown or a new hard link,
  /// which are taken as changes too); or its path now names another file (replaced, e.g. by a rename) or nothing.
  /// Two system calls (fstat, stat); safe from any thread.
  std::string change() const;
  bool changed() const { return !change().empty(); }
  /// Throws rkv::InputError "<path>: the file changed while it was being read (...)" when changed(); `during` names
  /// what was being read (e.g. "loading the model", "decoding"). Does nothing otherwise.
  void check_unchanged(const std::string& during) const;

 private:
  void release();
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  int fd_ = -1;     ///< kept open to see the file's current size (fstat), even if the path is replaced meanwhile
  uint64_t dev_ = 0, ino_ = 0;        ///< the file mapped (st_dev, st_ino)
  int64_t mtime_s_ = 0, mtime_ns_ = 0;  ///< its modification time when mapped
  int64_t ctime_s_ = 0, ctime_ns_ = 0;  ///< its status change time when mapped (no user can set it back)
  int slot_ = -1;   ///< index in the SIGBUS handler's table of mapped ranges (-1: not registered)
};

}  // namespace rkv
