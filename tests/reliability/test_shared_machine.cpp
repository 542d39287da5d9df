// Safe to run on a shared machine: hostile inputs and interruptions of a run.
//   fault 2   a model file truncated while it is mapped: no SIGBUS, an rkv::InputError naming the file
//   fault 13  FIFOs, devices and folders refused as configs, models and texts (no blocking, no endless reads);
//             SIGTERM ends `run` within about a second in every phase (loading, tokenizing, drawing windows)
//   fault 14  a configurable limit on the cells of a sweep; --threads bounded to a multiple of the cores
//   also      errors that named neither file nor key (symbolic-link loops) are input errors that do; profile and
//             analyze honour model.backend / model.dtype
// The CLI is started with argument vectors (core/subprocess.hpp), never through a shell. The only timed assertions are
// the SIGTERM ones the issue asks for ("within 1 s"), checked with generous slack (a 5 s hard limit).
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "backend/cpu/threads.hpp"
#include "core/atomic_file.hpp"
#include "core/cancel.hpp"
#include "core/errors.hpp"
#include "core/regular_file.hpp"
#include "core/sha256.hpp"
#include "common/child_process.hpp"
#include "core/subprocess.hpp"
#include "model/gguf.hpp"
#include "model/mapped_file.hpp"
#include "model/model.hpp"
#include "runner/plan/config.hpp"
#include "runner/tasks/text_windows.hpp"
#include "synthetic_run.hpp"
#include "tokenizer/tokenizer.hpp"

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

const std::string kCli = std::string(RKV_TEST_BINARY_DIR) + "/bin/ripplekv";

using rkv_test::finish;

/// Runs the CLI with an argument vector in `cwd`, at most `limit` seconds (a hang is killed and reads as -2);
/// returns its exit status and its stdout + stderr.
std::pair<int, std::string> cli(const std::vector<std::string>& args, const fs::path& cwd, double limit = 60) {
  std::vector<std::string> argv = {kCli};
  argv.insert(argv.end(), args.begin(), args.end());
  const fs::path log = cwd / "cli.log";
  const pid_t pid = rkv::start_program(argv, cwd.string(), log.string());
  if (pid < 0) return {-1, "cannot start " + kCli};
  const int rc = finish(pid, limit);
  return {rc, rkv::read_file(log.string())};
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

/// The number of CPUs this process may use, counted here (not through the backend's own function).
int cores_of_this_process() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return static_cast<int>(std::thread::hardware_concurrency());
  return CPU_COUNT(&set);
}

class SharedMachine : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::temp_directory_path() / ("rkv-shared-" + std::to_string(::getpid()) + "-" +
                                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    rkv_test::write_synthetic_run_folder(dir);
  }
  void TearDown() override { fs::remove_all(dir); }

  /// A config over the synthetic model and texts; `eval_files` is the TOML list of [data.eval] files.
  std::string config(const std::string& extra = "", const std::string& eval_files = "[\"eval.txt\"]",
                     const std::string& model = "model.gguf") const {
    return "[model]\npath = \"" + model + "\"\nthreads = 1\n"
           "[data.calibration]\nfiles = [\"cal.txt\"]\nexamples = 2\nprefix_tokens = 32\nwindow_tokens = 8\n"
           "[data.eval]\nfiles = " + eval_files + "\nexamples = 2\nprefix_tokens = 32\n"
           "[scorer]\nplugin = \"streamingllm\"\n[allocator]\nplugin = \"uniform\"\n[budget]\nfraction = 0.5\n"
           "[tasks.lm_fidelity]\ncontinuation_tokens = 8\n[output]\nbootstrap_resamples = 100\n" + extra;
  }
  fs::path write(const std::string& name, const std::string& text) const {
    std::ofstream(dir / name, std::ios::binary) << text;
    return dir / name;
  }
  fs::path fifo(const std::string& name) const {
    const fs::path p = dir / name;
    EXPECT_EQ(::mkfifo(p.c_str(), 0600), 0) << p;
    return p;
  }

  fs::path dir;
};

// ---- fault 2: a model file truncated while mapped ---------------------------------------------------------------

