// `magnetar admin trials`: the free-trial mode's tenants (trial/trial_routes.h).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/admin_cli.h"
#include "common/clock.h"

namespace magnetar::cli {

namespace {

// "3h 12m", "41s", "expired": how long a trial has left.
std::string time_left(int64_t expires_ms) {
  int64_t left = (expires_ms - common::wall_clock_ms()) / 1000;
  if (left <= 0) return "expired";
  if (left < 60) return fmt::format("{}s", left);
  if (left < 3600) return fmt::format("{}m {}s", left / 60, left % 60);
  if (left < 86400) return fmt::format("{}h {}m", left / 3600, left % 3600 / 60);
  return fmt::format("{}d {}h", left / 86400, left % 86400 / 3600);
}

void print_trials(const Json& trials) {
  if (trials.empty()) {
    fmt::print("no trials\n");
    return;
  }
  fmt::print("{:<20} {:<26} {:<10} {:<16} {}\n", "TENANT", "EXPIRES", "LEFT", "SIGNED UP FROM", "CREATED");
  for (const auto& t : trials) {
    fmt::print("{:<20} {:<26} {:<10} {:<16} {}\n", t.value("tenant", ""), t.value("expiresAt", ""),
               time_left(t.value("expiresAtMs", int64_t{0})), t.value("address", ""), t.value("createdAt", ""));
  }
}

}  // namespace

void add_trial_commands(CLI::App& admin, Command& run, std::shared_ptr<AdminOptions> options) {
  auto* trials = admin.add_subcommand("trials", "Free-trial tenants (a node started with --trial): list, extend, delete");
  trials->require_subcommand(1);
  trials->fallthrough();
  add_verb(*trials, run, options, "list", "Every trial tenant, the soonest to expire first",
           []() -> common::Result<AdminRequest> {
             AdminRequest req{"GET", "/admin/v2/trials", "", "", nullptr};
             req.print = print_trials;
             return req;
           });
  struct ExtendFlags {
    std::string tenant;
    std::string by = "24h";
  };
  auto ef = std::make_shared<ExtendFlags>();
  auto* extend = add_verb(*trials, run, options, "extend", "Let a trial run longer (from now, when already due)",
                          [ef]() -> common::Result<AdminRequest> {
                            auto seconds = parse_duration_seconds(ef->by);
                            if (!seconds.is_ok()) return seconds.status();
                            if (*seconds <= 0) return common::Status::invalid_argument("--by must be positive");
                            AdminRequest req{"POST", "/admin/v2/trials/" + escape_segment(ef->tenant) + "/extend",
                                             Json{{"seconds", *seconds}}.dump(), "", nullptr};
                            req.print = [](const Json& t) {
                              fmt::print("Trial {} now expires at {} (in {})\n", t.value("tenant", ""),
                                         t.value("expiresAt", ""), time_left(t.value("expiresAtMs", int64_t{0})));
                            };
                            return req;
                          });
  extend->add_option("tenant", ef->tenant, "Trial tenant, e.g. trial-k3x9q0abmn2p")->required();
  extend->add_option("--by", ef->by, "How much longer: 30m, 24h, 7d")->capture_default_str();
  auto victim = std::make_shared<std::string>();
  auto* del = add_verb(*trials, run, options, "delete", "Delete a trial now: its tenant and all its data",
                       [victim]() -> common::Result<AdminRequest> {
                         return AdminRequest{"DELETE", "/admin/v2/trials/" + escape_segment(*victim), "",
                                             "Deleted trial " + *victim + " and all its data", nullptr};
                       });
  del->add_option("tenant", *victim, "Trial tenant")->required();
}

}  // namespace magnetar::cli
