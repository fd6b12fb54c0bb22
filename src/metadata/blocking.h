// Blocking forms of the Store calls, for threads that may wait: main at
// start-up, worker threads that run admin operations, tests.
//
// REQUIRES: the caller is not a reactor (it would stall its loop) and not the
// store's own thread (it would wait for itself forever).
#pragma once

#include <string>
#include <vector>

#include "metadata/store.h"

namespace magnetar::metadata::blocking {

common::Result<Record> get(Store& store, std::string key);
common::Result<Stat> put(Store& store, std::string key, std::string value, PutOptions options = {});
common::Status del(Store& store, std::string key, int64_t expected_version = kAnyVersion);
common::Result<std::vector<std::string>> list_children(Store& store, std::string key);
common::Result<SessionId> open_session(Store& store);
common::Status close_session(Store& store, SessionId session);

}  // namespace magnetar::metadata::blocking
