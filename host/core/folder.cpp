// A folder used only through its descriptor (core/folder.hpp).
#include "core/folder.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "core/errors.hpp"
#include "core/regular_file.hpp"

namespace fs = std::filesystem;

namespace rkv {

namespace {

std::string what_is(mode_t m) { return describe_file_mode(m); }

std::shared_ptr<const int> own_fd(int fd) {
  return std::shared_ptr<const int>(new int(fd), [](const int* p) {
    ::close(*p);
    delete p;
  });
}

/// 16 hex digits from getrandom(2) (the kernel's generator; never blocks once the machine has booted).
std::string random_hex() {
  unsigned char b[8] = {};
  size_t got = 0;
  while (got < sizeof b) {
    const ssize_t n = ::getrandom(b + got, sizeof b - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw InputError(std::string("cannot draw a random temporary file name: ") + std::strerror(errno));
    }
    got += static_cast<size_t>(n);
  }
  static const char* const kHex = "0123456789abcdef";
  std::string s;
  for (unsigned char c : b) s += kHex[c >> 4], s += kHex[c & 15];
  return s;
}

/// Writes all of `content` to `fd`; returns 0 or the errno of the failed write.
int write_all(int fd, const std::string& content) {
  size_t off = 0;
  while (off < content.size()) {
    const ssize_t n = ::write(fd, content.data() + off, content.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    off += static_cast<size_t>(n);
  }
  return 0;
}

std::string io_error(int err) {
  if (err == EFBIG) return std::string(std::strerror(err)) + " (the file size limit, ulimit -f, was reached)";
  return std::strerror(err);
}

}  // namespace

std::vector<std::string> relative_components(const std::string& rel) {
  if (rel.empty() || rel.front() == '/') throw InputError("path '" + rel + "' must be relative to its folder");
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    const size_t slash = rel.find('/', start);
    const std::string part = rel.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (part.empty() || part == "." || part == "..")
      throw InputError("path '" + rel + "' has an empty, '.' or '..' component");
    parts.push_back(part);
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return parts;
}

Folder Folder::open(const std::string& path, bool create, const std::string& what, bool follow_link) {
  if (path.empty()) throw InputError(what + ": an empty path");
  // "runs/x/" and "runs/x/." name "runs/x": strip them, so that the last component opened with O_NOFOLLOW is the
  // folder's own name (with "LINK/." the kernel would resolve LINK and open its target as ".").
  fs::path p(path);
  while (p.has_relative_path() && (p.filename().empty() || p.filename() == ".")) p = p.parent_path();
  if (p.empty()) p = ".";
  if (p.filename() == "..")
    throw InputError(what + " '" + path + "': name the folder itself, not a path ending in '..'");
  if (create) {
    std::error_code ec;
    if (p.has_parent_path() && !p.parent_path().empty()) fs::create_directories(p.parent_path(), ec);
    if (ec) throw InputError(what + " '" + path + "': cannot be created: " + ec.message());
    if (::mkdir(p.c_str(), 0755) != 0 && errno != EEXIST)
      throw InputError(what + " '" + path + "': cannot be created: " + std::strerror(errno));
  }
  const int fd = ::open(p.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | (follow_link ? 0 : O_NOFOLLOW));
  if (fd < 0) {
    const int err = errno;
    struct stat st {};
    if (::lstat(p.c_str(), &st) == 0 && !S_ISDIR(st.st_mode))
      throw InputError(what + " '" + path + "' is " + what_is(st.st_mode) + ", not a folder" +
                       (S_ISLNK(st.st_mode) ? " (ripplekv never writes through a link: name the folder itself)" : ""));
    throw InputError(what + " '" + path + "': cannot open: " + std::strerror(err));
  }
  return Folder(own_fd(fd), path);
}

std::string Folder::path_of(const std::string& rel) const { return (fs::path(path_) / rel).string(); }

Folder Folder::sub(const std::string& rel, bool create) const {
  Folder at = *this;
  std::string walked;
  for (const std::string& name : relative_components(rel)) {
    walked += (walked.empty() ? "" : "/") + name;
    if (create && ::mkdirat(at.fd(), name.c_str(), 0755) != 0 && errno != EEXIST)
      throw InputError("folder '" + path_of(walked) + "': cannot be created: " + std::strerror(errno));
    const int fd = ::openat(at.fd(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      const int err = errno;
      struct stat st {};
      if (::fstatat(at.fd(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode))
        throw InputError("'" + path_of(walked) + "' is " + what_is(st.st_mode) + " where ripplekv keeps a folder of " +
                         "its own; remove it (ripplekv never writes through a link or over another kind of file)");
      throw InputError("folder '" + path_of(walked) + "': cannot open: " + std::strerror(err));
    }
    Folder next(own_fd(fd), path_of(walked));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || st.st_uid != ::geteuid())
      throw InputError("folder '" + next.path() + "' belongs to another user (uid " + std::to_string(st.st_uid) +
                       "); ripplekv writes only in subfolders of its own. Remove it or choose another output folder");
    at = std::move(next);
  }
  at.path_ = path_of(rel);
  return at;
}

std::optional<Folder> Folder::find_sub(const std::string& rel) const {
  if (kind(rel) == Kind::missing) return std::nullopt;
  return sub(rel, false);
}

std::pair<Folder, std::string> Folder::parent_of(const std::string& rel, bool create) const {
  const auto slash = rel.rfind('/');
  const std::string name = slash == std::string::npos ? rel : rel.substr(slash + 1);
  relative_components(rel);  // refuses "", "/x", "a/../b"
  if (slash == std::string::npos) return {*this, name};
  return {sub(rel.substr(0, slash), create), name};
}

Folder::Kind Folder::kind(const std::string& rel) const {
  const auto slash = rel.rfind('/');
  std::optional<Folder> parent;
  if (slash != std::string::npos) {
    if (kind(rel.substr(0, slash)) != Kind::directory) return Kind::missing;
    parent = sub(rel.substr(0, slash), false);
  }
  const std::string name = slash == std::string::npos ? rel : rel.substr(slash + 1);
  struct stat st {};
  if (::fstatat(parent ? parent->fd() : fd(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return Kind::missing;
  if (S_ISREG(st.st_mode)) return Kind::regular;
  if (S_ISDIR(st.st_mode)) return Kind::directory;
  if (S_ISLNK(st.st_mode)) return Kind::link;
  return Kind::other;
}

void Folder::write_atomically(const std::string& rel, const std::string& content, bool replace_special) const {
  const auto [dir, name] = parent_of(rel, true);
  const std::string target = path_of(rel);
  struct stat st {};
  if (::fstatat(dir.fd(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(st.st_mode) &&
      (!replace_special || S_ISDIR(st.st_mode)))
    throw InputError("cannot write '" + target + "': it is " + what_is(st.st_mode) +
                     "; ripplekv never writes through a link or over another kind of file (remove it)");
  const std::string tmp = "." + name + ".tmp." + random_hex();
  const int fd = ::openat(dir.fd(), tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) throw InputError("cannot write '" + target + "': " + io_error(errno));
  auto fail = [&](int err) {
    ::close(fd);
    ::unlinkat(dir.fd(), tmp.c_str(), 0);
    throw InputError("cannot write '" + target + "': " + io_error(err));
  };
  if (const int err = write_all(fd, content)) fail(err);
  if (::fsync(fd) != 0) fail(errno);
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlinkat(dir.fd(), tmp.c_str(), 0);
    throw InputError("cannot write '" + target + "': " + io_error(err));
  }
  if (::renameat(dir.fd(), tmp.c_str(), dir.fd(), name.c_str()) != 0) {
    const int err = errno;
    ::unlinkat(dir.fd(), tmp.c_str(), 0);
    throw InputError("cannot write '" + target + "': " + io_error(err));
  }
}

namespace {

/// Opens `name` in `dir` with `flags` | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC and checks it is a regular file (clearing
/// O_NONBLOCK again); rkv::InputError "<what> '<path>' ..." otherwise.
int open_regular_at(int dir, const std::string& name, int flags, const std::string& what, const std::string& path) {
  const int fd = ::openat(dir, name.c_str(), flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY, 0644);
  if (fd < 0) {
    const int err = errno;
    struct stat st {};
    if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(st.st_mode))
      throw InputError(what + " '" + path + "' is " + what_is(st.st_mode) + "; expected a regular file");
    throw InputError(what + " '" + path + "': cannot open: " + std::strerror(err));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw InputError(what + " '" + path + "' is " + what_is(st.st_mode) + "; expected a regular file");
  }
  if ((flags & (O_WRONLY | O_RDWR)) && st.st_nlink != 1) {  // a hard link: writing it writes a file elsewhere
    ::close(fd);
    throw InputError(what + " '" + path + "' has " + std::to_string(st.st_nlink) +
                     " names (a hard link to another file); ripplekv writes in place only files of one name");
  }
  const int fl = ::fcntl(fd, F_GETFL);
  if (fl >= 0) ::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  return fd;
}

}  // namespace

std::string Folder::read(const std::string& rel, const std::string& what, uint64_t max_bytes) const {
  const auto [dir, name] = parent_of(rel, false);
  const std::string path = path_of(rel);
  return read_open_file(open_regular_at(dir.fd(), name, O_RDONLY, what, path), path, what, max_bytes);
}

int Folder::open_append(const std::string& rel) const {
  const auto [dir, name] = parent_of(rel, false);
  return open_regular_at(dir.fd(), name, O_WRONLY | O_APPEND, "file", path_of(rel));
}

int Folder::open_or_create(const std::string& rel) const {
  const auto [dir, name] = parent_of(rel, true);
  return open_regular_at(dir.fd(), name, O_RDWR | O_CREAT, "file", path_of(rel));
}

std::vector<std::string> Folder::list_files(const std::string& suffix) const {
  std::vector<std::string> names;
  const int dup = ::openat(fd(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR* d = dup >= 0 ? ::fdopendir(dup) : nullptr;
  if (!d) {
    if (dup >= 0) ::close(dup);
    throw InputError("folder '" + path_ + "': cannot list: " + std::strerror(errno));
  }
  while (const dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n == "." || n == ".." || n.size() < suffix.size() || n.compare(n.size() - suffix.size(), suffix.size(), suffix))
      continue;
    struct stat st {};
    if (::fstatat(fd(), n.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode)) names.push_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

bool Folder::empty_except(const std::vector<std::string>& except) const {
  const int dup = ::openat(fd(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR* d = dup >= 0 ? ::fdopendir(dup) : nullptr;
  if (!d) {
    if (dup >= 0) ::close(dup);
    throw InputError("folder '" + path_ + "': cannot list: " + std::strerror(errno));
  }
  bool empty = true;
  while (const dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != ".." && std::find(except.begin(), except.end(), n) == except.end()) empty = false;
  }
  ::closedir(d);
  return empty;
}

void Folder::remove(const std::string& rel) const {
  const auto [dir, name] = parent_of(rel, false);
  if (::unlinkat(dir.fd(), name.c_str(), 0) != 0 && errno != ENOENT)
    throw InputError("cannot remove '" + path_of(rel) + "': " + std::strerror(errno));
}

namespace {

std::string make_temp_folder(const std::string& prefix) {
  const char* env = std::getenv("TMPDIR");
  std::string base = env && *env ? env : "/tmp";
  std::string tmpl = (fs::path(base) / (prefix + ".XXXXXX")).string();
  if (!::mkdtemp(tmpl.data())) throw InputError("cannot create a temporary folder in '" + base + "': " + std::strerror(errno));
  return tmpl;
}

}  // namespace

PrivateTempFolder::PrivateTempFolder(const std::string& prefix)
    : path_(make_temp_folder(prefix)), folder_(Folder::open(path_, false, "temporary folder")) {}

PrivateTempFolder::~PrivateTempFolder() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

}  // namespace rkv
