#include "cluster/cluster_store.h"

#include <utility>

#include "cluster/rpc_generated.h"
#include "cluster/rpc_records.h"
#include "common/clock.h"
#include "common/logging.h"
#include "metadata/watchers.h"

namespace magnetar::cluster {

using common::ErrorCode;
using common::Result;
using common::Status;

namespace {

constexpr uint16_t kMaxRpcFormat = 1;

Status status_from_wire(uint8_t code, std::string message) {
  if (code == 0) return Status::ok();
  if (code > static_cast<uint8_t>(ErrorCode::kWrongNode)) return Status::internal(std::move(message));
  return Status(static_cast<ErrorCode>(code), std::move(message));
}

}  // namespace

std::string encode_metadata_call(const MetadataCall& call) {
  flatbuffers::FlatBufferBuilder b(96 + call.key.size() + call.value.size());
  auto key = b.CreateString(call.key);
  auto value = b.CreateVector(reinterpret_cast<const uint8_t*>(call.value.data()), call.value.size());
  fb::MetadataCallBuilder m(b);
  m.add_kind(static_cast<fb::MetadataCallKind>(call.kind));
  m.add_key(key);
  m.add_value(value);
  m.add_expected_version(call.expected_version);
  m.add_session(call.session);
  b.Finish(m.Finish());
  return record_bytes(b);
}

Result<MetadataCall> decode_metadata_call(std::string_view bytes) {
  const auto* m = verified_record<fb::MetadataCall>(bytes);
  if (m == nullptr) return Status::corruption("a metadata call fails verification");
  if (m->format() > kMaxRpcFormat) return Status::corruption("a metadata call is newer than this binary reads");
  if (m->kind() > fb::MetadataCallKind::MAX) return Status::corruption("a metadata call of unknown kind");
  MetadataCall call;
  call.kind = static_cast<MetadataCall::Kind>(m->kind());
  if (m->key()) call.key = m->key()->str();
  if (m->value()) call.value.assign(reinterpret_cast<const char*>(m->value()->data()), m->value()->size());
  call.expected_version = m->expected_version();
  call.session = m->session();
  return call;
}

std::string encode_metadata_answer(const MetadataAnswer& answer) {
  flatbuffers::FlatBufferBuilder b(128 + answer.value.size());
  auto message = b.CreateString(answer.status.message());
  auto value = b.CreateVector(reinterpret_cast<const uint8_t*>(answer.value.data()), answer.value.size());
  auto children = b.CreateVectorOfStrings(answer.children);
  fb::MetadataReplyBuilder r(b);
  r.add_code(static_cast<uint8_t>(answer.status.code()));
  r.add_message(message);
  r.add_version(answer.stat.version);
  r.add_created_ms(answer.stat.created_ms);
  r.add_modified_ms(answer.stat.modified_ms);
  r.add_owner(answer.stat.session);
  r.add_value(value);
  r.add_children(children);
  r.add_session(answer.session);
  b.Finish(r.Finish());
  return record_bytes(b);
}

Result<MetadataAnswer> decode_metadata_answer(std::string_view bytes) {
  const auto* r = verified_record<fb::MetadataReply>(bytes);
  if (r == nullptr) return Status::corruption("a metadata reply fails verification");
  if (r->format() > kMaxRpcFormat) return Status::corruption("a metadata reply is newer than this binary reads");
  MetadataAnswer answer;
  answer.status = status_from_wire(r->code(), r->message() ? r->message()->str() : "");
  answer.stat.version = r->version();
  answer.stat.created_ms = r->created_ms();
  answer.stat.modified_ms = r->modified_ms();
  answer.stat.session = r->owner();
  if (r->value()) answer.value.assign(reinterpret_cast<const char*>(r->value()->data()), r->value()->size());
  if (r->children()) {
    for (const auto* child : *r->children()) answer.children.push_back(child->str());
  }
  answer.session = r->session();
  return answer;
}

ClusterStore::ClusterStore(runtime::Reactor& reactor, Consensus& consensus, StoreMachine& machine, RaftStore& local,
                           RpcClient& rpc, std::function<bool()> lease_valid)
    : reactor_(reactor),
      consensus_(consensus),
      machine_(machine),
      local_(local),
      rpc_(rpc),
      lease_valid_(std::move(lease_valid)),
      lease_waits_(&common::MetricsRegistry::global().counter(
          "magnetar_cluster_lease_waits_total",
          "Metadata writes that waited because this member's lease had lapsed (it was paused or cut off)")) {}

void ClusterStore::submit(MetadataCall call, Answer done) {
  runtime::Reactor* home = runtime::Reactor::current();
  Answer answer = [home, done = std::move(done)](MetadataAnswer a) mutable {
    metadata::deliver(home, [done = std::move(done), a = std::move(a)]() mutable { done(std::move(a)); });
  };
  if (stopping_) return answer(MetadataAnswer::of(Status::unavailable("metadata: shutting down")));
  int64_t deadline = common::monotonic_ms() + kCallDeadlineMs;
  runtime::Task task([this, call = std::move(call), deadline, answer]() mutable {
    execute(std::move(call), deadline, std::move(answer));
  });
  Status st = reactor_.try_post(task);
  if (!st.is_ok()) {
    // Not queued: answer here (the caller's own thread) rather than lose it.
    answer(MetadataAnswer::of(st.code() == ErrorCode::kResourceExhausted
                              ? Status::resource_exhausted("metadata: too many calls waiting for the cluster thread")
                              : Status::unavailable("metadata: shutting down")));
  }
}

void ClusterStore::execute(MetadataCall call, int64_t deadline_ms, Answer done) {
  if (stopping_) return done(MetadataAnswer::of(Status::unavailable("metadata: shutting down")));
  if (call.is_write() && lease_valid_ && !lease_valid_()) {
    // A member that was paused or cut off may act on what it knew before:
    // nothing it writes goes out until the cluster has heard from it again.
    if (!lease_lapsed_) {
      lease_lapsed_ = true;
      MLOG_WARN("cluster: this member's lease has lapsed (was it paused or cut off?): metadata writes wait "
                "until the cluster renews it");
    }
    lease_waits_->inc();
    return retry_later(std::move(call), deadline_ms, std::move(done),
                       Status::unavailable("metadata: this member's lease has lapsed and was not renewed in time"));
  }
  if (call.is_write()) lease_lapsed_ = false;
  if (consensus_.is_leader()) {
    run_local(call, [this, call, deadline_ms, done](MetadataAnswer answer) mutable {
      // Leadership moved between the check and the call: nothing changed.
      if (answer.status.code() == ErrorCode::kUnavailable && !consensus_.is_leader()) {
        return retry_later(std::move(call), deadline_ms, std::move(done), answer.status);
      }
      done(std::move(answer));
    });
    return;
  }
  auto leader = consensus_.leader();
  if (!leader || leader->id == consensus_.id()) {
    return retry_later(std::move(call), deadline_ms, std::move(done),
                       Status::unavailable("metadata: the cluster has no leader (is a majority of voters up?)"));
  }
  std::string payload = encode_metadata_call(call);
  bool write = call.is_write();
  unsigned timeout = static_cast<unsigned>(std::max<int64_t>(deadline_ms - common::monotonic_ms(), 100));
  rpc_.call(leader->address, rpc::Method::kMetadata, std::move(payload),
            [this, call = std::move(call), deadline_ms, done, write](Result<std::string> reply) mutable {
              if (!reply.is_ok()) {
                if (reply.status().code() == ErrorCode::kTimeout && write) {
                  return done(MetadataAnswer::of(Status::fenced("metadata: " + reply.status().message())));
                }
                return retry_later(std::move(call), deadline_ms, std::move(done), reply.status());
              }
              auto answer = decode_metadata_answer(*reply);
              if (!answer.is_ok()) return done(MetadataAnswer::of(answer.status()));
              if (answer->status.code() == ErrorCode::kUnavailable) {
                return retry_later(std::move(call), deadline_ms, std::move(done), answer->status);
              }
              done(std::move(*answer));
            },
            timeout);
}

void ClusterStore::retry_later(MetadataCall call, int64_t deadline_ms, Answer done, Status why) {
  if (stopping_ || common::monotonic_ms() + kRetryDelayMs >= deadline_ms || waiting_.size() >= kMaxWaiting) {
    return done(MetadataAnswer::of(Status::unavailable(why.message())));
  }
  waiting_.push_back(Waiting{std::move(call), deadline_ms, std::move(done), std::move(why)});
  if (!retry_timer_) retry_timer_ = std::make_unique<runtime::Timer>(reactor_);
  if (retry_timer_->active()) return;
  retry_timer_->once(std::chrono::milliseconds(kRetryDelayMs), [this]() {
    auto waiting = std::move(waiting_);
    waiting_.clear();
    for (auto& w : waiting) execute(std::move(w.call), w.deadline_ms, std::move(w.done));
  });
}

void ClusterStore::close() {
  stopping_ = true;
  retry_timer_.reset();
  auto waiting = std::move(waiting_);
  waiting_.clear();
  for (auto& w : waiting) w.done(MetadataAnswer::of(Status::unavailable("metadata: shutting down")));
}

void ClusterStore::run_local(const MetadataCall& call, std::function<void(MetadataAnswer)> done) {
  switch (call.kind) {
    case MetadataCall::Kind::kGet:
      return local_.get(call.key, [done](Result<metadata::Record> record) {
        MetadataAnswer a;
        if (!record.is_ok()) {
          a.status = record.status();
        } else {
          a.stat = record->stat;
          a.value = std::move(record->value);
        }
        done(std::move(a));
      });
    case MetadataCall::Kind::kPut:
      return local_.put(call.key, call.value, metadata::PutOptions{call.expected_version, call.session},
                        [done](Result<metadata::Stat> stat) {
                          MetadataAnswer a;
                          if (stat.is_ok()) a.stat = *stat; else a.status = stat.status();
                          done(std::move(a));
                        });
    case MetadataCall::Kind::kDelete:
      return local_.del(call.key, call.expected_version, [done](Status st) { done(MetadataAnswer::of(st)); });
    case MetadataCall::Kind::kListChildren:
      return local_.list_children(call.key, [done](Result<std::vector<std::string>> children) {
        MetadataAnswer a;
        if (children.is_ok()) a.children = std::move(*children); else a.status = children.status();
        done(std::move(a));
      });
    case MetadataCall::Kind::kOpenSession:
      return local_.open_session([done](Result<metadata::SessionId> session) {
        MetadataAnswer a;
        if (session.is_ok()) a.session = *session; else a.status = session.status();
        done(std::move(a));
      });
    case MetadataCall::Kind::kCloseSession:
      return local_.close_session(call.session, [done](Status st) { done(MetadataAnswer::of(st)); });
  }
  done(MetadataAnswer::of(Status::invalid_argument("unknown metadata call")));
}

void ClusterStore::get(std::string key, metadata::Callback<Result<metadata::Record>> done) {
  MetadataCall call = MetadataCall::of(MetadataCall::Kind::kGet, key);
  submit(std::move(call), [key, done = std::move(done)](MetadataAnswer a) {
    if (!a.status.is_ok()) return done(a.status);
    done(metadata::Record{key, std::move(a.value), a.stat});
  });
}

void ClusterStore::put(std::string key, std::string value, metadata::PutOptions options,
                       metadata::Callback<Result<metadata::Stat>> done) {
  MetadataCall call = MetadataCall::of(MetadataCall::Kind::kPut, std::move(key));
  call.value = std::move(value);
  call.expected_version = options.expected_version;
  call.session = options.session;
  submit(std::move(call), [done = std::move(done)](MetadataAnswer a) {
    if (!a.status.is_ok()) return done(a.status);
    done(a.stat);
  });
}

void ClusterStore::del(std::string key, int64_t expected_version, metadata::StatusCallback done) {
  MetadataCall call = MetadataCall::of(MetadataCall::Kind::kDelete, std::move(key));
  call.expected_version = expected_version;
  submit(std::move(call), [done = std::move(done)](MetadataAnswer a) { done(a.status); });
}

void ClusterStore::list_children(std::string key, metadata::Callback<Result<std::vector<std::string>>> done) {
  MetadataCall call = MetadataCall::of(MetadataCall::Kind::kListChildren, std::move(key));
  submit(std::move(call), [done = std::move(done)](MetadataAnswer a) {
    if (!a.status.is_ok()) return done(a.status);
    done(std::move(a.children));
  });
}

Result<metadata::WatchId> ClusterStore::watch(std::string prefix, metadata::WatchCallback fn) {
  return machine_.watchers().watch(std::move(prefix), std::move(fn));
}

void ClusterStore::unwatch(metadata::WatchId id) { machine_.watchers().unwatch(id); }

void ClusterStore::open_session(metadata::Callback<Result<metadata::SessionId>> done) {
  submit(MetadataCall::of(MetadataCall::Kind::kOpenSession), [done = std::move(done)](MetadataAnswer a) {
    if (!a.status.is_ok()) return done(a.status);
    done(a.session);
  });
}

void ClusterStore::close_session(metadata::SessionId session, metadata::StatusCallback done) {
  MetadataCall call = MetadataCall::of(MetadataCall::Kind::kCloseSession);
  call.session = session;
  submit(std::move(call), [done = std::move(done)](MetadataAnswer a) { done(a.status); });
}

}  // namespace magnetar::cluster
