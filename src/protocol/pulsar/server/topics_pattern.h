// TopicsPattern: the topic pattern a client sends with GET_TOPICS_OF_NAMESPACE
// (a pattern or multi-topic consumer), matched against full topic names.
//
// Compiled with RE2, which matches in time linear in the name's length and
// compiles in time linear in the pattern's: no pattern, however hostile,
// stalls the thread it runs on (std::regex backtracks, exponentially on
// patterns like "(a*)*b"). Patterns are bounded to kMaxPatternBytes and
// their compiled program to kMaxProgramBytes. RE2 takes Java's syntax
// except backreferences and lookaround: a pattern using them is refused as
// invalid.
//
// Threads: immutable once compiled; matches from any thread.
#pragma once

#include <memory>
#include <string_view>

#include "common/result.h"

namespace re2 {
class RE2;
}

namespace magnetar::protocol::pulsar {

class TopicsPattern {
 public:
  static constexpr size_t kMaxPatternBytes = 4096;
  static constexpr int64_t kMaxProgramBytes = 1 << 20;

  // kInvalidArgument, with RE2's reason, for a pattern that does not
  // compile or is over the bounds.
  static common::Result<std::shared_ptr<const TopicsPattern>> compile(std::string_view pattern);
  ~TopicsPattern();

  // Whether the whole of `topic` matches.
  bool matches(std::string_view topic) const;

 private:
  explicit TopicsPattern(std::unique_ptr<re2::RE2> re);
  std::unique_ptr<re2::RE2> re_;
};

}  // namespace magnetar::protocol::pulsar
