// POST /infill: llama-server's fill-in-the-middle request. The model's FIM
// tokens frame the code around the cursor, repository-level style:
//
//   [FIM_REP]myproject\n [FIM_SEP]file0\n text0 ... [FIM_SEP]filename\n
//   BOS [FIM_PRE]prefix [FIM_SUF]suffix [FIM_MID]prompt
//
// (with --spm-infill the suffix part comes first). The prefix keeps its last
// 3/4 of a batch of tokens, the suffix what is left of a quarter batch after
// the prompt, and the extra chunks fill the context up to one batch and
// twice n_predict from the end, as llama-server cuts them.
#ifndef KVAULT_SERVER_INFILL_H_
#define KVAULT_SERVER_INFILL_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/status_or.h"
#include "model/tokenizer.h"
#include "server/completion_codec.h"

namespace kvault {

struct InfillShape {
  uint32_t n_batch = 256;   // -b
  int32_t n_predict = -1;   // the server's -n
  uint32_t n_ctx = 0;       // a slot's context
  bool spm = false;         // --spm-infill: suffix before prefix
};

// Returns the /infill request: the /completion fields, with the prompt built
// from input_prefix, input_suffix, input_extra ([{filename?, text}]) and
// prompt (the start of the middle). Unimplemented (501 not_supported_error)
// naming the FIM tokens the vocabulary lacks; InvalidArgument for a field of
// the wrong type.
StatusOr<CompletionRequest> ParseInfillRequest(const nlohmann::json& body,
                                               const Tokenizer& tokenizer,
                                               const CompletionLimits& limits,
                                               const InfillShape& shape);

}  // namespace kvault

#endif  // KVAULT_SERVER_INFILL_H_
