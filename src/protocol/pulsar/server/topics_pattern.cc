#include "protocol/pulsar/server/topics_pattern.h"

#include <fmt/format.h>
#include <re2/re2.h>

namespace magnetar::protocol::pulsar {

using common::Status;

TopicsPattern::TopicsPattern(std::unique_ptr<re2::RE2> re) : re_(std::move(re)) {}

TopicsPattern::~TopicsPattern() = default;

common::Result<std::shared_ptr<const TopicsPattern>> TopicsPattern::compile(std::string_view pattern) {
  if (pattern.size() > kMaxPatternBytes) {
    return Status::invalid_argument(
        fmt::format("a topics pattern of {} bytes is over the largest, {} bytes", pattern.size(), kMaxPatternBytes));
  }
  re2::RE2::Options options;
  options.set_max_mem(kMaxProgramBytes);
  options.set_log_errors(false);
  auto re = std::make_unique<re2::RE2>(re2::StringPiece(pattern.data(), pattern.size()), options);
  if (!re->ok()) return Status::invalid_argument(re->error());
  return std::shared_ptr<const TopicsPattern>(new TopicsPattern(std::move(re)));
}

bool TopicsPattern::matches(std::string_view topic) const {
  return re2::RE2::FullMatch(re2::StringPiece(topic.data(), topic.size()), *re_);
}

}  // namespace magnetar::protocol::pulsar
