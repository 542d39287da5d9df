// Starting external programs without a shell: the program and its arguments are passed as a vector to fork + exec,
// so no file or folder name (an output folder called "x'; touch PWNED; echo '", or "O'Brien") is ever parsed as shell
// syntax. Used to draw plots with gnuplot.
#pragma once
#include <sys/types.h>

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

/// run_program with stdout written to `stdout_path` and stderr to `stderr_path` (each truncated; /dev/null when
/// empty; relative to `cwd`), for a caller that needs the program's stdout alone.
int run_program(const std::vector<std::string>& argv, const std::string& cwd, const std::string& stdout_path,
                const std::string& stderr_path);

/// Starts `argv` as run_program does (no shell; same cwd, stdin and log rules) without waiting for it. Returns the
/// child's process id, or -1 when it could not be started (program not found, fork failed). Wait for it with
/// wait_program. Thread-safe as run_program.
pid_t start_program(const std::vector<std::string>& argv, const std::string& cwd, const std::string& log_path);

/// Waits for a child started by start_program, at most `timeout_seconds` (negative: as long as it takes). Returns
/// what run_program returns for it (exit status, 128 + signal, -1), or -2 when it is still running at the timeout
/// (it is left running: kill it and wait again). Never throws.
int wait_program(pid_t pid, double timeout_seconds = -1);

/// True when `name` is an executable file in one of the $PATH folders (or, when it holds a '/', at that path).
bool program_exists(const std::string& name);

/// `text` as the body of a gnuplot single-quoted string: every ' doubled, control characters (a newline would end
/// the command and start another) replaced by spaces. gnuplot does no backquote substitution inside '...'.
std::string gnuplot_single_quoted(const std::string& text);

}  // namespace rkv
