// A file compiled into the binary (cmake/kvault_embed.cmake): the web UI's
// assets, the default model. Its bytes live as long as the program.
#ifndef KVAULT_CORE_EMBEDDED_FILE_H_
#define KVAULT_CORE_EMBEDDED_FILE_H_

#include <span>
#include <string_view>

namespace kvault {

struct EmbeddedFile {
  std::string_view name;  // path relative to the embedded folder
  std::string_view data;
};

// Returns the file of `files` named `name`, or null.
inline const EmbeddedFile* FindEmbeddedFile(std::span<const EmbeddedFile> files,
                                            std::string_view name) {
  for (const EmbeddedFile& f : files) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

}  // namespace kvault

#endif  // KVAULT_CORE_EMBEDDED_FILE_H_
