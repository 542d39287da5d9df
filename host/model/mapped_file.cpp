#include "model/mapped_file.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <utility>

#include "core/errors.hpp"
#include "core/regular_file.hpp"

namespace rkv {

namespace {

// ---- the SIGBUS guard (see mapped_file.hpp) ---------------------------------------------------------------------

/// One registered mapping. `begin` is published last (release) and cleared first, so the handler never sees a
/// half-written slot.
struct Slot {
  std::atomic<bool> used{false};
  std::atomic<uintptr_t> begin{0};
  std::atomic<uintptr_t> end{0};
  std::atomic<bool> faulted{false};
};

constexpr int kSlots = 256;  // mappings alive at once (a model's shards); beyond that a mapping is unguarded
Slot g_slots[kSlots];
uintptr_t g_page_size = 4096;
struct sigaction g_previous {};
std::once_flag g_install_once;

extern "C" void rkv_on_sigbus(int sig, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  const uintptr_t a = reinterpret_cast<uintptr_t>(info ? info->si_addr : nullptr);
  for (Slot& s : g_slots) {
    const uintptr_t b = s.begin.load(std::memory_order_acquire);
    if (b == 0 || a < b || a >= s.end.load(std::memory_order_relaxed)) continue;
    // A page of a registered mapping past the file's end: put a zero page there, note it, and let the read retry.
    void* page = reinterpret_cast<void*>(a & ~(g_page_size - 1));
    if (::mmap(page, g_page_size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != MAP_FAILED) {
      s.faulted.store(true, std::memory_order_relaxed);
      errno = saved_errno;
      return;
    }
    break;
  }
  // Not ours: whoever handled SIGBUS before (a sanitizer, the embedding program), or the default action (returning
  // re-executes the faulting read, which now dies with SIGBUS as it always did).
  errno = saved_errno;
  if ((g_previous.sa_flags & SA_SIGINFO) && g_previous.sa_sigaction) {
    g_previous.sa_sigaction(sig, info, context);
    return;
  }
  if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN && g_previous.sa_handler) {
    g_previous.sa_handler(sig);
    return;
  }
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(SIGBUS, &dfl, nullptr);
}

void install_sigbus_handler() {
  std::call_once(g_install_once, [] {
    const long page = ::sysconf(_SC_PAGESIZE);
    if (page > 0) g_page_size = static_cast<uintptr_t>(page);
    struct sigaction sa {};
    sa.sa_sigaction = rkv_on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGBUS, &sa, &g_previous);
  });
}

int register_range(const uint8_t* data, size_t size) {
  install_sigbus_handler();
  for (int k = 0; k < kSlots; ++k) {
    Slot& s = g_slots[k];
    if (s.used.exchange(true)) continue;
    s.faulted.store(false);
    s.end.store(reinterpret_cast<uintptr_t>(data) + size, std::memory_order_relaxed);
    s.begin.store(reinterpret_cast<uintptr_t>(data), std::memory_order_release);
    return k;
  }
  return -1;
}

void unregister_range(int slot) {
  if (slot < 0) return;
  Slot& s = g_slots[slot];
  s.begin.store(0, std::memory_order_release);
  s.end.store(0, std::memory_order_relaxed);
  s.used.store(false);
}

}  // namespace

MappedFile::MappedFile(const std::string& path) : path_(path) {
  fd_ = open_regular_file(path, "model file");
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    const int err = errno;
    release();
    throw InputError(path + ": cannot stat: " + std::strerror(err));
  }
  size_ = static_cast<size_t>(st.st_size);
  dev_ = static_cast<uint64_t>(st.st_dev);
  ino_ = static_cast<uint64_t>(st.st_ino);
  mtime_s_ = static_cast<int64_t>(st.st_mtim.tv_sec);
  mtime_ns_ = static_cast<int64_t>(st.st_mtim.tv_nsec);
  ctime_s_ = static_cast<int64_t>(st.st_ctim.tv_sec);
  ctime_ns_ = static_cast<int64_t>(st.st_ctim.tv_nsec);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd_, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      size_ = 0;
      release();
      throw InputError(path + ": cannot mmap: " + std::strerror(err));
    }
    data_ = static_cast<const uint8_t*>(p);
    slot_ = register_range(data_, size_);
  }
}

MappedFile::~MappedFile() { release(); }

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      fd_(std::exchange(other.fd_, -1)),
      dev_(other.dev_),
      ino_(other.ino_),
      mtime_s_(other.mtime_s_),
      mtime_ns_(other.mtime_ns_),
      ctime_s_(other.ctime_s_),
      ctime_ns_(other.ctime_ns_),
      slot_(std::exchange(other.slot_, -1)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    fd_ = std::exchange(other.fd_, -1);
    dev_ = other.dev_, ino_ = other.ino_, mtime_s_ = other.mtime_s_, mtime_ns_ = other.mtime_ns_;
    ctime_s_ = other.ctime_s_, ctime_ns_ = other.ctime_ns_;
    slot_ = std::exchange(other.slot_, -1);
  }
  return *this;
}

std::string MappedFile::change() const {
  struct stat st {};
  const bool have = fd_ >= 0 && ::fstat(fd_, &st) == 0;
  const bool faulted = slot_ >= 0 && g_slots[slot_].faulted.load();
  if (faulted || (have && static_cast<uint64_t>(st.st_size) < static_cast<uint64_t>(size_)))
    return "it was " + std::to_string(size_) + " bytes when opened and was truncated" +
           (have ? " (now " + std::to_string(st.st_size) + " bytes)" : std::string());
  if (fd_ < 0) return "";
  if (have && static_cast<uint64_t>(st.st_size) != static_cast<uint64_t>(size_))
    return "it was " + std::to_string(size_) + " bytes when opened and is " + std::to_string(st.st_size) +
           " bytes now (rewritten)";
  if (have && (st.st_mtim.tv_sec != mtime_s_ || st.st_mtim.tv_nsec != mtime_ns_))
    return "it was modified in place (its modification time changed)";
  struct stat now {};
  if (::stat(path_.c_str(), &now) != 0) return "it was removed or renamed (the path names no file now)";
  if (static_cast<uint64_t>(now.st_dev) != dev_ || static_cast<uint64_t>(now.st_ino) != ino_)
    return "the path now names another file (it was replaced)";
  if (have && (st.st_ctim.tv_sec != ctime_s_ || st.st_ctim.tv_nsec != ctime_ns_))
    return "it was written, truncated or its attributes changed (its status change time moved; a writer that restores "
           "the size and modification time still moves it)";
  return "";
}

void MappedFile::check_unchanged(const std::string& during) const {
  const std::string why = change();
  if (why.empty()) return;
  throw InputError(path_ + ": the file changed while it was being read: " + why + " during " + during +
                   "; no result computed after the change is written. Do not modify a model file while ripplekv "
                   "reads it (copy it first)");
}

void MappedFile::release() {
  unregister_range(slot_);
  slot_ = -1;
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  data_ = nullptr;
  size_ = 0;
}

void MappedFile::drop_pages(const uint8_t* p, size_t n) const {
  if (!data_ || p < data_ || p + n > data_ + size_) return;
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + n) / page * page;
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

}  // namespace rkv