TEST_F(SharedMachine, ReadsPastTheEndOfATruncatedMappingSeeZerosAndNameTheFile) {
  const long page = ::sysconf(_SC_PAGESIZE);
  const fs::path f = write("blob.bin", std::string(static_cast<size_t>(16 * page), '\x03'));
  const rkv::MappedFile m(f.string());
  ASSERT_EQ(m.size(), static_cast<size_t>(16 * page));
  EXPECT_FALSE(m.changed());
  EXPECT_NO_THROW(m.check_unchanged("a test"));
  ASSERT_EQ(::truncate(f.c_str(), page), 0);  // someone else truncates the file while it is mapped
  EXPECT_TRUE(m.changed());                    // seen from the file's size alone
  uint64_t sum = 0;
  for (size_t i = 0; i < m.size(); ++i) sum += m.data()[i];  // without the guard: SIGBUS on the second page
  EXPECT_EQ(sum, 3u * static_cast<uint64_t>(page));           // the first page is intact, the rest reads as zeros
  try {
    m.check_unchanged("loading the model");
    FAIL() << "a truncated mapping passed check_unchanged";
  } catch (const rkv::InputError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind(f.string() + ": the file changed while it was being read", 0), 0u) << msg;
    EXPECT_TRUE(contains(msg, "truncated (now " + std::to_string(page) + " bytes) during loading the model")) << msg;
  }
}

// The guard answers only faults inside a MappedFile's range: a SIGBUS anywhere else goes to the handler installed
// before it, or ends the process when there was none. In the sanitizer build that earlier handler is
// AddressSanitizer's, which reports "BUS on unknown address" at the faulting read and exits (exitcode, 1) instead
// of dying by the signal; that report is what shows the fault was passed on.
TEST_F(SharedMachine, ASigbusOutsideAGuardedMappingStillKillsTheProcess) {
#if defined(__SANITIZE_ADDRESS__)
  constexpr bool kAsan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  constexpr bool kAsan = true;
#else
  constexpr bool kAsan = false;
#endif
#else
  constexpr bool kAsan = false;
#endif
  const long page = ::sysconf(_SC_PAGESIZE);
  const fs::path guarded = write("guarded.bin", std::string(static_cast<size_t>(2 * page), 'g'));
  const fs::path other = write("other.bin", std::string(static_cast<size_t>(4 * page), 'o'));
  const fs::path err = dir / "child.err";
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const int efd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (efd < 0 || ::dup2(efd, 2) < 0) ::_exit(6);
    const rkv::MappedFile m(guarded.string());  // installs the handler
    const int fd = ::open(other.c_str(), O_RDONLY);
    auto* p = static_cast<const volatile char*>(::mmap(nullptr, 4 * page, PROT_READ, MAP_PRIVATE, fd, 0));
    if (::ftruncate(::open(other.c_str(), O_WRONLY), 0) != 0) ::_exit(3);
    const char c = p[3 * page];  // not a MappedFile: SIGBUS, as always
    ::_exit(c == 0 ? 4 : 5);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  const std::string report = rkv::read_file(err.string());
  if (kAsan) {
    ASSERT_TRUE(WIFEXITED(status)) << "signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : -1) << ": " << report;
    EXPECT_NE(WEXITSTATUS(status), 0) << report;
    EXPECT_TRUE(contains(report, "AddressSanitizer: BUS on unknown address")) << report;
    return;
  }
  ASSERT_TRUE(WIFSIGNALED(status)) << "exit status " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1) << ": "
                                   << report;
  EXPECT_EQ(WTERMSIG(status), SIGBUS) << report;
}

TEST_F(SharedMachine, AGgufTruncatedAfterItsHeaderWasReadIsAnInputErrorNamingIt) {
  const fs::path copy = dir / "copy.gguf";
  // A larger model than the fixture's, so that its tensor data spans several pages past the header.
  rkv::ModelConfig c = rkv::synthetic_config("llama", 4, 2, 64, 2);
  c.vocab_size = 258;
  const rkv::Model model = rkv::synthetic_model(c, 5);
  rkv_test::gguf_writer_for(model).write(copy.string());
  const rkv::GgufFile f(copy.string());
  const uint64_t cut = (f.data_offset() / 4096 + 1) * 4096;
  ASSERT_GT(f.file_size(), cut + 2 * 4096) << "the fixture model is too small for this test";
  ASSERT_EQ(::truncate(copy.c_str(), static_cast<off_t>(cut)), 0);
  // Read every byte (what the loader's hash does): zeros past the cut instead of a SIGBUS ...
  (void)rkv::sha256_hex(f.file_data(), f.file_size());
  // ... and the truncation is reported with the file's name.
  try {
    f.check_unchanged("loading the model");
    FAIL() << "the truncation went unnoticed";
  } catch (const rkv::InputError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(copy.string() + ": the file changed while it was being read", 0), 0u)
        << e.what();
  }
  // Loading the truncated file afresh is the parser's usual clear error.
  try {
    rkv::load_model(copy.string());
    FAIL() << "a truncated model loaded";
  } catch (const rkv::InputError& e) {
    EXPECT_TRUE(contains(e.what(), copy.string())) << e.what();
    EXPECT_TRUE(contains(e.what(), "truncated file?")) << e.what();
  }
}

