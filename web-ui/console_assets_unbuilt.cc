// admin::console_assets() for a build without npm: one page saying how to get
// the console. The real definition is generated from the Vite build.
#include "admin/console_assets.h"

namespace magnetar::admin {

namespace {

constexpr std::string_view kIndex =
    "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Magnetar</title></head>"
    "<body style=\"font-family:sans-serif;margin:3em\"><h1>Magnetar</h1>"
    "<p>This binary was built without the web console (npm was not found when it was configured). "
    "Run <code>packaging/install-deps.sh</code>, configure again and rebuild to get it.</p>"
    "<p>The REST API is served here: <a href=\"/admin/v2/tenants\">/admin/v2/tenants</a>, "
    "<a href=\"/metrics\">/metrics</a>.</p></body></html>";

const ConsoleAsset kAssets[] = {
    {"/index.html", "text/html; charset=utf-8", kIndex, std::string_view(), "\"unbuilt-console\"", false},
};

}  // namespace

std::span<const ConsoleAsset> console_assets() { return kAssets; }

}  // namespace magnetar::admin
