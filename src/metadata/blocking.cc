#include "metadata/blocking.h"

#include <future>
#include <memory>

namespace magnetar::metadata::blocking {

using common::Result;
using common::Status;

namespace {

// Runs `start(callback)` and waits for the callback's value. The promise is
// shared because Store callbacks are copyable std::functions.
template <typename T, typename Start>
T wait_for(Start&& start) {
  auto done = std::make_shared<std::promise<T>>();
  auto fut = done->get_future();
  start([done](T v) { done->set_value(std::move(v)); });
  return fut.get();
}

}  // namespace

Result<Record> get(Store& store, std::string key) {
  return wait_for<Result<Record>>([&](auto cb) { store.get(std::move(key), std::move(cb)); });
}

Result<Stat> put(Store& store, std::string key, std::string value, PutOptions options) {
  return wait_for<Result<Stat>>(
      [&](auto cb) { store.put(std::move(key), std::move(value), options, std::move(cb)); });
}

Status del(Store& store, std::string key, int64_t expected_version) {
  return wait_for<Status>([&](auto cb) { store.del(std::move(key), expected_version, std::move(cb)); });
}

Result<std::vector<std::string>> list_children(Store& store, std::string key) {
  return wait_for<Result<std::vector<std::string>>>(
      [&](auto cb) { store.list_children(std::move(key), std::move(cb)); });
}

Result<SessionId> open_session(Store& store) {
  return wait_for<Result<SessionId>>([&](auto cb) { store.open_session(std::move(cb)); });
}

Status close_session(Store& store, SessionId session) {
  return wait_for<Status>([&](auto cb) { store.close_session(session, std::move(cb)); });
}

}  // namespace magnetar::metadata::blocking
