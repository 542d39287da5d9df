#include "core/subprocess.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <thread>

namespace rkv {

namespace {

/// The executable `name` resolves to ($PATH search as execvp does), or "" when there is none.
std::string resolve_program(const std::string& name) {
  auto executable = [](const std::string& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
  };
  if (name.empty()) return "";
  if (name.find('/') != std::string::npos) return executable(name) ? name : "";
  const char* path = std::getenv("PATH");
  const std::string dirs = path && *path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    const std::string dir = end > start ? dirs.substr(start, end - start) : ".";
    const std::string candidate = dir + "/" + name;
    if (executable(candidate)) return candidate;
    start = end + 1;
  }
  return "";
}

}  // namespace

bool program_exists(const std::string& name) { return !resolve_program(name).empty(); }

namespace {

/// fork + exec of argv with stdin from /dev/null, stdout to `out_path`, stderr to `err_path` (or the same file as
/// stdout when `share`); the child's pid or -1.
pid_t start(const std::vector<std::string>& argv, const std::string& cwd, const std::string& out_path,
            const std::string& err_path, bool share) {
  if (argv.empty()) return -1;
  const std::string program = resolve_program(argv[0]);
  if (program.empty()) return -1;
  // Everything the child needs is prepared here: after fork only async-signal-safe calls are allowed.
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const std::string log = out_path.empty() ? "/dev/null" : out_path;
  const std::string err_log = err_path.empty() ? "/dev/null" : err_path;
  const pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    if (!cwd.empty() && ::chdir(cwd.c_str()) != 0) ::_exit(127);
    const int in = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const int err = share ? out : ::open(err_log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (in < 0 || out < 0 || err < 0) ::_exit(127);
    if (::dup2(in, STDIN_FILENO) < 0 || ::dup2(out, STDOUT_FILENO) < 0 || ::dup2(err, STDERR_FILENO) < 0) ::_exit(127);
    ::execv(program.c_str(), args.data());
    ::_exit(127);
  }
  return pid;
}

}  // namespace

int run_program(const std::vector<std::string>& argv, const std::string& cwd, const std::string& log_path) {
  const pid_t pid = start(argv, cwd, log_path, log_path, true);
  return pid < 0 ? -1 : wait_program(pid);
}

int run_program(const std::vector<std::string>& argv, const std::string& cwd, const std::string& stdout_path,
                const std::string& stderr_path) {
  const pid_t pid = start(argv, cwd, stdout_path, stderr_path, false);
  return pid < 0 ? -1 : wait_program(pid);
}

pid_t start_program(const std::vector<std::string>& argv, const std::string& cwd, const std::string& log_path) {
  return start(argv, cwd, log_path, log_path, true);
}

int wait_program(pid_t pid, double timeout_seconds) {
  if (pid <= 0) return -1;
  int status = 0;
  if (timeout_seconds < 0) {
    while (::waitpid(pid, &status, 0) < 0)
      if (errno != EINTR) return -1;
  } else {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds);
    for (;;) {
      const pid_t r = ::waitpid(pid, &status, WNOHANG);
      if (r == pid) break;
      if (r < 0 && errno != EINTR) return -1;
      if (std::chrono::steady_clock::now() >= deadline) return -2;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status) == 127 ? -1 : WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

std::string gnuplot_single_quoted(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (const char ch : text) {
    const auto u = static_cast<unsigned char>(ch);
    if (ch == '\'') out += "''";
    else if (u < 0x20 || u == 0x7f) out += ' ';
    else out += ch;
  }
  return out;
}

}  // namespace rkv
