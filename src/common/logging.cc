#include "common/logging.h"

#include <pthread.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <string>

namespace magnetar::common {
namespace {

thread_local std::string t_thread_name = "main";

// Prints the name set by set_thread_name() as %*.
class ThreadNameFlag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg&, const std::tm&, spdlog::memory_buf_t& dest) override {
    dest.append(t_thread_name.data(), t_thread_name.data() + t_thread_name.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<ThreadNameFlag>();
  }
};

}  // namespace

namespace logging_detail {

// LogLevel is spdlog's order, so write() passes it through.
static_assert(static_cast<int>(LogLevel::kTrace) == spdlog::level::trace);
static_assert(static_cast<int>(LogLevel::kWarn) == spdlog::level::warn);
static_assert(static_cast<int>(LogLevel::kError) == spdlog::level::err);
static_assert(static_cast<int>(LogLevel::kOff) == spdlog::level::off);

std::atomic<int> min_level{static_cast<int>(LogLevel::kInfo)};

void write(LogLevel level, std::string_view line) {
  spdlog::default_logger_raw()->log(static_cast<spdlog::level::level_enum>(level), spdlog::string_view_t(line));
}

}  // namespace logging_detail

Status init_logging(std::string_view level) {
  auto lvl = spdlog::level::from_str(std::string(level));
  // from_str maps unknown names to off; only "off" itself may mean off.
  if (lvl == spdlog::level::off && level != "off") {
    return Status::invalid_argument("unknown log level '" + std::string(level) +
                                    "' (use trace, debug, info, warn, error, critical, off)");
  }
  spdlog::drop("magnetar");
  auto logger = spdlog::stderr_logger_mt("magnetar");
  auto formatter = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc);
  formatter->add_flag<ThreadNameFlag>('*').set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %-5l [%*] %v");
  logger->set_formatter(std::move(formatter));
  logger->set_level(lvl);
  logger->flush_on(spdlog::level::warn);
  spdlog::set_default_logger(logger);
  logging_detail::min_level.store(static_cast<int>(lvl), std::memory_order_relaxed);
  return Status::ok();
}

void set_thread_name(std::string_view name) {
  t_thread_name = std::string(name);
  // The kernel keeps at most 15 characters.
  std::string short_name(name.substr(0, 15));
  pthread_setname_np(pthread_self(), short_name.c_str());
}

std::string_view thread_name() { return t_thread_name; }

}  // namespace magnetar::common
