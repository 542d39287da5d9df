// Starting external programs without a shell: the program and its arguments are passed as a vector to fork + exec,
// so no file or folder name (an output folder called "x'; touch PWNED; echo '", or "O'Brien") is ever parsed as shell
// syntax. Used to draw plots with gnuplot.
#pragma once
#include <string>
#include <vector>

namespace rkv {

/// Runs `argv[0]` (searched in $PATH when it holds no '/') with the arguments `argv[1..]`, in the working folder
/// `cwd` (the caller's when empty), with stdin from /dev/null and stdout and stderr written to `log_path`
/// (truncated; /dev/null when empty; a relative path is relative to `cwd`). Waits for it. Returns its exit status
/// (0..255), 128 + the signal when it was killed, or -1 when it could not be started (not found, `cwd` or `log_path`
/// unusable; an exit status of 127, which is what the child reports for those, reads as -1 too); never throws
/// and never involves a shell. Thread-safe: the child only calls async-signal-safe functions before exec.
int run_program(const std::vector<std::string>& argv, const std::string& cwd, const std::string& log_path);

/// True when `name` is an executable file in one of the $PATH folders (or, when it holds a '/', at that path).
bool program_exists(const std::string& name);

/// `text` as the body of a gnuplot single-quoted string: every ' doubled, control characters (a newline would end
/// the command and start another) replaced by spaces. gnuplot does no backquote substitution inside '...'.
std::string gnuplot_single_quoted(const std::string& text);

}  // namespace rkv
