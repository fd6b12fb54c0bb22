// `magnetar admin scram-users`: the SCRAM users Kafka clients authenticate
// as (SCRAM-SHA-256 / SCRAM-SHA-512), over /admin/v2/scram-users.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <fstream>

#include "cli/admin_cli.h"

namespace magnetar::cli {

namespace {

void print_scram_users(const Json& users) {
  if (users.empty()) {
    fmt::print("no SCRAM users\n");
    return;
  }
  fmt::print("{:<32} {}\n", "USER", "MECHANISMS (ITERATIONS)");
  for (const auto& u : users) {
    std::string mechanisms;
    for (const auto& c : u.value("credentials", Json::array())) {
      if (!mechanisms.empty()) mechanisms += ", ";
      mechanisms += fmt::format("{} ({})", c.value("mechanism", ""), c.value("iterations", 0));
    }
    fmt::print("{:<32} {}\n", u.value("user", ""), mechanisms);
  }
}

}  // namespace

void add_scram_user_commands(CLI::App& admin, Command& run, std::shared_ptr<AdminOptions> options) {
  auto* users = admin.add_subcommand("scram-users", "SCRAM users of the Kafka listener: add, list, delete");
  users->require_subcommand(1);
  users->fallthrough();
  add_verb(*users, run, options, "list", "Every SCRAM user and its mechanisms", []() -> common::Result<AdminRequest> {
    AdminRequest req{"GET", "/admin/v2/scram-users", "", "", nullptr};
    req.print = print_scram_users;
    return req;
  });
  struct AddFlags {
    std::string user;
    std::string password;
    std::string password_file;
    std::vector<std::string> mechanisms;
    int32_t iterations = 8192;
  };
  auto af = std::make_shared<AddFlags>();
  auto* add = add_verb(
      *users, run, options, "add", "Add a user, or set a user's password (salted and hashed by the node)",
      [af]() -> common::Result<AdminRequest> {
        std::string password = af->password;
        if (!af->password_file.empty()) {
          std::ifstream in(af->password_file);
          if (!in || !std::getline(in, password)) {
            return common::Status::invalid_argument("cannot read a password from " + af->password_file);
          }
        }
        if (password.empty()) return common::Status::invalid_argument("give --password or --password-file");
        Json body{{"password", password}, {"iterations", af->iterations}};
        if (!af->mechanisms.empty()) body["mechanisms"] = af->mechanisms;
        return AdminRequest{"PUT", "/admin/v2/scram-users/" + escape_segment(af->user), body.dump(),
                            "Set the SCRAM credentials of " + af->user, nullptr};
      });
  add->add_option("user", af->user, "User name (the role authorization sees)")->required();
  auto* pw = add->add_option("--password", af->password, "The password");
  add->add_option("--password-file", af->password_file, "A file whose first line is the password")->excludes(pw);
  add->add_option("--mechanism", af->mechanisms, "SCRAM-SHA-256 and/or SCRAM-SHA-512 (default: both)");
  add->add_option("--iterations", af->iterations, "PBKDF2 iterations, 4096 to 16384")->capture_default_str();
  struct DeleteFlags {
    std::string user;
    std::string mechanism;
  };
  auto df = std::make_shared<DeleteFlags>();
  auto* del = add_verb(*users, run, options, "delete", "Delete a user's credentials (all, or one mechanism's)",
                       [df]() -> common::Result<AdminRequest> {
                         std::string path = "/admin/v2/scram-users/" + escape_segment(df->user);
                         if (!df->mechanism.empty()) path += "?mechanism=" + escape_segment(df->mechanism);
                         return AdminRequest{"DELETE", path, "", "Deleted the SCRAM credentials of " + df->user,
                                             nullptr};
                       });
  del->add_option("user", df->user, "User name")->required();
  del->add_option("--mechanism", df->mechanism, "Only this mechanism's credential: SCRAM-SHA-256 or SCRAM-SHA-512");
}

}  // namespace magnetar::cli
