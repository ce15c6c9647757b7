// The web UI's files (webui/), compiled into the binary by
// cmake/kvault_embed.cmake (the generated definition lives in the build
// folder), so the server needs no file at run time.
#ifndef KVAULT_SERVER_WEBUI_ASSETS_H_
#define KVAULT_SERVER_WEBUI_ASSETS_H_

#include <span>

#include "core/embedded_file.h"

namespace kvault {

// Returns every embedded web UI file, named by its path under webui/.
std::span<const EmbeddedFile> WebUiAssets();

}  // namespace kvault

#endif  // KVAULT_SERVER_WEBUI_ASSETS_H_
