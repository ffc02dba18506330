#include "tessera/framework/helper_thread.h"

#include "tessera/api/result.h"

namespace tessera::framework {

HelperThread::HelperThread() : thread_([this] { loop(); }) {}

HelperThread::~HelperThread() {
  {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return !busy_; });
    stop_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void HelperThread::start(std::function<void()> work) {
  {
    std::lock_guard lock(mutex_);
    TESSERA_ASSERT(!busy_);
    work_ = std::move(work);
    busy_ = true;
  }
  changed_.notify_all();
}

void HelperThread::wait() {
  std::exception_ptr error;
  {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return !busy_; });
    std::swap(error, error_);
  }
  if (error) std::rethrow_exception(error);
}

void HelperThread::loop() {
  for (;;) {
    std::function<void()> work;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return busy_ || stop_; });
      if (!busy_) return;  // stopped
      work = std::move(work_);
    }
    std::exception_ptr error;
    try {
      work();
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard lock(mutex_);
      error_ = error;
      busy_ = false;
    }
    changed_.notify_all();
  }
}

}  // namespace tessera::framework
