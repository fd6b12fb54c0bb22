// Subscriptions of a topic on Pulsar's layout, for both domains, under
// /admin/v2/{domain}/{tenant}/{namespace}/{topic}/:
//   GET    subscriptions
//   PUT    subscription/{sub}[?messageId=earliest|latest]   body: optional "earliest",
//          "latest" or {"ledgerId": L, "entryId": E} (the first message to deliver)
//   DELETE subscription/{sub}[?force=true]
//   POST   subscription/{sub}/skip_all
//   POST   subscription/{sub}/skip/{n}
//   POST   subscription/{sub}/resetcursor/{timestamp}
//   POST   subscription/{sub}/resetcursor      body: {"ledgerId": L, "entryId": E[, "isExcluded": true]}
//   POST   subscription/{sub}/expireMessages/{seconds}
//   POST   all_subscription/expireMessages/{seconds}
//   GET    subscription/{sub}/position/{n}     (peek: the payload, metadata in X-Pulsar-* headers)
//   GET    ledger/{ledgerId}/entry/{entryId}   (getMessageById: the same answer for one message id)
// Moving a cursor (skip, reset, expiry, peek) needs a persistent topic: a
// non-persistent one answers 405.
#include <chrono>
#include <ctime>
#include <optional>

#include <fmt/format.h>

#include "common/clock.h"
#include "common/join.h"
#include "admin/handlers.h"
#include "admin/handlers/tenancy_common.h"
#include "admin/handlers/topic_common.h"
#include "admin/handlers/topic_stats_json.h"
#include "ledger/managed_ledger.h"
#include "protocol/pulsar/frame.h"

