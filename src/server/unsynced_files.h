// File systems that never sync, for an ephemeral node's data directory
// (Config::ephemeral): it is deleted when the process ends, so a sync buys
// nothing and costs start-up time (LevelDB alone syncs a dozen times while
// it creates a database).
//
// Threads: both may be used from any thread, as the real ones they wrap.
#pragma once

#include <memory>

#include "storage/file_ops.h"

namespace leveldb {
class Env;
}

namespace magnetar::server {

// LevelDB's default Env, except that Sync() of the files it writes does
// nothing. Lives as long as the process.
leveldb::Env* unsynced_leveldb_env();

// storage::FileOps::posix(), except that fdatasync and fsync do nothing and
// succeed.
std::shared_ptr<storage::FileOps> unsynced_file_ops();

}  // namespace magnetar::server
