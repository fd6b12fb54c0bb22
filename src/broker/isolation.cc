#include "broker/isolation.h"

#include <sstream>

#include "broker/tenancy.h"
#include "metadata/blocking.h"

namespace magnetar::broker {

using common::Result;
using common::Status;

std::string isolation_prefix(const std::string& cluster) { return "/admin/isolation/" + cluster; }

std::string isolation_key(const std::string& cluster, const std::string& policy) {
  return isolation_prefix(cluster) + "/" + policy;
}

std::string encode_isolation(const IsolationPolicy& policy) {
  std::string out;
  for (const auto& r : policy.namespaces) out += "namespace " + r + "\n";
  for (const auto& r : policy.primary) out += "primary " + r + "\n";
  for (const auto& r : policy.secondary) out += "secondary " + r + "\n";
  out += "min_limit " + std::to_string(policy.min_limit) + "\n";
  return out;
}

Result<IsolationPolicy> decode_isolation(std::string_view text) {
  IsolationPolicy p;
  std::istringstream in{std::string(text)};
  std::string line;
  while (std::getline(in, line)) {
    auto space = line.find(' ');
    if (space == std::string::npos) continue;
    std::string field = line.substr(0, space);
    std::string value = line.substr(space + 1);
    if (field == "namespace") p.namespaces.push_back(value);
    else if (field == "primary") p.primary.push_back(value);
    else if (field == "secondary") p.secondary.push_back(value);
    else if (field == "min_limit") p.min_limit = static_cast<uint32_t>(std::strtoul(value.c_str(), nullptr, 10));
  }
  if (p.namespaces.empty() || p.primary.empty()) return Status::corruption("a damaged isolation policy record");
  return p;
}

Status validate_isolation(const IsolationPolicy& policy) {
  if (policy.namespaces.empty()) return Status::invalid_argument("an isolation policy names at least one namespace");
  if (policy.primary.empty()) return Status::invalid_argument("an isolation policy names at least one primary broker");
  for (const auto* list : {&policy.namespaces, &policy.primary, &policy.secondary}) {
    for (const auto& pattern : *list) {
      if (pattern.empty() || pattern.find_first_of("\r\n") != std::string::npos) {
        return Status::invalid_argument("an empty pattern, or one with a line break");
      }
      try {
        std::regex compiled(pattern);
      } catch (const std::regex_error& e) {
        return Status::invalid_argument("'" + pattern + "' is not a regular expression: " + e.what());
      }
    }
  }
  return Status::ok();
}

std::vector<std::string> broker_names(const NodeEndpoints& node) {
  std::vector<std::string> names{std::to_string(node.node)};
  std::string web = node.http_url;
  if (auto scheme = web.find("://"); scheme != std::string::npos) web = web.substr(scheme + 3);
  if (!web.empty()) {
    names.push_back(web);
    names.push_back(web.substr(0, web.rfind(':')));
  }
  return names;
}

IsolationRules::IsolationRules(const std::map<std::string, IsolationPolicy>& policies) {
  auto compile = [](const std::vector<std::string>& patterns) {
    std::vector<std::regex> out;
    for (const auto& p : patterns) {
      try {
        out.emplace_back(p);
      } catch (const std::regex_error&) {
        // validate_isolation refused it when it was written: nothing matches it.
      }
    }
    return out;
  };
  for (const auto& [name, p] : policies) {
    rules_.push_back(Rule{name, compile(p.namespaces), compile(p.primary), compile(p.secondary), p.min_limit});
  }
}

bool IsolationRules::any_match(const std::vector<std::regex>& patterns, const std::vector<std::string>& names) {
  for (const auto& re : patterns) {
    for (const auto& n : names) {
      if (std::regex_match(n, re)) return true;
    }
  }
  return false;
}

std::vector<uint64_t> IsolationRules::allowed(const std::string& ns, const std::vector<NodeEndpoints>& live) const {
  std::vector<uint64_t> out;
  for (const auto& rule : rules_) {
    bool matched = false;
    for (const auto& re : rule.namespaces) matched = matched || std::regex_match(ns, re);
    if (!matched) continue;
    std::vector<uint64_t> secondary;
    for (const auto& node : live) {
      auto names = broker_names(node);
      if (any_match(rule.primary, names)) out.push_back(node.node);
      else if (any_match(rule.secondary, names)) secondary.push_back(node.node);
    }
    if (out.size() < rule.min_limit) out.insert(out.end(), secondary.begin(), secondary.end());
    return out;
  }
  // Not isolated: the brokers no policy keeps for its own, while there are any.
  std::vector<uint64_t> all;
  for (const auto& node : live) {
    all.push_back(node.node);
    bool reserved = false;
    auto names = broker_names(node);
    for (const auto& rule : rules_) reserved = reserved || any_match(rule.primary, names);
    if (!reserved) out.push_back(node.node);
  }
  return out.empty() ? all : out;
}

namespace md = metadata::blocking;

Result<std::map<std::string, IsolationPolicy>> Tenancy::isolation_policies(const std::string& cluster) {
  auto c = get_cluster(cluster);
  if (!c.is_ok()) return c.status();
  std::map<std::string, IsolationPolicy> out;
  auto names = md::list_children(store_, isolation_prefix(cluster));
  if (!names.is_ok()) {
    if (names.status().code() == common::ErrorCode::kNotFound) return out;
    return names.status();
  }
  for (const auto& name : *names) {
    auto record = md::get(store_, isolation_key(cluster, name));
    if (!record.is_ok()) continue;  // deleted meanwhile
    auto p = decode_isolation(record->value);
    if (p.is_ok()) out.emplace(name, *p);
  }
  return out;
}

Status Tenancy::set_isolation_policy(const std::string& cluster, const std::string& name,
                                     const IsolationPolicy& policy) {
  MAGNETAR_RETURN_IF_ERROR(validate_entity_name(name, "isolation policy"));
  MAGNETAR_RETURN_IF_ERROR(validate_isolation(policy));
  auto c = get_cluster(cluster);
  if (!c.is_ok()) return c.status();
  auto put = md::put(store_, isolation_key(cluster, name), encode_isolation(policy));
  return put.is_ok() ? Status::ok() : put.status();
}

Status Tenancy::delete_isolation_policy(const std::string& cluster, const std::string& name) {
  MAGNETAR_RETURN_IF_ERROR(validate_entity_name(name, "isolation policy"));
  auto c = get_cluster(cluster);
  if (!c.is_ok()) return c.status();
  auto current = md::get(store_, isolation_key(cluster, name));
  if (!current.is_ok()) {
    if (current.status().code() == common::ErrorCode::kNotFound) {
      return Status::not_found("isolation policy '" + name + "' does not exist");
    }
    return current.status();
  }
  return md::del(store_, isolation_key(cluster, name), current->stat.version);
}

}  // namespace magnetar::broker