namespace magnetar::admin {

using broker::Topic;
using broker::TopicDomain;
using common::Result;
using common::Status;
using ledger::Position;

namespace {

// A non-negative integer path segment, or InvalidArgument naming `what`.
Result<int64_t> count_param(const std::string& s, std::string_view what) {
  int64_t v = 0;
  if (s.empty() || s.size() > 18 || s.find_first_not_of("0123456789") != std::string::npos) {
    return Status::invalid_argument(fmt::format("{} must be a non-negative integer, not '{}'", what, s));
  }
  for (char c : s) v = v * 10 + (c - '0');
  return v;
}

ledger::ManagedLedger* persistent_log(Topic& t) { return dynamic_cast<ledger::ManagedLedger*>(&t.log()); }

HttpResponse not_persistent() {
  return HttpResponse::error(405, "not served for non-persistent topics: their subscriptions keep no backlog");
}

HttpResponse no_subscription(const Topic& t, const std::string& sub) {
  return HttpResponse::error(404, "Subscription " + sub + " not found on " + t.name().to_string());
}

// Runs `work` with the topic and its subscription `sub` (404 when missing).
void on_subscription(TopicServices& s, TopicDomain d, HttpRequest& req, Responder respond,
                     std::function<void(Topic&, broker::Subscription&, SharedResponder)> work) {
  on_existing_topic(s, d, req, std::move(respond),
                    [sub = req.param("subscription"), work = std::move(work)](Topic& t, SharedResponder r) {
                      broker::Subscription* found = t.subscription(sub);
                      if (found == nullptr) return (*r)(no_subscription(t, sub));
                      work(t, *found, r);
                    });
}

// The n-th entry (1-based) after the mark-delete position that is not
// acknowledged, if the log holds that many.
std::optional<Position> nth_unacknowledged(const ledger::Cursor& c, const ledger::LedgerChain& chain, int64_t n) {
  std::optional<Position> p;
  Position from = c.mark_delete_position();
  for (int64_t i = 0; i < n; ++i) {
    p = c.next_unacknowledged(from, chain);
    if (!p) return std::nullopt;
    from = *p;
  }
  return p;
}

// Completes once the log's cursors are persisted (at once when nothing is).
void settle(Topic& t, ledger::Callback<Status> done) {
  if (auto* ml = persistent_log(t)) return ml->flush_cursors(std::move(done));
  done(Status::ok());
}

// Pulsar's answer to a peek: the message payload as the body, its metadata
// in X-Pulsar-* headers. An entry in Pulsar's format (what Pulsar producers
// store) is parsed; any other entry is answered whole, with the broker's
// header.
HttpResponse peeked_message(const ledger::LedgerEntry& e) {
  HttpResponse out;
  out.status = 200;
  out.content_type = "application/octet-stream";
  out.headers.emplace_back("X-Pulsar-Message-ID", position_string(e.position));
  protocol::pulsar::proto::MessageMetadata md;
  common::Slice payload;
  if (protocol::pulsar::parse_entry(e.payload, false, &md, &payload).is_ok()) {
    out.body = std::string(reinterpret_cast<const char*>(payload.data()), payload.size());
    Json properties = Json::object();
    for (const auto& kv : md.properties()) properties[kv.key()] = kv.value();
    if (!properties.empty()) out.headers.emplace_back("X-Pulsar-PROPERTY", properties.dump());
    out.headers.emplace_back("X-Pulsar-publish-time", iso_time(static_cast<int64_t>(md.publish_time())));
    if (md.has_event_time() && md.event_time() != 0) {
      out.headers.emplace_back("X-Pulsar-event-time", iso_time(static_cast<int64_t>(md.event_time())));
    }
    if (md.has_partition_key()) out.headers.emplace_back("X-Pulsar-Key", md.partition_key());
    out.headers.emplace_back("X-Pulsar-producer-name", md.producer_name());
    out.headers.emplace_back("X-Pulsar-sequence-id", std::to_string(md.sequence_id()));
    if (md.has_num_messages_in_batch()) {
      out.headers.emplace_back("X-Pulsar-num-batch-message", std::to_string(md.num_messages_in_batch()));
    }
    return out;
  }
  out.body = std::string(reinterpret_cast<const char*>(e.payload.data()), e.payload.size());
  out.headers.emplace_back("X-Pulsar-publish-time", iso_time(e.header.publish_time_ms));
  out.headers.emplace_back("X-Pulsar-producer-name", e.header.producer);
  out.headers.emplace_back("X-Pulsar-sequence-id", std::to_string(e.header.sequence_id));
  if (e.header.messages > 1) out.headers.emplace_back("X-Pulsar-num-batch-message", std::to_string(e.header.messages));
  return out;
}

// Where a new subscription starts: a body or ?messageId= of "earliest" /
// "latest", or the message {"ledgerId", "entryId"} to deliver first.
struct Start {
  broker::InitialPosition initial = broker::InitialPosition::kLatest;
  std::optional<Position> first;
};

Result<Start> parse_start(const HttpRequest& req) {
  Start start;
  Json j;
  if (auto it = req.query.find("messageId"); it != req.query.end()) {
    j = it->second;
  } else if (req.body.find_first_not_of(" \t\r\n") != std::string::npos) {
    auto parsed = parse_json_body(req.body);
    if (!parsed.is_ok()) return parsed.status();
    j = *parsed;
  } else {
    return start;
  }
  if (j.is_string()) {
    if (j == "earliest") {
      start.initial = broker::InitialPosition::kEarliest;
    } else if (j != "latest") {
      return Status::invalid_argument("messageId must be 'earliest', 'latest' or {\"ledgerId\", \"entryId\"}");
    }
    return start;
  }
  if (!j.is_object() || !j.contains("ledgerId") || !j.contains("entryId") || !j["ledgerId"].is_number_integer() ||
      !j["entryId"].is_number_integer()) {
    return Status::invalid_argument("messageId must be 'earliest', 'latest' or {\"ledgerId\", \"entryId\"}");
  }
  const int64_t ledger = j["ledgerId"].get<int64_t>();
  const int64_t entry = j["entryId"].get<int64_t>();
  // Pulsar's MessageId.earliest is (-1, -1) and latest is (Long.MAX, Long.MAX).
  if (ledger < 0) {
    start.initial = broker::InitialPosition::kEarliest;
  } else if (ledger != INT64_MAX) {
    start.first = Position{static_cast<ledger::LedgerId>(ledger), static_cast<ledger::EntryId>(entry)};
  }
  return start;
}

void register_domain(Router& router, TopicServices* s, TopicDomain d) {
  const std::string topic = "/admin/v2/" + std::string(broker::domain_name(d)) + "/{tenant}/{namespace}/{topic}";
  const std::string sub = topic + "/subscription/{subscription}";

  router.get(topic + "/subscriptions", [s, d](HttpRequest& req, Responder respond) {
    on_existing_topic(*s, d, req, std::move(respond), [](Topic& t, SharedResponder r) {
      (*r)(HttpResponse::json(200, Json(t.subscription_names())));
    });
  });

  router.put(sub, [s, d](HttpRequest& req, Responder respond) {
    auto start = parse_start(req);
    if (!start.is_ok()) return respond(error_response(start.status()));
    std::string name = req.param("subscription");
    if (name.empty()) return respond(HttpResponse::error(400, "a subscription needs a name"));
    on_existing_topic(*s, d, req, std::move(respond), [name, start = *start](Topic& t, SharedResponder r) {
      t.create_subscription(name, start.initial, [&t, r, name, start](Result<broker::Subscription*> created) {
        if (!created.is_ok()) return respond_status(r, created.status());
        if (!start.first) return settle(t, [r](Status st) { respond_status(r, st); });
        Position first = *start.first;
        t.reset_subscription(name, Position{first.ledger, first.entry - 1}, [r](Status st) { respond_status(r, st); });
      });
    });
  });

  router.del(sub, [s, d](HttpRequest& req, Responder respond) {
    const bool force = query_flag(req, "force");
    on_existing_topic(*s, d, req, std::move(respond), [force, name = req.param("subscription")](Topic& t,
                                                                                               SharedResponder r) {
      t.remove_subscription(name, force, [r](Status st) { respond_status(r, st); });
    });
  });

  router.post(sub + "/skip_all", [s, d](HttpRequest& req, Responder respond) {
    on_subscription(*s, d, req, std::move(respond), [s](Topic& t, broker::Subscription& sub, SharedResponder r) {
      if (sub.cursor().backlog_entries(t.log().chain()) == 0) return respond_status(r, Status::ok());
      t.log().reset_cursor(sub.name(), t.log().last_confirmed(), [s, r, topic = t.name(), name = sub.name()](Status st) {
        // The topic may have been unloaded meanwhile: look it up again.
        Topic* now = s->broker.loaded_topic(topic);
        broker::Subscription* found = now ? now->subscription(name) : nullptr;
        if (found != nullptr && st.is_ok()) found->rewind();
        respond_status(r, st);
      });
    });
  });

  router.post(sub + "/skip/{count}", [s, d](HttpRequest& req, Responder respond) {
    auto n = count_param(req.param("count"), "the number of messages to skip");
    if (!n.is_ok()) return respond(error_response(n.status()));
    on_subscription(*s, d, req, std::move(respond), [n = *n](Topic& t, broker::Subscription& sub, SharedResponder r) {
      if (n == 0) return respond_status(r, Status::ok());
      const auto& chain = t.log().chain();
      auto target = nth_unacknowledged(sub.cursor(), chain, n);
      Position through = target ? *target : t.log().last_confirmed();
      if (!target && sub.cursor().backlog_entries(chain) == 0) return respond_status(r, Status::ok());
      Status st = t.log().ack_cumulative(sub.name(), through);
      if (!st.is_ok()) return respond_status(r, st);
      sub.rewind();
      settle(t, [r](Status flushed) { respond_status(r, flushed); });
    });
  });

  // Pulsar's: the body is true or false.
  router.post(sub + "/replicatedSubscriptionStatus", [s, d](HttpRequest& req, Responder respond) {
    auto body = parse_json_body(req.body);
    if (!body.is_ok()) return respond(error_response(body.status()));
    if (!body->is_boolean()) return respond(HttpResponse::error(400, "the body is true or false"));
    on_subscription(*s, d, req, std::move(respond), [on = body->get<bool>()](Topic& t, broker::Subscription& sub,
                                                                             SharedResponder r) {
      Status st = t.set_subscription_replicated(sub.name(), on);
      if (!st.is_ok()) return respond_status(r, st);
      settle(t, [r](Status flushed) { respond_status(r, flushed); });
    });
  });

  router.post(sub + "/resetcursor/{timestamp}", [s, d](HttpRequest& req, Responder respond) {
    auto ts = count_param(req.param("timestamp"), "the timestamp (ms since the epoch)");
    if (!ts.is_ok()) return respond(error_response(ts.status()));
    on_subscription(*s, d, req, std::move(respond), [ts = *ts](Topic& t, broker::Subscription& sub,
                                                                     SharedResponder r) {
      if (persistent_log(t) == nullptr) return (*r)(not_persistent());
      t.seek_subscription_by_time(sub.name(), ts, [r](Status st) { respond_status(r, st); });
    });
  });

  router.post(sub + "/resetcursor", [s, d](HttpRequest& req, Responder respond) {
    // Pulsar's ResetCursorData: the message to deliver next, or the one after
    // it with "isExcluded".
    auto body = parse_json_body(req.body);
    if (!body.is_ok()) return respond(error_response(body.status()));
    const Json& j = *body;
    if (!j.is_object() || !j.contains("ledgerId") || !j.contains("entryId") || !j["ledgerId"].is_number_integer() ||
        !j["entryId"].is_number_integer() || j["ledgerId"].get<int64_t>() < 0 || j["entryId"].get<int64_t>() < 0 ||
        (j.contains("isExcluded") && !j["isExcluded"].is_boolean())) {
      return respond(HttpResponse::error(400, "the body must be {\"ledgerId\": L, \"entryId\": E[, \"isExcluded\": bool]}"));
    }
    Position at{static_cast<ledger::LedgerId>(j["ledgerId"].get<int64_t>()),
                static_cast<ledger::EntryId>(j["entryId"].get<int64_t>())};
    const bool excluded = j.value("isExcluded", false);
    on_subscription(*s, d, req, std::move(respond), [at, excluded](Topic& t, broker::Subscription& sub,
                                                                   SharedResponder r) {
      if (persistent_log(t) == nullptr) return (*r)(not_persistent());
      const ledger::ChainLedger* l = t.log().chain().find(at.ledger);
      if (l == nullptr || at.entry > l->entries) {
        return (*r)(HttpResponse::error(404, "no message " + position_string(at) + " in " + t.name().to_string()));
      }
      Position mark_delete = excluded ? at : Position{at.ledger, at.entry - 1};
      t.reset_subscription(sub.name(), mark_delete, [r](Status st) { respond_status(r, st); });
    });
  });

  auto expire = [](Topic& t, std::vector<std::string> names, int64_t seconds, SharedResponder r) {
    auto* ml = persistent_log(t);
    if (ml == nullptr) return (*r)(not_persistent());
    struct Pending {
      size_t left;
      Status error;
    };
    auto pending = std::make_shared<Pending>(Pending{names.size() + 1, Status::ok()});
    auto release = [pending, r](Status st) {
      if (!st.is_ok() && pending->error.is_ok()) pending->error = st;
      if (--pending->left == 0) respond_status(r, pending->error);
    };
    const int64_t before = common::wall_clock_ms() - seconds * 1000;
    for (const auto& name : names) ml->expire_cursor(name, before, release);
    release(Status::ok());
  };

  router.post(sub + "/expireMessages/{seconds}", [s, d, expire](HttpRequest& req, Responder respond) {
    auto secs = count_param(req.param("seconds"), "the expiry time in seconds");
    if (!secs.is_ok()) return respond(error_response(secs.status()));
    on_subscription(*s, d, req, std::move(respond),
                    [expire, secs = *secs](Topic& t, broker::Subscription& sub, SharedResponder r) {
                      expire(t, {sub.name()}, secs, r);
                    });
  });

  router.post(topic + "/all_subscription/expireMessages/{seconds}", [s, d, expire](HttpRequest& req,
                                                                                   Responder respond) {
    auto secs = count_param(req.param("seconds"), "the expiry time in seconds");
    if (!secs.is_ok()) return respond(error_response(secs.status()));
    on_existing_topic(*s, d, req, std::move(respond), [expire, secs = *secs](Topic& t, SharedResponder r) {
      expire(t, t.subscription_names(), secs, r);
    });
  });

  router.get(sub + "/position/{position}", [s, d](HttpRequest& req, Responder respond) {
    auto n = count_param(req.param("position"), "the message position");
    if (!n.is_ok()) return respond(error_response(n.status()));
    if (*n < 1) return respond(HttpResponse::error(412, "the message position starts at 1"));
    on_subscription(*s, d, req, std::move(respond), [n = *n](Topic& t, broker::Subscription& sub, SharedResponder r) {
      if (persistent_log(t) == nullptr) return (*r)(not_persistent());
      auto p = nth_unacknowledged(sub.cursor(), t.log().chain(), n);
      if (!p) return (*r)(HttpResponse::error(404, "Message not found"));
      t.log().read_entries(Position{p->ledger, p->entry - 1}, 1,
                           [r, want = *p](Result<std::vector<ledger::LedgerEntry>> read) {
                             if (!read.is_ok()) return (*r)(error_response(read.status()));
                             if (read->empty() || read->front().position != want) {
                               return (*r)(HttpResponse::error(404, "Message not found"));
                             }
                             (*r)(peeked_message(read->front()));
                           });
    });
  });

  router.get(topic + "/ledger/{ledgerId}/entry/{entryId}", [s, d](HttpRequest& req, Responder respond) {
    auto ledger_id = count_param(req.param("ledgerId"), "the ledger id");
    if (!ledger_id.is_ok()) return respond(error_response(ledger_id.status()));
    auto entry_id = count_param(req.param("entryId"), "the entry id");
    if (!entry_id.is_ok()) return respond(error_response(entry_id.status()));
    Position want{static_cast<ledger::LedgerId>(*ledger_id), static_cast<ledger::EntryId>(*entry_id)};
    on_existing_topic(*s, d, req, std::move(respond), [want](Topic& t, SharedResponder r) {
      if (persistent_log(t) == nullptr) return (*r)(not_persistent());
      t.log().read_entries(Position{want.ledger, want.entry - 1}, 1,
                           [r, want](Result<std::vector<ledger::LedgerEntry>> read) {
                             if (!read.is_ok() && read.status().code() != common::ErrorCode::kNotFound) {
                               return (*r)(error_response(read.status()));
                             }
                             if (!read.is_ok() || read->empty() || read->front().position != want) {
                               return (*r)(HttpResponse::error(404, "Message not found"));
                             }
                             (*r)(peeked_message(read->front()));
                           });
    });
  });
}

}  // namespace

void register_subscription_routes(Router& router, TopicServices& services) {
  for (TopicDomain d : {TopicDomain::kPersistent, TopicDomain::kNonPersistent}) register_domain(router, &services, d);
  // Replicated subscriptions (georep/replicator.h): another cluster's
  // acknowledgements, {"cluster": "a", "subscriptions": [{"name": "s",
  // "originIndex": 41, "localIndex": 17}]}, sent to the member serving the
  // topic (others redirect). Superusers only (admin_service.cc).
  TopicServices* s = &services;
  router.post("/admin/v2/internal/replicated-subscriptions/persistent/{tenant}/{namespace}/{topic}",
              [s](HttpRequest& req, Responder respond) {
    auto body = parse_json_body(req.body);
    if (!body.is_ok()) return respond(error_response(body.status()));
    const Json& j = *body;
    if (!j.is_object() || !j.contains("cluster") || !j["cluster"].is_string() || !j.contains("subscriptions") ||
        !j["subscriptions"].is_array()) {
      return respond(HttpResponse::error(400, "expected {\"cluster\": ..., \"subscriptions\": [...]}"));
    }
    struct Update {
      std::string name;
      int64_t origin_index;
      int64_t local_index;
    };
    std::vector<Update> updates;
    for (const Json& u : j["subscriptions"]) {
      if (!u.is_object() || !u.contains("name") || !u["name"].is_string() || !u.contains("originIndex") ||
          !u["originIndex"].is_number_integer() || !u.contains("localIndex") || !u["localIndex"].is_number_integer()) {
        return respond(HttpResponse::error(400, "each subscription is {\"name\", \"originIndex\", \"localIndex\"}"));
      }
      updates.push_back(
          {u["name"].get<std::string>(), u["originIndex"].get<int64_t>(), u["localIndex"].get<int64_t>()});
    }
    on_existing_topic(*s, TopicDomain::kPersistent, req, std::move(respond),
                      [s, cluster = j["cluster"].get<std::string>(), updates = std::move(updates)](
                          Topic& t, SharedResponder r) {
                        auto join = common::Join::start([s, r, topic = t.name()](Status st) {
                          if (!st.is_ok()) return respond_status(r, st);
                          // The topic may have been unloaded meanwhile: look it up again.
                          Topic* now = s->broker.loaded_topic(topic);
                          if (now == nullptr) return respond_status(r, Status::ok());
                          settle(*now, [r](Status flushed) { respond_status(r, flushed); });
                        });
                        for (const Update& u : updates) {
                          t.apply_remote_acks(u.name, cluster, u.origin_index, u.local_index, join->branch());
                        }
                        join->release();
                      });
  });
}

}  // namespace magnetar::admin
