// GgufParser: fills a GgufFile from its mapped bytes, validating everything
// (see gguf_file.h for the checks and error codes). Internal to src/model.
#ifndef KVAULT_MODEL_GGUF_PARSER_H_
#define KVAULT_MODEL_GGUF_PARSER_H_

#include "core/status.h"
#include "model/gguf_file.h"

namespace kvault {

class GgufParser {
 public:
  // Parses file->file_'s bytes into `file`'s fields; on error `file` is
  // left partly filled and must be discarded.
  static Status Parse(GgufFile* file);
};

}  // namespace kvault

#endif  // KVAULT_MODEL_GGUF_PARSER_H_
