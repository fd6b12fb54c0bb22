#include "metadata/store.h"

namespace magnetar::metadata {

common::Status validate_key(std::string_view key) {
  if (key.empty() || key.front() != '/') {
    return common::Status::invalid_argument("metadata key '" + std::string(key) + "' must start with '/'");
  }
  if (key.size() > 1 && key.back() == '/') {
    return common::Status::invalid_argument("metadata key '" + std::string(key) + "' ends with '/'");
  }
  if (key.find("//") != std::string_view::npos || key.find('\0') != std::string_view::npos) {
    return common::Status::invalid_argument("metadata key '" + std::string(key) + "' has an empty segment");
  }
  return common::Status::ok();
}

}  // namespace magnetar::metadata
