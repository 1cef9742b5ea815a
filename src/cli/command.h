// Subcommands register themselves here (one file per command), so adding a
// command touches no shared list.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

#include "core/error.h"

namespace duet::cli {

// Declares a subcommand's options on `app` and returns what runs it; the
// returned function gives the process exit code.
using CommandSetup = std::function<std::function<int()>(CLI::App& app)>;

bool register_command(const std::string& name, const std::string& help, CommandSetup setup);

// Prints "duet: error: <message>" to stderr and returns exit code 1.
int fail(const Error& e);

}  // namespace duet::cli
