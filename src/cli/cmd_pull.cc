// duet pull OWNER/NAME[:QUANT]: a GGUF from a Hugging Face repository into
// the cache (cli/hub.h); prints the local path. Every command that takes
// -m also takes -hf OWNER/NAME[:QUANT] (main.cc pulls first).
#include <cstdio>

#include "cli/command.h"
#include "cli/hub.h"

namespace duet::cli {
namespace {

const bool pull_registered = register_command(
    "pull", "Download a GGUF from a Hugging Face repository by name (OWNER/NAME[:QUANT], default Q4_K_M)",
    [](CLI::App& app) {
      auto name = std::make_shared<std::string>();
      app.add_option("model", *name, "OWNER/NAME[:QUANT]; HF_ENDPOINT, HF_TOKEN and DUET_CACHE apply")->required();
      return [name] {
        auto ref = parse_model_ref(*name);
        if (!ref) return fail(ref.error());
        auto path = pull_model(hub_config_from_env(), *ref);
        if (!path) return fail(path.error());
        std::printf("%s\n", path->c_str());
        return 0;
      };
    });

}  // namespace
}  // namespace duet::cli
