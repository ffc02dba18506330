#include "process_runner.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace tessera::isolation_test {

std::string ProcessResult::value(const std::string& key) const {
  std::istringstream lines(out);
  std::string line, found;
  while (std::getline(lines, line)) {
    if (line.compare(0, key.size() + 1, key + "=") == 0) found = line.substr(key.size() + 1);
  }
  return found;
}

long long ProcessResult::num(const std::string& key) const {
  std::string v = value(key);
  INFO("key " << key << " in output:\n" << out << "\nstderr:\n" << err);
  REQUIRE_FALSE(v.empty());
  return std::strtoll(v.c_str(), nullptr, 10);
}

int ProcessResult::errCount(const std::string& needle) const {
  int n = 0;
  for (std::size_t pos = err.find(needle); pos != std::string::npos; pos = err.find(needle, pos + 1)) ++n;
  return n;
}

Child::Child(const std::vector<std::string>& argv, const Env& env) {
  int in[2], out[2], err[2];
  REQUIRE(pipe2(in, O_CLOEXEC) == 0);
  REQUIRE(pipe2(out, O_CLOEXEC) == 0);
  REQUIRE(pipe2(err, O_CLOEXEC) == 0);
  std::vector<std::string> envStrings;
  for (const auto& [k, v] : env) envStrings.push_back(k + "=" + v);
  std::vector<char*> args, envp;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (auto& e : envStrings) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_ = fork();
  REQUIRE(pid_ >= 0);
  if (pid_ == 0) {
    dup2(in[0], STDIN_FILENO);
    dup2(out[1], STDOUT_FILENO);
    dup2(err[1], STDERR_FILENO);
    execve(args[0], args.data(), envp.data());
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  close(err[1]);
  in_ = in[1];
  out_ = out[0];
  err_ = err[0];
}

Child::~Child() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  for (int fd : {in_, out_, err_}) {
    if (fd >= 0) close(fd);
  }
}

bool Child::pump() {
  pollfd fds[2];
  int n = 0;
  if (out_ >= 0) fds[n++] = {out_, POLLIN, 0};
  if (err_ >= 0) fds[n++] = {err_, POLLIN, 0};
  if (n == 0) return false;
  if (poll(fds, static_cast<nfds_t>(n), -1) < 0) return errno == EINTR;
  for (int i = 0; i < n; ++i) {
    if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
    char buf[4096];
    ssize_t got = read(fds[i].fd, buf, sizeof buf);
    bool isOut = fds[i].fd == out_;
    if (got > 0) {
      (isOut ? result_.out : result_.err).append(buf, static_cast<std::size_t>(got));
    } else if (got == 0 || errno != EINTR) {
      close(fds[i].fd);
      (isOut ? out_ : err_) = -1;
    }
  }
  return true;
}

bool Child::waitForOutput(const std::string& needle) {
  while (result_.out.find(needle) == std::string::npos) {
    if (out_ < 0 || !pump()) return result_.out.find(needle) != std::string::npos;
  }
  return true;
}

void Child::closeStdin() {
  if (in_ >= 0) close(in_);
  in_ = -1;
}

void Child::kill(int sig) { ::kill(pid_, sig); }

ProcessResult Child::wait() {
  closeStdin();
  while (pump()) {
  }
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  if (WIFEXITED(status)) result_.exitCode = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result_.signal = WTERMSIG(status);
  return result_;
}

ProcessResult run(const std::vector<std::string>& argv, const Env& env) {
  Child child(argv, env);
  return child.wait();
}

TempDir::TempDir() {
  char pattern[] = "/tmp/tessera-iso-XXXXXX";
  REQUIRE(mkdtemp(pattern) != nullptr);
  dir_ = pattern;
}

TempDir::~TempDir() {
  if (DIR* d = opendir(dir_.c_str())) {
    while (dirent* e = readdir(d)) {
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) unlink(path(e->d_name).c_str());
    }
    closedir(d);
  }
  rmdir(dir_.c_str());
}

}  // namespace tessera::isolation_test