// ---- fault 13: non-regular files -------------------------------------------------------------------------------

TEST_F(SharedMachine, ConfigsThatAreNotRegularFilesAreRefusedAtOnce) {
  const fs::path pipe = fifo("config.fifo");
  struct Case {
    std::string config;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"/dev/zero", "config '/dev/zero' is a character device; expected a regular file"},
      {pipe.string(), "config '" + pipe.string() + "' is a FIFO (named pipe); expected a regular file"},
      {dir.string(), "config '" + dir.string() + "' is a folder; expected a regular file"},
  };
  for (const Case& c : cases) {
    const auto [rc, log] = cli({"validate", c.config}, dir, 20);  // before: /dev/zero ate memory, a FIFO blocked
    EXPECT_EQ(rc, 2) << c.config << ": " << log;
    EXPECT_TRUE(contains(log, c.expected)) << log;
  }
  write("huge.toml", std::string(65 << 20, '#'));  // a comment of 65 MiB
  const auto [rc, log] = cli({"validate", "huge.toml"}, dir, 60);
  EXPECT_EQ(rc, 2) << log;
  EXPECT_TRUE(contains(log, "more than the limit of 67108864 bytes")) << log;
}

TEST_F(SharedMachine, ModelsAndTextsThatAreNotRegularFilesAreRefusedNamingTheKey) {
  const fs::path model_pipe = fifo("model.fifo");
  const fs::path text_pipe = fifo("text.fifo");
  struct Case {
    std::string config;
    std::string key;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {config("", "[\"eval.txt\"]", model_pipe.string()), "model.path", "is a FIFO (named pipe)"},
      {config("", "[\"eval.txt\"]", "/dev/zero"), "model.path", "is a character device"},
      {config("", "[\"/dev/zero\"]"), "data.eval.files", "is a character device, not a regular file"},
      {config("", "[\"" + text_pipe.string() + "\"]"), "data.eval.files", "is a FIFO (named pipe), not a regular file"},
      {config("", "[\"" + dir.string() + "\"]"), "data.eval.files", "is a folder, not a file"},
  };
  for (const Case& c : cases) {
    write("cfg.toml", c.config);
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"validate", "cfg.toml"}, std::vector<std::string>{"run", "cfg.toml", "--out", "out"}}) {
      const auto [rc, log] = cli(args, dir, 20);
      EXPECT_EQ(rc, 2) << args[0] << " " << c.key << ": " << log;
      EXPECT_TRUE(contains(log, c.key)) << log;
      EXPECT_TRUE(contains(log, c.expected)) << log;
    }
  }
  // Commands that take a model or a text directly: the FIFO blocked open() until SIGKILL.
  auto [rc, log] = cli({"generate", "--model", model_pipe.string(), "--prompt", "hi"}, dir, 20);
  EXPECT_EQ(rc, 2) << log;
  EXPECT_TRUE(contains(log, model_pipe.string() + " is a FIFO (named pipe)")) << log;
  std::tie(rc, log) = cli({"model", "info", model_pipe.string()}, dir, 20);
  EXPECT_EQ(rc, 2) << log;
  EXPECT_TRUE(contains(log, "FIFO")) << log;
  std::tie(rc, log) = cli({"tokenize", "--model", "model.gguf", "--text-file", "/dev/zero"}, dir, 20);
  EXPECT_EQ(rc, 2) << log;
  EXPECT_TRUE(contains(log, "--text-file '/dev/zero' is a character device")) << log;
  std::tie(rc, log) = cli({"tokenize", "--model", "model.gguf", "--text-file", text_pipe.string()}, dir, 20);
  EXPECT_EQ(rc, 2) << log;
  EXPECT_TRUE(contains(log, "FIFO")) << log;
}

