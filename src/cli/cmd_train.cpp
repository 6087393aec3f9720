// `rnn_dist train`: parses the options (command line, then an optional --config file) into a
// TrainerConfig, starts MPI and runs the training job (trainer.h).
#include <boost/program_options.hpp>

#include <iostream>

#include "rnn_dist/cli/commands.h"
#include "rnn_dist/cli/options.h"
#include "rnn_dist/train/trainer.h"

namespace po = boost::program_options;

namespace rnn_dist {
namespace {

// The command that resumes this run: its own arguments (shell-quoted where needed), --resume added.
std::string resume_command(const Args& args) {
  std::string cmd = "rnn_dist train";
  bool resumes = false;
  for (const std::string& a : args) {
    resumes = resumes || a == "--resume" || a.rfind("--resume=", 0) == 0;
    const bool plain = !a.empty() && a.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                         "0123456789-_=+./:,@%") == std::string::npos;
    std::string quoted = "'";
    for (char c : a) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    cmd += " " + (plain ? a : quoted + "'");
  }
  return resumes ? cmd : cmd + " --resume";
}

}  // namespace

int cmd_train(const Args& args) {
  TrainerConfig o;
  po::options_description desc = train_options(o, "rnn_dist train options", true);
  const ParsedOptions parsed = parse_options(args, desc, false, o.ranks_per_node);
  if (parsed.help) {
    std::cout << "usage: [mpirun -np N] rnn_dist train --train FILE [options]\n\n" << desc << "\n";
    return 0;
  }
  o.resume_command = resume_command(args);
  return run_mpi_command(parsed, o.ranks_per_node, [&] { check_config(o); },
                         [&](Topology& topo) { return train(o, topo); });
}

}  // namespace rnn_dist
