// The command line's HTTP client is the client library's (client/http_client.h).
#pragma once

#include "client/http_client.h"

namespace magnetar::cli {

using client::escape_segment;
using client::http_request;
using client::HttpReply;
using client::Url;

}  // namespace magnetar::cli
