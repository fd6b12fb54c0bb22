// ListGroups: every group with members, over all reactors. DescribeGroups:
// each named group's state and members, with their metadata and assignment.
#include <algorithm>

#include "protocol/kafka/server/group_coordinator.h"
#include "protocol/kafka/server/kafka_connection.h"

namespace magnetar::protocol::kafka {

void handle_list_groups(KafkaConnection& c, const Request& request) {
  c.service().groups().list([reply = c.replier(), request](std::vector<GroupListing> groups) {
    reply([request, groups = std::move(groups)](KafkaConnection& conn) {
      Struct resp = request.response();
      resp.set("ThrottleTimeMs", int64_t{0});
      resp.set("ErrorCode", int64_t{kNone});
      // v4+: only the groups in the states asked for (none named: all).
      const auto& states = request.body.strings("StatesFilter");
      // Only this namespace's groups, and of those the ones the role may use.
      for (const auto& g : groups) {
        auto name = conn.group_name(g.group);
        if (!name || !conn.authorize_group(*name).is_ok()) continue;
        if (!states.empty() && std::find(states.begin(), states.end(), g.state) == states.end()) continue;
        auto& out = resp.add("Groups");
        out.set("GroupId", *name);
        out.set("ProtocolType", g.protocol_type);
        out.set("GroupState", g.state);
      }
      conn.respond(request, resp);
    });
  });
}

namespace {

struct DescribeState {
  Request request;
  std::vector<GroupDescription> groups;  // under the client's names
  std::vector<ErrorCode> errors;
  size_t left = 0;
};

void answer_describe(KafkaConnection& c, const DescribeState& state) {
  Struct resp = state.request.response();
  resp.set("ThrottleTimeMs", int64_t{0});
  for (size_t k = 0; k < state.groups.size(); ++k) {
    const GroupDescription& d = state.groups[k];
    auto& g = resp.add("Groups");
    g.set("ErrorCode", int64_t{d.group.empty() ? kInvalidGroupId : state.errors[k]});
    g.set("GroupId", d.group);
    g.set("GroupState", d.state);
    g.set("ProtocolType", d.protocol_type);
    g.set("ProtocolData", d.protocol_name);
    for (const MemberDescription& m : d.members) {
      auto& out = g.add("Members");
      out.set("MemberId", m.member_id);
      out.set_null("GroupInstanceId");
      out.set("ClientId", m.client_id);
      out.set("ClientHost", m.client_host);
      out.set("MemberMetadata", common::Slice::copy_of(m.metadata));
      out.set("MemberAssignment", common::Slice::copy_of(m.assignment));
    }
  }
  c.respond(state.request, resp);
}

}  // namespace

void handle_describe_groups(KafkaConnection& c, const Request& request) {
  auto state = std::make_shared<DescribeState>();
  state->request = request;
  const auto& names = request.body.strings("Groups");
  state->groups.resize(names.size());
  state->errors.resize(names.size(), kNone);
  state->left = names.size() + 1;
  auto one_done = [](KafkaConnection& conn, const std::shared_ptr<DescribeState>& s) {
    if (--s->left == 0) answer_describe(conn, *s);
  };
  for (size_t k = 0; k < names.size(); ++k) {
    std::string name = names[k];
    if (!c.authorize_group(name).is_ok()) {
      state->groups[k].group = name;
      state->errors[k] = kGroupAuthorizationFailed;
      --state->left;
      continue;
    }
    c.service().groups().describe(c.group_key(name), [reply = c.replier(), state, k, name, one_done](GroupDescription d) {
      reply([state, k, name, one_done, d = std::move(d)](KafkaConnection& conn) mutable {
        d.group = name;
        state->groups[k] = std::move(d);
        one_done(conn, state);
      });
    });
  }
  one_done(c, state);
}

}  // namespace magnetar::protocol::kafka
