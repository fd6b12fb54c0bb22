// CLI11's classes as the cli/ headers name them: by reference or pointer
// only, so that including a cli/ header does not parse CLI11 (several
// seconds of compile time per file). A file that builds or reads commands
// includes <CLI/CLI.hpp> itself.
#pragma once

namespace CLI {
class App;
class Option;
}  // namespace CLI
