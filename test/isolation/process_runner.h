#pragma once
// Runs a test program in a child process (fork + execve + waitpid), with an explicit
// environment, capturing stdout and stderr. No sleeps: waiting is always on a pipe or waitpid.

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

namespace tessera::isolation_test {

using Env = std::map<std::string, std::string>;

struct ProcessResult {
  int exitCode = -1;  ///< -1 when killed by a signal
  int signal = 0;
  std::string out;
  std::string err;

  /// Value of the last `key=value` line on stdout ("" if absent).
  std::string value(const std::string& key) const;
  /// Numeric value of `key`; fails the current test if absent.
  long long num(const std::string& key) const;
  /// Number of occurrences of `needle` in stderr.
  int errCount(const std::string& needle) const;
};

class Child {
 public:
  /// Starts `argv` with exactly `env` (nothing inherited). stdin is a pipe held by the parent.
  Child(const std::vector<std::string>& argv, const Env& env);
  ~Child();
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  /// Reads output until stdout contains `needle` or the child closes it. True if found.
  bool waitForOutput(const std::string& needle);
  /// Closes the child's stdin (a start signal for programs blocked reading it).
  void closeStdin();
  void kill(int sig);
  /// Closes stdin, drains output, reaps the child.
  ProcessResult wait();
  pid_t pid() const { return pid_; }

 private:
  bool pump();  // one poll round; false once both outputs are closed
  pid_t pid_ = -1;
  int in_ = -1, out_ = -1, err_ = -1;
  ProcessResult result_;
};

ProcessResult run(const std::vector<std::string>& argv, const Env& env);

/// A fresh directory under /tmp, removed with its files on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  std::string path(const std::string& name) const { return dir_ + "/" + name; }

 private:
  std::string dir_;
};

}  // namespace tessera::isolation_test
