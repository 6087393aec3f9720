// Option parsing and start-up shared by the MPI subcommands (train, check): the command line, then an
// INI-style --config file (the command line wins), then RNN_DIST_RANKS_PER_NODE as --ranks-per-node's
// default; then MPI, with errors reported once.
#pragma once

#include <boost/program_options.hpp>

#include <functional>
#include <string>

#include "rnn_dist/cli/commands.h"
#include "rnn_dist/dist/communicator.h"

namespace rnn_dist {

struct TrainerConfig;

struct ParsedOptions {
  bool help = false;  // --help was given: print the usage and exit 0
  std::string error;  // a parse error, reported after MPI start-up so that it is printed once
};

// Every option of `rnn_dist train`, bound to o; `rnn_dist check` takes them too (without requiring --train),
// so that it checks the run it is given.
boost::program_options::options_description train_options(TrainerConfig& o, const std::string& title,
                                                           bool train_required);

// Keeps the last occurrence of every option that takes one value (composing ones keep all), so that an
// option given twice takes its second value, as wrapper scripts that append overrides expect.
boost::program_options::parsed_options keep_last(boost::program_options::parsed_options parsed);

// Parses into the variables desc is bound to (the last occurrence of an option wins, on the command line
// and within a config file). With config_ignores_unknown, keys of a --config file that
// desc does not know are skipped (check reads train's config files); otherwise they are errors.
ParsedOptions parse_options(const Args& args, const boost::program_options::options_description& desc,
                            bool config_ignores_unknown, int& ranks_per_node);

// Throws InputError naming the first float or double option whose value is inf or nan (which parse as
// numbers, and which comparisons such as `lr > 0` let through).
void refuse_non_finite(const boost::program_options::variables_map& vm);

// Starts MPI and the topology, then reports a parse error, or what validate() throws on any rank, once
// (rank 0) and returns its exit code on every rank; otherwise returns run(topology).
int run_mpi_command(const ParsedOptions& parsed, int ranks_per_node, const std::function<void()>& validate,
                    const std::function<int(Topology&)>& run);

}  // namespace rnn_dist
