// libraft's error codes as our Status codes, in one place (consensus.h lists
// what each code means to a caller).
#pragma once

#include <string_view>

#include "common/status.h"

namespace magnetar::cluster {

// `rv` is a RAFT_* error code (non-zero); `what` names the request ("propose",
// "add server 4"); `detail` is libraft's own message (raft_errmsg), if any.
common::Status raft_status(int rv, std::string_view what, std::string_view detail = {});

}  // namespace magnetar::cluster
