#include "cluster/consensus.h"

namespace magnetar::cluster {

std::string_view role_name(Role role) {
  switch (role) {
    case Role::kVoter:
      return "voter";
    case Role::kStandby:
      return "standby";
    case Role::kSpare:
      return "spare";
  }
  return "unknown";
}

}  // namespace magnetar::cluster
