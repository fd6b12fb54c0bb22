// Result<T>: a value or an error Status. Never both, never neither.
#pragma once

#include <cassert>
#include <optional>
#include <utility>

#include "common/status.h"

namespace magnetar::common {

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {  // NOLINT
    assert(!status_.is_ok() && "Result built from an ok Status carries no value");
  }

  bool is_ok() const { return value_.has_value(); }
  explicit operator bool() const { return is_ok(); }
  // REQUIRES: !is_ok().
  const Status& status() const { return status_; }

  // REQUIRES: is_ok().
  T& value() & { assert(is_ok()); return *value_; }
  const T& value() const& { assert(is_ok()); return *value_; }
  T&& value() && { assert(is_ok()); return std::move(*value_); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  T value_or(T fallback) const& { return is_ok() ? *value_ : std::move(fallback); }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace magnetar::common

// Returns early from the enclosing function when `expr` is an error Status.
#define MAGNETAR_RETURN_IF_ERROR(expr)                          \
  do {                                                          \
    ::magnetar::common::Status _st = (expr);                    \
    if (!_st.is_ok()) return _st;                               \
  } while (0)
