// Task: a move-only callable run once, the unit of work posted between threads.
//
// Small captures (up to kInlineSize bytes) live inside the Task with no heap
// allocation; larger ones are boxed. type() names the callable held, so that
// a reactor can say which task held it (runtime/loop_stats.h).
#pragma once

#include <cstddef>
#include <new>
#include <type_traits>
#include <typeinfo>
#include <utility>

namespace magnetar::runtime {

class Task {
 public:
  static constexpr size_t kInlineSize = 48;

  Task() = default;
  template <typename F, typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, Task>>>
  Task(F&& f) {  // NOLINT: implicit so lambdas convert
    using Fn = std::decay_t<F>;
    if constexpr (sizeof(Fn) <= kInlineSize && alignof(Fn) <= alignof(std::max_align_t) &&
                  std::is_nothrow_move_constructible_v<Fn>) {
      new (storage_) Fn(std::forward<F>(f));
      ops_ = &inline_ops<Fn>;
    } else {
      *reinterpret_cast<Fn**>(storage_) = new Fn(std::forward<F>(f));
      ops_ = &boxed_ops<Fn>;
    }
  }
  Task(Task&& o) noexcept : ops_(o.ops_) {
    if (ops_) {
      ops_->move(o.storage_, storage_);
      o.ops_ = nullptr;
    }
  }
  Task& operator=(Task&& o) noexcept {
    if (this != &o) {
      reset();
      ops_ = o.ops_;
      if (ops_) {
        ops_->move(o.storage_, storage_);
        o.ops_ = nullptr;
      }
    }
    return *this;
  }
  Task(const Task&) = delete;
  Task& operator=(const Task&) = delete;
  ~Task() { reset(); }

  explicit operator bool() const { return ops_ != nullptr; }
  // The type of the callable held; typeid(void) when empty.
  const std::type_info& type() const { return ops_ != nullptr ? *ops_->type : typeid(void); }
  // REQUIRES: a callable is held.
  void operator()() { ops_->call(storage_); }
  void reset() {
    if (ops_) {
      ops_->destroy(storage_);
      ops_ = nullptr;
    }
  }

 private:
  struct Ops {
    void (*call)(void*);
    void (*move)(void* from, void* to);
    void (*destroy)(void*);
    const std::type_info* type;
  };
  template <typename Fn>
  static constexpr Ops inline_ops = {
      [](void* s) { (*static_cast<Fn*>(s))(); },
      [](void* from, void* to) {
        new (to) Fn(std::move(*static_cast<Fn*>(from)));
        static_cast<Fn*>(from)->~Fn();
      },
      [](void* s) { static_cast<Fn*>(s)->~Fn(); },
      &typeid(Fn),
  };
  template <typename Fn>
  static constexpr Ops boxed_ops = {
      [](void* s) { (**static_cast<Fn**>(s))(); },
      [](void* from, void* to) { *static_cast<Fn**>(to) = *static_cast<Fn**>(from); },
      [](void* s) { delete *static_cast<Fn**>(s); },
      &typeid(Fn),
  };

  alignas(std::max_align_t) unsigned char storage_[kInlineSize];
  const Ops* ops_ = nullptr;
};

}  // namespace magnetar::runtime
