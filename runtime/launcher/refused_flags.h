// Refused flags: horovodrun flags that khorovodrun cannot honour.
//
// Every flag of horovodrun's parser (horovod/runner/launch.py) is either
// honoured by khorovodrun with Horovod's meaning (launch_options.h,
// horovodrun_flags.h) or listed here with the reason it is refused. A
// refused flag is parsed (with its value, if it takes one) so that the
// command line fails with that reason instead of CLI11's "not expected".
//
// Contract: AddRefusedFlags registers every refused flag on the app and
// records the ones given in `given`; RefusalOf returns kInvalidArgument
// naming the first given flag and its reason, Ok when none was given.
//
// Thread-safety: used during argument parsing only.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "khorovod/status.h"

namespace khorovod::launcher {

struct RefusedFlags {
  std::vector<std::string> given;  // long names, in the order CLI11 saw them
  std::string value_sink;          // values of refused flags land here
};

void AddRefusedFlags(CLI::App& app, RefusedFlags& refused);
Status RefusalOf(const RefusedFlags& refused);

// horovodrun's single-dash long spellings (-np, -cb, -hostfile,
// -prefix-timestamp) as the double-dash names CLI11 accepts; other tokens
// are returned unchanged.
std::string NormalizeSingleDashFlag(const std::string& token);

}  // namespace khorovod::launcher
