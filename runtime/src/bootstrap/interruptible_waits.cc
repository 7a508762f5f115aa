#include "bootstrap/interruptible_waits.h"

#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <stdexcept>

namespace khorovod {

void InterruptibleWaits::Interrupt() {
  std::vector<std::function<void()>> callbacks;
  {
    MutexLock lock(mu_);
    interrupted_.store(true, std::memory_order_release);
    for (gloo::transport::UnboundBuffer* b : buffers_) {
      b->abortWaitSend();
      b->abortWaitRecv();
    }
    callbacks.swap(on_interrupt_);
  }
  for (auto& fn : callbacks) fn();
}

void InterruptibleWaits::OnInterrupt(std::function<void()> fn) {
  {
    MutexLock lock(mu_);
    if (!interrupted()) {
      on_interrupt_.push_back(std::move(fn));
      return;
    }
  }
  fn();
}

bool InterruptibleWaits::Register(gloo::transport::UnboundBuffer* buffer) {
  MutexLock lock(mu_);
  if (interrupted()) return false;
  buffers_.insert(buffer);
  return true;
}

void InterruptibleWaits::Unregister(gloo::transport::UnboundBuffer* buffer) {
  MutexLock lock(mu_);
  buffers_.erase(buffer);
}

WaitScope::WaitScope(gloo::Context& context,
                     std::initializer_list<gloo::transport::UnboundBuffer*> buffers)
    : waits_(dynamic_cast<InterruptibleWaits*>(&context)) {
  for (gloo::transport::UnboundBuffer* b : buffers) Add(b);
}

WaitScope::~WaitScope() {
  if (waits_ == nullptr) return;
  for (gloo::transport::UnboundBuffer* b : mine_) waits_->Unregister(b);
}

void WaitScope::Add(gloo::transport::UnboundBuffer* buffer) {
  if (waits_ == nullptr) return;
  if (waits_->Register(buffer)) mine_.insert(buffer);
}

void WaitScope::WaitRecv(gloo::transport::UnboundBuffer& buffer,
                         std::chrono::milliseconds timeout) const {
  if (buffer.waitRecv(nullptr, timeout)) return;
  Check();
  throw std::runtime_error("a receive was aborted");
}

void WaitScope::WaitSend(gloo::transport::UnboundBuffer& buffer,
                         std::chrono::milliseconds timeout) const {
  if (buffer.waitSend(nullptr, timeout)) return;
  Check();
  throw std::runtime_error("a send was aborted");
}

void WaitScope::Check() const {
  if (waits_ != nullptr && waits_->interrupted()) {
    throw std::runtime_error("the generation's connections were abandoned while waiting");
  }
}

}  // namespace khorovod
