// The web console's files, embedded at build time (web-ui/, built by Vite;
// web-ui/scripts/embed.mjs writes the definition into the build tree).
#pragma once

#include <span>
#include <string_view>

namespace magnetar::admin {

struct ConsoleAsset {
  std::string_view path;          // "/index.html", "/assets/index-3f2a1b.js"
  std::string_view content_type;  // "text/javascript; charset=utf-8"
  std::string_view body;          // the file as built
  std::string_view gzip;          // the same, gzip-compressed; empty when that would not be smaller
  std::string_view etag;          // a strong validator: "\"<hash of body>\""
  bool immutable;                 // named by its content hash: cacheable for ever
};

// Every embedded file, sorted by path. Always holds "/index.html" (a page
// saying how to build the console when the build had no npm).
std::span<const ConsoleAsset> console_assets();

}  // namespace magnetar::admin
