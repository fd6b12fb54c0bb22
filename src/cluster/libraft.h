// libraft's headers, for C++: they declare their functions without extern "C".
// Include this instead of <raft.h>; only the libraft backend does.
#pragma once

extern "C" {
#include <raft.h>
}
