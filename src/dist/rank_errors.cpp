// Error agreement and job termination across ranks (see rank_errors.h).
#include "rnn_dist/dist/rank_errors.h"

#include <iostream>
#include <string>
#include <vector>

namespace rnn_dist {

int agree_on_errors(Topology& topo, const std::function<void()>& fn) {
  std::string error;
  try {
    fn();
  } catch (const Error& e) {
    error = cat(e.exit_code(), " ", e.what());
  }
  const std::vector<std::string> errors = topo.world->allgather_strings(error);
  for (int r = 0; r < topo.world_size(); ++r) {
    if (errors[r].empty()) continue;
    const size_t space = errors[r].find(' ');
    if (topo.world_rank() == 0)
      std::cerr << "rnn_dist: error: " << (r > 0 ? cat("rank ", r, ": ") : "") << errors[r].substr(space + 1)
                << std::endl;
    return std::stoi(errors[r].substr(0, space));
  }
  return 0;
}

int end_job(Topology& topo, const Error& e) {
  if (dynamic_cast<const AgreedError*>(&e)) {
    if (topo.world_rank() == 0) std::cerr << "rnn_dist: error: " << e.what() << std::endl;
    return e.exit_code();
  }
  const bool many = topo.world_size() > 1;
  std::cerr << "rnn_dist: error: " << (many ? cat("rank ", topo.world_rank(), " (", topo.host, "): ") : "") << e.what()
            << std::endl;
  if (many) MpiEnvironment::abort(e.exit_code());
  return e.exit_code();
}

}  // namespace rnn_dist
