// Installs the global functions templates may call (range, dict, namespace, raise_exception,
// strftime_now) into a scope.
#pragma once
#include <ctime>
#include <optional>

#include "chat/jinja_interpreter.h"

namespace polykv::jinja {

// `now`: the broken-down time strftime_now formats; nullopt reads the clock at each call.
void install_globals(Scope& scope, const std::optional<std::tm>& now);

}  // namespace polykv::jinja
