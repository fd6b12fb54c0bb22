// Namespace isolation policies, as Pulsar has them: the bundles of the
// namespaces a policy names are owned only by its primary brokers, or by its
// secondary ones while fewer than `min_limit` primaries are alive; the
// bundles of every other namespace stay off the brokers some policy names
// as primary (while any other broker is alive). So a business tenant's
// topics can have machines of their own.
//
// Stored per cluster at "/admin/isolation/<cluster>/<policy>" as lines
// "namespace <regex>", "primary <regex>", "secondary <regex>",
// "min_limit <n>". Namespaces are matched as "tenant/namespace"; a broker by
// its node id, its host, or host:port of its web service (Pulsar's broker
// name), each regex matching the whole name.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "broker/ownership.h"
#include "common/result.h"

namespace magnetar::broker {

struct IsolationPolicy {
  std::vector<std::string> namespaces;
  std::vector<std::string> primary;
  std::vector<std::string> secondary;
  uint32_t min_limit = 1;
};

std::string isolation_prefix(const std::string& cluster);
std::string isolation_key(const std::string& cluster, const std::string& policy);
std::string encode_isolation(const IsolationPolicy& policy);
common::Result<IsolationPolicy> decode_isolation(std::string_view text);
// InvalidArgument unless it names namespaces and primaries, every regex
// compiles and holds no line break.
common::Status validate_isolation(const IsolationPolicy& policy);

// The names a broker is matched by.
std::vector<std::string> broker_names(const NodeEndpoints& node);

// Compiled policies, to choose the brokers of a namespace.
class IsolationRules {
 public:
  explicit IsolationRules(const std::map<std::string, IsolationPolicy>& policies = {});
  bool empty() const { return rules_.empty(); }
  // Which of `live` may own bundles of `ns` ("tenant/namespace"); empty
  // when an isolated namespace has no broker of its group alive.
  std::vector<uint64_t> allowed(const std::string& ns, const std::vector<NodeEndpoints>& live) const;

 private:
  struct Rule {
    std::string name;
    std::vector<std::regex> namespaces, primary, secondary;
    uint32_t min_limit = 1;
  };
  static bool any_match(const std::vector<std::regex>& patterns, const std::vector<std::string>& names);
  std::vector<Rule> rules_;
};

}  // namespace magnetar::broker
