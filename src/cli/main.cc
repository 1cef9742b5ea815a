#include <cstdio>
#include <map>
#include <memory>
#include <vector>

#include "cli/command.h"
#include "cli/hub.h"

namespace duet::cli {
namespace {

struct Registered {
  std::string help;
  CommandSetup setup;
};

std::map<std::string, Registered>& registry() {
  static std::map<std::string, Registered> r;
  return r;
}

}  // namespace

bool register_command(const std::string& name, const std::string& help, CommandSetup setup) {
  registry()[name] = Registered{help, std::move(setup)};
  return true;
}

int fail(const Error& e) {
  std::fprintf(stderr, "duet: error: %s\n", e.message.c_str());
  return 1;
}

namespace {

// -hf OWNER/NAME[:QUANT] (or --hf-repo) on any command becomes -m PATH once
// the model is in the cache, so every command that takes -m takes a name.
Result<std::vector<std::string>> resolve_hub_models(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i] != "-hf" && args[i] != "--hf-repo") continue;
    if (i + 1 >= args.size()) return err(args[i], " needs OWNER/NAME[:QUANT]");
    DUET_ASSIGN(const ModelRef ref, parse_model_ref(args[i + 1]));
    DUET_ASSIGN(std::string path, pull_model(hub_config_from_env(), ref));
    args[i] = "-m";
    args[i + 1] = std::move(path);
  }
  return args;
}

}  // namespace
}  // namespace duet::cli

int main(int argc, char** argv) {
  using namespace duet::cli;
  CLI::App app{"duet: LLM inference engine and OpenAI-compatible server"};
  app.require_subcommand(1);
  std::vector<std::pair<CLI::App*, std::function<int()>>> runners;
  for (auto& [name, reg] : registry()) {
    CLI::App* sub = app.add_subcommand(name, reg.help);
    runners.emplace_back(sub, reg.setup(*sub));
  }
  auto args = resolve_hub_models(argc, argv);
  if (!args) return fail(args.error());
  std::vector<char*> argp;
  for (std::string& a : *args) argp.push_back(a.data());
  try {
    app.parse(static_cast<int>(argp.size()), argp.data());
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  for (auto& [sub, run] : runners)
    if (sub->parsed()) return run();
  return 1;
}
