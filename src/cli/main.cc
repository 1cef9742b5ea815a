#include <cstdio>
#include <map>
#include <memory>
#include <vector>

#include "cli/command.h"

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
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  for (auto& [sub, run] : runners)
    if (sub->parsed()) return run();
  return 1;
}
