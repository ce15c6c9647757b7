// The command line of `kvault serve` (and of kvault installed as
// llama-server): every flag in llama-server's --help of llama.cpp b10573,
// each served with llama-server's meaning, accepted with a logged warning
// where it means nothing on a CPU server, or refused with its reason; then
// kvault's own flags (paged pool, spill tiers, slot I/O). The table is data
// (server_args.cc); core/arg_table.h parses it.
#ifndef KVAULT_SERVER_SERVER_ARGS_H_
#define KVAULT_SERVER_SERVER_ARGS_H_

#include <span>

#include "core/arg_table.h"

namespace kvault {

// Returns the table of `kvault serve` flags, llama-server's first.
std::span<const ArgSpec> ServerArgTable();

}  // namespace kvault

#endif  // KVAULT_SERVER_SERVER_ARGS_H_