// "internal error" messages that named neither file nor key: a symbolic-link loop behind a configured path.
TEST_F(SharedMachine, SymbolicLinkLoopsAreInputErrorsNamingTheKey) {
  fs::create_symlink(dir / "loop_b", dir / "loop_a");
  fs::create_symlink(dir / "loop_a", dir / "loop_b");
  struct Case {
    std::string config;
    std::string key;
  };
  for (const Case& c : {Case{config("", "[\"eval.txt\"]", "loop_a"), "model.path"},
                        Case{config("", "[\"loop_a\"]"), "data.eval.files"}}) {
    write("cfg.toml", c.config);
    const auto [rc, log] = cli({"validate", "cfg.toml"}, dir, 20);
    EXPECT_EQ(rc, 2) << log;  // was 1, "internal error: filesystem error: status: Too many levels of symbolic links"
    EXPECT_FALSE(contains(log, "internal error")) << log;
    EXPECT_TRUE(contains(log, c.key)) << log;
    EXPECT_TRUE(contains(log, "symbolic-link loop")) << log;
  }
  auto [rc, log] = cli({"generate", "--model", "loop_a", "--prompt", "hi"}, dir, 20);
  EXPECT_EQ(rc, 2) << log;
  EXPECT_TRUE(contains(log, "loop_a")) << log;
  EXPECT_TRUE(contains(log, "symbolic-link loop")) << log;
  std::tie(rc, log) = cli({"validate", "loop_a"}, dir, 20);
  EXPECT_EQ(rc, 2) << log;
  EXPECT_TRUE(contains(log, "config 'loop_a': cannot open: too many levels of symbolic links")) << log;
}

// ---- fault 13: cancellation reaches loading, tokenizing and drawing windows -------------------------------------

TEST_F(SharedMachine, ACancelledScopeStopsLoadingTokenizingAndDrawingWindows) {
  const rkv::Tokenizer tok = rkv::Tokenizer::from_path(dir / "model.gguf");
  const std::string text = rkv::read_file((dir / "eval.txt").string());
  const std::vector<int32_t> ids = tok.encode(text, false, false);
  std::atomic<bool> flag{false};
  {
    const rkv::CancelScope scope(&flag);  // not cancelled: everything works as without a scope
    EXPECT_NO_THROW(rkv::throw_if_cancelled());
    EXPECT_EQ(tok.encode(text, false, false), ids);
    EXPECT_EQ(rkv::load_model((dir / "model.gguf").string()).config.n_layers, 2);
    flag.store(true);
    EXPECT_THROW(rkv::throw_if_cancelled(), rkv::Cancelled);
    EXPECT_THROW(rkv::load_model((dir / "model.gguf").string()), rkv::Cancelled);
    std::string long_text;
    while (long_text.size() < (1u << 20)) long_text += text;  // long enough to reach a poll
    EXPECT_THROW(tok.encode(long_text, false, false), rkv::Cancelled);
    EXPECT_THROW(rkv::draw_text_windows(tok, {(dir / "eval.txt").string()}, 2, 40, 1), rkv::Cancelled);
    EXPECT_THROW(rkv::sha256_file((dir / "eval.txt").string()), rkv::Cancelled);
    {
      const rkv::CancelScope inner(nullptr);  // a scope without a flag keeps the outer one
      EXPECT_THROW(rkv::throw_if_cancelled(), rkv::Cancelled);
    }
  }
  EXPECT_NO_THROW(rkv::throw_if_cancelled());  // outside every scope: never cancelled
  EXPECT_EQ(tok.encode(text, false, false), ids);
  std::thread other([&] { EXPECT_NO_THROW(rkv::throw_if_cancelled()); });  // scopes belong to their thread
  other.join();
}

