// Option parsing and start-up shared by the MPI subcommands (see options.h).
#include "rnn_dist/cli/options.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <vector>

#include "rnn_dist/dist/rank_errors.h"
#include "rnn_dist/util/error.h"

namespace po = boost::program_options;

namespace rnn_dist {

void refuse_non_finite(const po::variables_map& vm) {
  for (const auto& [name, value] : vm) {
    double v = 0;
    if (const auto* f = boost::any_cast<float>(&value.value()))
      v = *f;
    else if (const auto* d = boost::any_cast<double>(&value.value()))
      v = *d;
    if (!std::isfinite(v)) throw InputError(cat("--", name, " must be a finite number (got ", v, ")"));
  }
}

po::parsed_options keep_last(po::parsed_options parsed) {
  std::set<std::string> seen;
  std::vector<po::option> kept;
  for (auto it = parsed.options.rbegin(); it != parsed.options.rend(); ++it) {
    const po::option_description* d = parsed.description->find_nothrow(it->string_key, false);
    const bool composing = d && d->semantic()->is_composing();
    if (it->string_key.empty() || composing || seen.insert(it->string_key).second) kept.push_back(*it);
  }
  parsed.options.assign(kept.rbegin(), kept.rend());
  return parsed;
}

ParsedOptions parse_options(const Args& args, const po::options_description& desc, bool config_ignores_unknown,
                            int& ranks_per_node) {
  ParsedOptions out;
  try {
    po::variables_map vm;
    po::store(keep_last(po::command_line_parser(args).options(desc).run()), vm);
    if (vm.count("help")) {
      out.help = true;
      return out;
    }
    if (vm.count("config")) {
      // Stored after the command line, so options given there keep their command-line values.
      const std::string path = vm["config"].as<std::string>();
      if (std::filesystem::is_directory(path)) throw InputError(cat("--config ", path, ": is a directory, not a file"));
      std::ifstream in(path);
      if (!in) throw InputError(cat("--config ", path, ": cannot open"));
      po::parsed_options file(&desc);
      try {
        file = keep_last(po::parse_config_file(in, desc, config_ignores_unknown));
      } catch (const po::error& e) {
        throw InputError(cat("--config ", path, ": ", e.what()));
      }
      for (const po::option& o : file.options)
        if (o.string_key == "config")
          throw InputError(cat("--config ", path, ": names another config file (config = ...), which is not read: "
                               "give its options in this file, or that file as --config"));
      po::store(file, vm);
    }
    po::notify(vm);
    refuse_non_finite(vm);
    if (vm["ranks-per-node"].defaulted())
      if (const char* env = std::getenv("RNN_DIST_RANKS_PER_NODE")) {
        char* end = nullptr;
        ranks_per_node = static_cast<int>(std::strtol(env, &end, 10));
        if (*env == '\0' || *end != '\0' || ranks_per_node < 0)
          throw InputError(cat("RNN_DIST_RANKS_PER_NODE='", env, "' is not a rank count"));
      }
    if (ranks_per_node < 0) throw InputError("--ranks-per-node must not be negative");
  } catch (const po::error& e) {
    out.error = e.what();
  } catch (const InputError& e) {
    out.error = e.what();
  }
  return out;
}

int run_mpi_command(const ParsedOptions& parsed, int ranks_per_node, const std::function<void()>& validate,
                    const std::function<int(Topology&)>& run) {
  MpiEnvironment mpi(nullptr, nullptr);
  Topology topo = make_mpi_topology(parsed.error.empty() ? ranks_per_node : 0);
  if (int rc = agree_on_errors(topo, [&] {
        if (!parsed.error.empty()) throw InputError(parsed.error);
        validate();
      }))
    return rc;
  return run(topo);
}

}  // namespace rnn_dist
