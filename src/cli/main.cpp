// The rnn_dist program: dispatches to a subcommand and turns errors into one line and an exit code.
#include <cerrno>
#include <cstring>
#include <iostream>
#include <map>
#include <string>

#include "rnn_dist/cli/commands.h"
#include "rnn_dist/util/error.h"

namespace {

struct Command {
  int (*run)(const rnn_dist::Args&);
  const char* help;
};

const std::map<std::string, Command>& commands() {
  static const std::map<std::string, Command> c = {
      {"info", {rnn_dist::cmd_info, "summarise a sequence file or a checkpoint"}},
      {"train", {rnn_dist::cmd_train, "train a model (under mpirun for several ranks)"}},
      {"eval", {rnn_dist::cmd_eval, "a checkpoint's loss (and perplexity, or accuracy, F1 and confusion matrix) on a file"}},
      {"sample", {rnn_dist::cmd_sample, "generate text from a language model's checkpoint"}},
      {"predict", {rnn_dist::cmd_predict, "label or tag raw records with a classifier's or tagger's checkpoint"}},
      {"check", {rnn_dist::cmd_check, "check a launch (GPUs, MPI, data, checkpoint dir, threads) under mpirun/srun"}},
  };
  return c;
}

void usage(std::ostream& os) {
  os << "usage: rnn_dist COMMAND [options]\n\ncommands:\n";
  for (const auto& [name, cmd] : commands()) os << "  " << name << std::string(10 - name.size(), ' ') << cmd.help << "\n";
  os << "\n`rnn_dist COMMAND --help` lists the options of a command.\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage(std::cerr);
    return 2;
  }
  std::string name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") {
    usage(std::cout);
    return 0;
  }
  auto it = commands().find(name);
  if (it == commands().end()) {
    std::cerr << "rnn_dist: error: unknown command '" << name << "' (see rnn_dist --help)\n";
    return 2;
  }
  try {
    const int rc = it->second.run(rnn_dist::Args(argv + 2, argv + argc));
    // What went to standard output (a sample, an evaluation, the training log) must have arrived: a full
    // disk under a redirection is an error, not a silent truncation.
    if (!std::cout.flush()) {
      std::cerr << "rnn_dist: error: cannot write to standard output: " << std::strerror(errno) << "\n";
      return rc ? rc : 1;
    }
    return rc;
  } catch (const rnn_dist::Error& e) {
    std::cerr << "rnn_dist: error: " << e.what() << "\n";
    return e.exit_code();
  } catch (const std::exception& e) {
    std::cerr << "rnn_dist: error: " << e.what() << "\n";
    return 1;
  }
}
