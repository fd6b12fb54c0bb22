// ForwardingStore: a metadata::Store that hands every call to another. A
// unit test derives from it and overrides the calls it holds back or
// counts (a read slow to answer, as in a cluster whose reads go to the
// leader), leaving the rest as they are.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "metadata/store.h"

namespace magnetar::test_util {

class ForwardingStore : public metadata::Store {
 public:
  explicit ForwardingStore(metadata::Store& inner) : inner_(inner) {}

  void get(std::string key, metadata::Callback<common::Result<metadata::Record>> done) override {
    inner_.get(std::move(key), std::move(done));
  }
  void put(std::string key, std::string value, metadata::PutOptions options,
           metadata::Callback<common::Result<metadata::Stat>> done) override {
    inner_.put(std::move(key), std::move(value), options, std::move(done));
  }
  void del(std::string key, int64_t expected_version, metadata::StatusCallback done) override {
    inner_.del(std::move(key), expected_version, std::move(done));
  }
  void list_children(std::string key,
                     metadata::Callback<common::Result<std::vector<std::string>>> done) override {
    inner_.list_children(std::move(key), std::move(done));
  }
  common::Result<metadata::WatchId> watch(std::string prefix, metadata::WatchCallback fn) override {
    return inner_.watch(std::move(prefix), std::move(fn));
  }
  void unwatch(metadata::WatchId id) override { inner_.unwatch(id); }
  void open_session(metadata::Callback<common::Result<metadata::SessionId>> done) override {
    inner_.open_session(std::move(done));
  }
  void close_session(metadata::SessionId session, metadata::StatusCallback done) override {
    inner_.close_session(session, std::move(done));
  }

 protected:
  metadata::Store& inner_;
};

}  // namespace magnetar::test_util
