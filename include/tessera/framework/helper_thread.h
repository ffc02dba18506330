// One background thread that runs one piece of a session's work at a time beside the scheduling
// thread (issue 16: the session build splits its jobs between the two; the daemon's machine has
// at least two cores, and a cycle otherwise leaves the second one idle).
#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace tessera::framework {

class HelperThread {
 public:
  HelperThread();
  /// Waits for the piece in hand, then stops the thread.
  ~HelperThread();
  HelperThread(const HelperThread&) = delete;
  HelperThread& operator=(const HelperThread&) = delete;

  /// Hands `work` to the thread; the caller must wait() before the next start().
  void start(std::function<void()> work);
  /// Returns once the piece handed over has run; rethrows what it threw.
  void wait();

 private:
  void loop();

  std::mutex mutex_;
  std::condition_variable changed_;
  std::function<void()> work_;
  bool busy_ = false, stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;  ///< last: started once the fields above are
};

}  // namespace tessera::framework
