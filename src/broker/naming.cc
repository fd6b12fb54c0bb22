#include "broker/naming.h"

#include <charconv>

namespace magnetar::broker {

using common::Result;
using common::Status;

namespace {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
         c == '.' || c == ':' || c == '=';
}

// The n of a trailing "-partition-<n>", or -1.
int32_t partition_index(std::string_view local) {
  size_t at = local.rfind(kPartitionSuffix);
  if (at == std::string_view::npos || at == 0) return -1;
  std::string_view digits = local.substr(at + kPartitionSuffix.size());
  if (digits.empty() || (digits.size() > 1 && digits[0] == '0')) return -1;
  int32_t n = -1;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  if (ec != std::errc() || end != digits.data() + digits.size() || n < 0) return -1;
  return n;
}

}  // namespace

Status validate_entity_name(std::string_view name, std::string_view what) {
  if (name.empty()) return Status::invalid_argument(std::string(what) + " name is empty");
  if (name.size() > kMaxNameLength) {
    return Status::invalid_argument(std::string(what) + " name is longer than " + std::to_string(kMaxNameLength) +
                                    " characters");
  }
  for (char c : name) {
    if (!is_name_char(c)) {
      return Status::invalid_argument("invalid " + std::string(what) + " name '" + std::string(name) +
                                      "': only letters, digits and _ - . : = are allowed");
    }
  }
  return Status::ok();
}

Status validate_topic_local_name(std::string_view name) {
  if (name.empty()) return Status::invalid_argument("topic name is empty");
  if (name.size() > kMaxNameLength) {
    return Status::invalid_argument("topic name is longer than " + std::to_string(kMaxNameLength) + " characters");
  }
  for (char c : name) {
    if (c == '/' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return Status::invalid_argument("invalid topic name '" + std::string(name) +
                                      "': '/' and control characters are not allowed");
    }
  }
  return Status::ok();
}

Result<NamespaceName> NamespaceName::of(std::string_view tenant, std::string_view local) {
  MAGNETAR_RETURN_IF_ERROR(validate_entity_name(tenant, "tenant"));
  MAGNETAR_RETURN_IF_ERROR(validate_entity_name(local, "namespace"));
  return NamespaceName{std::string(tenant), std::string(local)};
}

Result<NamespaceName> NamespaceName::parse(std::string_view full) {
  size_t slash = full.find('/');
  if (slash == std::string_view::npos || full.find('/', slash + 1) != std::string_view::npos) {
    return Status::invalid_argument("invalid namespace '" + std::string(full) + "': expected tenant/namespace");
  }
  return of(full.substr(0, slash), full.substr(slash + 1));
}

std::string_view domain_name(TopicDomain d) {
  return d == TopicDomain::kPersistent ? "persistent" : "non-persistent";
}

Result<TopicDomain> parse_domain(std::string_view s) {
  if (s == "persistent") return TopicDomain::kPersistent;
  if (s == "non-persistent") return TopicDomain::kNonPersistent;
  return Status::invalid_argument("invalid topic domain '" + std::string(s) +
                                  "': expected persistent or non-persistent");
}

Result<TopicName> TopicName::of(TopicDomain domain, std::string_view tenant, std::string_view ns,
                                std::string_view local) {
  auto nsn = NamespaceName::of(tenant, ns);
  if (!nsn.is_ok()) return nsn.status();
  MAGNETAR_RETURN_IF_ERROR(validate_topic_local_name(local));
  TopicName t;
  t.domain = domain;
  t.ns = std::move(nsn).value();
  t.local = std::string(local);
  t.partition = partition_index(local);
  return t;
}

Result<TopicName> TopicName::parse(std::string_view name) {
  TopicDomain domain = TopicDomain::kPersistent;
  std::string_view rest = name;
  size_t scheme = name.find("://");
  if (scheme != std::string_view::npos) {
    auto d = parse_domain(name.substr(0, scheme));
    if (!d.is_ok()) return d.status();
    domain = *d;
    rest = name.substr(scheme + 3);
  } else if (name.find('/') == std::string_view::npos) {
    return of(domain, "public", "default", name);
  }
  size_t a = rest.find('/');
  size_t b = a == std::string_view::npos ? a : rest.find('/', a + 1);
  if (b == std::string_view::npos) {
    return Status::invalid_argument("invalid topic name '" + std::string(name) +
                                    "': expected [persistent://]tenant/namespace/topic");
  }
  return of(domain, rest.substr(0, a), rest.substr(a + 1, b - a - 1), rest.substr(b + 1));
}

std::string TopicName::to_string() const {
  std::string s(domain_name(domain));
  s += "://";
  s += ns.to_string();
  s += '/';
  s += local;
  return s;
}

TopicName TopicName::base() const {
  if (!is_partition()) return *this;
  TopicName t = *this;
  t.local = local.substr(0, local.rfind(kPartitionSuffix));
  t.partition = -1;
  return t;
}

TopicName TopicName::partition_of(int32_t index) const {
  TopicName t = base();
  t.local += kPartitionSuffix;
  t.local += std::to_string(index);
  t.partition = index;
  return t;
}

}  // namespace magnetar::broker
