// DeleteGroups: a group's committed offsets are the cursors of the
// subscriptions named after it, so deleting the group removes those
// subscriptions from every topic of the connection's namespace. A group with
// members is NON_EMPTY_GROUP; a group no topic has a subscription for is
// GROUP_ID_NOT_FOUND. Topics of the namespace that are not loaded are loaded
// to look: the call is for administrators, not for a hot path.
#include "protocol/kafka/server/group_coordinator.h"
#include "protocol/kafka/server/kafka_connection.h"

namespace magnetar::protocol::kafka {

using common::Result;
using common::Status;

namespace {

struct GroupsState {
  Request request;
  std::vector<std::pair<std::string, ErrorCode>> results;
  size_t left = 0;
};

struct GroupSweep {
  size_t left = 0;
  size_t removed = 0;
  ErrorCode error = kNone;
  std::function<void(ErrorCode)> done;
  void one(ErrorCode e, bool was_removed) {
    if (e != kNone && error == kNone) error = e;
    if (was_removed) ++removed;
    if (--left == 0) done(error != kNone ? error : removed > 0 ? kNone : kGroupIdNotFound);
  }
};

// Tenancy thread: removes subscription `group` from every topic of `ns`.
void sweep(KafkaService& service, broker::Tenancy& tenancy, const broker::NamespaceName& ns, const std::string& group,
           std::function<void(ErrorCode)> done) {
  auto listed = tenancy.list_topics(ns, broker::TopicDomain::kPersistent);
  if (!listed.is_ok()) return done(error_code(listed.status()));
  auto state = std::make_shared<GroupSweep>();
  state->left = listed->size() + 1;
  state->done = std::move(done);
  for (const std::string& full : *listed) {
    auto name = broker::TopicName::parse(full);
    if (!name) {
      state->one(kNone, false);
      continue;
    }
    // The sweep's state is touched from many reactors: each answer goes
    // back through the tenancy thread.
    auto back = [&tenancy, state](ErrorCode e, bool removed) {
      Status st = tenancy.submit([state, e, removed]() { state->one(e, removed); });
      if (!st.is_ok()) state->one(e, removed);
    };
    service.broker().with_existing_topic(*name, true, [group, back](Result<broker::Topic*> t) {
      if (!t.is_ok() || (*t)->subscription(group) == nullptr) return back(kNone, false);
      (*t)->remove_subscription(group, false, [back](Status st) {
        back(st.is_ok() ? kNone : st.code() == common::ErrorCode::kFailedPrecondition ? kNonEmptyGroup : error_code(st),
             st.is_ok());
      });
    });
  }
  state->one(kNone, false);
}

}  // namespace

void handle_delete_groups(KafkaConnection& c, const Request& request) {
  auto state = std::make_shared<GroupsState>();
  state->request = request;
  for (const std::string& g : request.body.strings("GroupsNames")) state->results.emplace_back(g, kNone);
  state->left = state->results.size() + 1;
  auto one_done = [](KafkaConnection& conn, const std::shared_ptr<GroupsState>& s) {
    if (--s->left > 0) return;
    Struct resp = s->request.response();
    resp.set("ThrottleTimeMs", int64_t{0});
    for (const auto& [group, error] : s->results) {
      auto& r = resp.add("Results");
      r.set("GroupId", group);
      r.set("ErrorCode", int64_t{error});
    }
    conn.respond(s->request, resp);
  };
  broker::Tenancy* tenancy = c.service().tenancy();
  for (size_t k = 0; k < state->results.size(); ++k) {
    auto report = [reply = c.replier(), state, k, one_done](ErrorCode e) {
      reply([state, k, one_done, e](KafkaConnection& conn) {
        state->results[k].second = e;
        one_done(conn, state);
      });
    };
    const std::string group = state->results[k].first;
    if (!c.service().authorization().check_tenant_admin(c.role(), c.ns().tenant).is_ok()) {
      report(kGroupAuthorizationFailed);
      continue;
    }
    if (group.empty()) {
      report(kInvalidGroupId);
      continue;
    }
    if (tenancy == nullptr) {
      report(kGroupIdNotFound);
      continue;
    }
    c.service().groups().describe(c.group_key(group), [service = &c.service(), tenancy, ns = c.ns(), group,
                                                       key = c.group_key(group), report](GroupDescription d) {
      if (!d.members.empty()) return report(kNonEmptyGroup);
      auto forget = [service, key, report](ErrorCode e) {
        if (e == kNone) service->groups().forget_offsets(key);
        report(e);
      };
      Status st = tenancy->submit([service, tenancy, ns, group, forget]() { sweep(*service, *tenancy, ns, group, forget); });
      if (!st.is_ok()) report(error_code(st));
    });
  }
  one_done(c, state);
}

}  // namespace magnetar::protocol::kafka
