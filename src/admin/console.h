// The web console on the HTTP port: the embedded files (console_assets.h)
// served at "/", with index.html for every client-side page.
#pragma once

#include "admin/router.h"

namespace magnetar::admin {

// GET/HEAD "/" and, as the router's fallback for paths no API route knows:
// an embedded file by path (Content-Type, ETag with If-None-Match -> 304,
// gzip when the client accepts it, immutable caching for hashed assets,
// no-cache for index.html); index.html for the console's client-side pages
// (/tenants..., /monitoring), so that a reload or a shared link
// works; the API's JSON 404 for anything else.
void register_console_routes(Router& router);

}  // namespace magnetar::admin
