#include "client/message.h"

namespace magnetar::client {

std::string MessageId::to_string() const {
  std::string s = std::to_string(ledger) + ":" + std::to_string(entry);
  if (batch_index >= 0) s += ":" + std::to_string(batch_index);
  return s;
}

}  // namespace magnetar::client