/// Starts `run` on `cfg`, waits until its log shows `phase_note` (or `limit` s), lets it work `delay` s more,
/// sends SIGTERM and returns {exit status, seconds from SIGTERM to exit, log}. -2: still running 5 s after SIGTERM.
struct Stopped {
  int rc = -1;
  double seconds = 0;
  std::string log;
};
Stopped sigterm_run(const fs::path& dir, const std::string& cfg, const std::string& phase_note, double delay) {
  const fs::path log = dir / "run.log";
  fs::remove(log);  // an earlier run's notes must not count as this one's phase
  const pid_t pid = rkv::start_program({kCli, "run", cfg, "--out", "out"}, dir.string(), log.string());
  Stopped s;
  if (pid < 0) return s;
  const auto t0 = Clock::now();
  while (seconds_since(t0) < 30) {
    std::string text;
    try {
      text = rkv::read_file(log.string());
    } catch (const rkv::InputError&) {
    }
    if (contains(text, phase_note) || rkv::wait_program(pid, 0) != -2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(delay));
  ::kill(pid, SIGTERM);
  const auto t_kill = Clock::now();
  s.rc = finish(pid, 5.0);  // the issue asks for about 1 s; 5 s of slack for a loaded machine
  s.seconds = seconds_since(t_kill);
  s.log = rkv::read_file(log.string());
  return s;
}

/// A text of about `bytes` bytes in which every sentence differs (so BPE has real work), for long tokenization.
std::string long_text(size_t bytes) {
  std::string t;
  t.reserve(bytes + 100);
  for (uint64_t i = 0; t.size() < bytes; ++i)
    t += "Sentence " + std::to_string(i * 2654435761u % 1000003) + " abbey walk and back again. ";
  return t;
}

TEST_F(SharedMachine, SigtermEndsARunWhileItTokenizesItsTexts) {
  write("big_eval.txt", long_text(64 << 20));  // far longer to tokenize than the test waits
  // Evaluation windows (lm_fidelity) and the calibration windows of a profile. (The needle haystack is tokenized by
  // the same Tokenizer::encode; the synthetic model has no chat template for needle prompts.)
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"lm_fidelity", config("", "[\"big_eval.txt\"]")},
      {"profile", [&] {
         std::string t = config("[signal]\nplugin = \"depth\"\n");
         t.replace(t.find("files = [\"cal.txt\"]"), 19, "files = [\"big_eval.txt\"]");
         t.replace(t.find("plugin = \"uniform\""), 18, "plugin = \"ripplekv\"");
         return t;
       }()},
  };
  for (const auto& [name, text] : cases) {
    write("cfg.toml", text);
    fs::remove_all(dir / "out");
    const Stopped s = sigterm_run(dir, "cfg.toml", "run: backend", 0.5);
    EXPECT_EQ(s.rc, 130) << name << ": " << (s.rc == -2 ? "still running 5 s after SIGTERM\n" : "") << s.log;
    EXPECT_LT(s.seconds, 5.0) << name;
    EXPECT_TRUE(contains(s.log, "ripplekv run: cancelled")) << name << ": " << s.log;
  }
}

TEST_F(SharedMachine, SigtermEndsARunAtAnyMomentWithinSeconds) {
  write("big_eval.txt", long_text(16 << 20));
  write("cfg.toml", config("", "[\"big_eval.txt\"]"));
  for (double delay : {0.0, 0.05, 0.2}) {  // during start-up, model loading and tokenization
    fs::remove_all(dir / "out");
    const Stopped s = sigterm_run(dir, "cfg.toml", "run: loading", delay);
    EXPECT_EQ(s.rc, 130) << "after " << delay << " s: " << (s.rc == -2 ? "still running 5 s after SIGTERM\n" : "")
                         << s.log;
    EXPECT_LT(s.seconds, 5.0) << delay;
  }
}

// ---- fault 14: bounded sweeps and threads ------------------------------------------------------------------------

TEST_F(SharedMachine, ASweepOfMillionsOfCellsIsRefusedAtValidateTimeNamingTheLimit) {
  std::string values;
  for (int i = 1; i <= 200; ++i) values += (i > 1 ? ", " : "") + std::to_string(i * 0.004);
  const std::string sweep = "[sweep]\n\"budget.fraction\" = [" + values + "]\n\"scorer.streamingllm.sinks\" = [" +
                            [] {
                              std::string v;
                              for (int i = 1; i <= 150; ++i) v += (i > 1 ? ", " : "") + std::to_string(i);
                              return v;
                            }() +
                            "]\n\"allocator.plugin\" = [\"uniform\", \"pyramid\"]\n";
  write("cfg.toml", config(sweep));
  const auto t0 = Clock::now();
  auto [rc, log] = cli({"validate", "cfg.toml"}, dir, 120);
  EXPECT_EQ(rc, 2) << log;  // was: 2.6 GB and bad_alloc for 3 million cells
  EXPECT_TRUE(contains(log, "sweep")) << log;
  EXPECT_TRUE(contains(log, "the sweep has 60000 cells (2 x 200 x 150), more than the limit of 10000")) << log;
  EXPECT_TRUE(contains(log, "max_cells = N in [output]")) << log;
  EXPECT_LT(seconds_since(t0), 60.0);
  // The limit is configurable: [output] max_cells.
  write("cfg.toml", config("max_cells = 2\n[sweep]\n\"budget.fraction\" = [0.25, 0.5, 0.75]\n"));
  std::tie(rc, log) = cli({"validate", "cfg.toml"}, dir);
  EXPECT_EQ(rc, 2) << log;
  EXPECT_TRUE(contains(log, "the sweep has 3 cells (3), more than the limit of 2")) << log;
  write("cfg.toml", config("max_cells = 3\n[sweep]\n\"budget.fraction\" = [0.25, 0.5, 0.75]\n"));
  std::tie(rc, log) = cli({"validate", "cfg.toml"}, dir);
  EXPECT_EQ(rc, 0) << log;
  EXPECT_TRUE(contains(log, "4 cells")) << log;  // the full-cache reference is not counted against the limit
  write("cfg.toml", config("max_cells = 100001\n"));
  std::tie(rc, log) = cli({"validate", "cfg.toml"}, dir);
  EXPECT_EQ(rc, 2) << log;
  EXPECT_TRUE(contains(log, "output.max_cells")) << log;
}

