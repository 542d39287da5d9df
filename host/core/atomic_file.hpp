// Writing files so that nothing already written is lost: write a temporary file beside the target, flush it to
// disk, then rename it over the target (rename is atomic on POSIX file systems). A reader sees the old file or the
// new one, never a half-written one; an interrupted writer leaves at most a stray ".*.tmp.*" file. The temporary has
// an unpredictable name and is created with O_EXCL|O_NOFOLLOW, and the target is never written through a link
// (core/folder.hpp Folder::write_atomically, which files inside an output folder use directly).
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace rkv {

/// Atomically replaces `path` with `content`. Creates parent folders (the path's folders are resolved as the user
/// wrote them). Throws rkv::InputError naming the path when the folder is not writable, the disk is full or the file
/// size limit is reached, or when `path` is a link, FIFO, device or folder (with `replace_special`, a user's --force,
/// anything but a folder is replaced by the rename, never written through).
void write_file_atomically(const std::string& path, const std::string& content, bool replace_special = false);

/// write_file_atomically of `json` written with an indent of 2 and a final newline (profiles, run records).
void write_json_atomically(const std::string& path, const nlohmann::json& json, bool replace_special = false);

/// Reads a whole regular file; throws rkv::InputError naming the path when it cannot be read or is not a regular
/// file (a FIFO, a device such as /dev/zero, a folder: see core/regular_file.hpp).
std::string read_file(const std::string& path);

}  // namespace rkv
