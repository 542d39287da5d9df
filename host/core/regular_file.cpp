#include "core/regular_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/cancel.hpp"
#include "core/errors.hpp"

namespace rkv {

std::string describe_file_mode(unsigned mode) {
  const mode_t m = static_cast<mode_t>(mode);
  if (S_ISREG(m)) return "a regular file";
  if (S_ISLNK(m)) return "a symbolic link";
  if (S_ISDIR(m)) return "a folder";
  if (S_ISFIFO(m)) return "a FIFO (named pipe)";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

int open_regular_file(const std::string& path, const std::string& what) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer. It does not change reads of a regular
  // file; it is cleared below anyway.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    const int err = errno;
    throw InputError(what + " '" + path + "': cannot open: " +
                     (err == ELOOP ? std::string("too many levels of symbolic links (a symbolic-link loop?)")
                                   : std::string(std::strerror(err))));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw InputError(what + " '" + path + "': cannot stat: " + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw InputError(what + " '" + path + "' is " + describe_file_mode(st.st_mode) + "; expected a regular file");
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

std::string read_open_file(int fd, const std::string& path, const std::string& what, uint64_t max_bytes) {
  struct stat st {};
  ::fstat(fd, &st);
  const uint64_t size = st.st_size > 0 ? static_cast<uint64_t>(st.st_size) : 0;
  auto too_large = [&](uint64_t n) {
    ::close(fd);
    throw InputError(what + " '" + path + "' is " + std::to_string(n) + " bytes, more than the limit of " +
                     std::to_string(max_bytes) + " bytes");
  };
  if (size > max_bytes) too_large(size);
  std::string out;
  out.reserve(static_cast<size_t>(size));
  char buf[1 << 16];
  for (;;) {
    if (cancellation_requested()) {
      ::close(fd);
      throw Cancelled();
    }
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      throw InputError(what + " '" + path + "': cannot read: " + std::strerror(err));
    }
    if (out.size() + static_cast<uint64_t>(n) > max_bytes) too_large(out.size() + static_cast<uint64_t>(n));
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

std::string read_regular_file(const std::string& path, const std::string& what, uint64_t max_bytes) {
  return read_open_file(open_regular_file(path, what), path, what, max_bytes);
}

PathKind path_kind(const std::string& path, std::string* why) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR) return PathKind::missing;
    if (why)
      *why = err == ELOOP ? std::string("too many levels of symbolic links (a symbolic-link loop?)")
                          : std::string(std::strerror(err));
    return PathKind::error;
  }
  if (S_ISREG(st.st_mode)) return PathKind::regular;
  if (S_ISDIR(st.st_mode)) return PathKind::directory;
  return PathKind::other;
}

std::string describe_special_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "not a regular file";
  return describe_file_mode(st.st_mode);
}

}  // namespace rkv