TEST(ThreadBound, ThreadCountsAreBoundedToAMultipleOfTheCores) {
  const int most = 4 * cores_of_this_process();
  EXPECT_EQ(rkv::cpu::max_threads(), most);
  std::string warning;
  EXPECT_EQ(rkv::cpu::bounded_thread_count(0, &warning), 0);
  EXPECT_EQ(rkv::cpu::bounded_thread_count(1, &warning), 1);
  EXPECT_EQ(rkv::cpu::bounded_thread_count(most, &warning), most);
  EXPECT_EQ(warning, "");
  EXPECT_EQ(rkv::cpu::bounded_thread_count(10000, &warning), most);
  EXPECT_TRUE(contains(warning, "10000 CPU threads requested")) << warning;
  EXPECT_TRUE(contains(warning, "using " + std::to_string(most))) << warning;
  EXPECT_EQ(rkv::cpu::bounded_thread_count(int64_t{1} << 40, &warning), most);  // never wraps through int
  rkv::cpu::set_num_threads(10000);
  EXPECT_EQ(rkv::cpu::num_threads(), most);
  rkv::cpu::set_num_threads(0);
}

TEST_F(SharedMachine, ThreadsBeyondTheBoundRunWithAWarning) {
  const int most = 4 * cores_of_this_process();
  write("cfg.toml", config());
  auto [rc, log] = cli({"run", "cfg.toml", "--out", "out", "--threads", "10000", "--quiet"}, dir, 120);
  EXPECT_EQ(rc, 0) << log;
  EXPECT_TRUE(contains(log, "warning: 10000 CPU threads requested")) << log;
  EXPECT_TRUE(contains(log, "using " + std::to_string(most))) << log;
  std::tie(rc, log) = cli({"run", "cfg.toml", "--out", "out2", "--threads", "4294967297", "--quiet"}, dir, 120);
  EXPECT_EQ(rc, 0) << log;
  EXPECT_TRUE(contains(log, "4294967297 CPU threads requested")) << log;  // not narrowed to 1
}

// ---- profile and analyze honour model.backend / model.dtype -----------------------------------------------------

TEST_F(SharedMachine, ProfileAndAnalyzeHonourTheConfiguredBackend) {
  std::string cfg = config("[signal]\nplugin = \"depth\"\n");
  cfg.replace(cfg.find("threads = 1\n"), 12, "threads = 1\ndtype = \"bf16\"\n");
  write("bf16.toml", cfg);
  std::string cuda = config("[signal]\nplugin = \"depth\"\n");
  cuda.replace(cuda.find("threads = 1\n"), 12, "threads = 1\nbackend = \"cuda\"\n");
  write("cuda.toml", cuda);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"profile", "bf16.toml", "--out", "p.json"},
        std::vector<std::string>{"analyze", "bf16.toml", "--out", "a", "--fractions", "0.5"}}) {
    const auto [rc, log] = cli(args, dir);
    EXPECT_EQ(rc, 2) << args[0] << ": " << log;
    EXPECT_TRUE(contains(log, "bf16.toml [model]: model.dtype = bf16: the cpu backend computes in f32 only")) << log;
  }
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"profile", "cuda.toml", "--out", "p.json"},
        std::vector<std::string>{"analyze", "cuda.toml", "--out", "a", "--fractions", "0.5"}}) {
    const auto [rc, log] = cli(args, dir);
    if (rc == 0) continue;  // a machine with a CUDA device runs it there
    EXPECT_EQ(rc, 2) << args[0] << ": " << log;
    EXPECT_TRUE(contains(log, "cuda.toml [model]: model.backend = cuda: ")) << log;
  }
}

}  // namespace
