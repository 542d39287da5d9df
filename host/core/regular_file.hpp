// Reading input files safely on a shared machine: only regular files are read. A FIFO would block open() or read()
// until some other process writes to it (only SIGKILL ends the wait), a device such as /dev/zero or /dev/urandom never
// ends and fills the memory, and a folder is not a file; each is refused with an rkv::InputError naming the file.
// Checks never throw std::filesystem_error: a symbolic-link loop or an unreadable parent folder is an InputError too.
#pragma once
#include <cstdint>
#include <string>

namespace rkv {

/// Opens `path` read-only (O_CLOEXEC) without ever blocking, and returns the descriptor (the caller closes it).
/// Throws rkv::InputError "<what> '<path>': <reason>" when it cannot be opened (missing, permission, a symbolic-link
/// loop, ...) or is not a regular file (a FIFO, a device, a socket, a folder). `what` names the role, e.g. "config"
/// or "text file".
int open_regular_file(const std::string& path, const std::string& what);

/// The whole content of the regular file `path` (see open_regular_file), read with read(2). Throws rkv::InputError
/// naming `what` and the path when it is not a readable regular file, or when it is larger than `max_bytes` (the
/// message gives the size and the limit); rkv::Cancelled when the thread's CancelScope (core/cancel.hpp) is cancelled
/// meanwhile.
std::string read_regular_file(const std::string& path, const std::string& what, uint64_t max_bytes = UINT64_MAX);

/// The whole content of the open file `fd` (read with read(2)), which it closes, always. Errors as
/// read_regular_file's, naming `what` and `path`. For a descriptor opened some other way (core/folder.hpp).
std::string read_open_file(int fd, const std::string& path, const std::string& what, uint64_t max_bytes = UINT64_MAX);

/// What is at `path`, following symbolic links; never throws.
enum class PathKind { missing, regular, directory, other, error };
/// The kind of `path`; on PathKind::error (a symbolic-link loop, a permission problem) `*why` (when given) says why.
PathKind path_kind(const std::string& path, std::string* why = nullptr);
/// "a FIFO", "a character device", "a socket", ... for messages about a path that is neither file nor folder.
std::string describe_special_file(const std::string& path);
/// What a stat(2) mode is, for messages: "a regular file", "a folder", "a symbolic link", "a FIFO (named pipe)", "a
/// character device", "a block device", "a socket".
std::string describe_file_mode(unsigned mode);

}  // namespace rkv
