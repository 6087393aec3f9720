// Packing::from_lengths and the names of the poolings (see packing.h).
#include "rnn_dist/nn/packing.h"

#include "rnn_dist/util/error.h"

namespace rnn_dist {

Packing Packing::from_lengths(std::span<const int> lengths) {
  if (lengths.empty()) throw Error("a packed batch needs at least one sequence");
  for (size_t b = 0; b < lengths.size(); ++b) {
    if (lengths[b] < 1) throw Error(cat("sequence ", b, " of the batch has length ", lengths[b], " (must be >= 1)"));
    if (b > 0 && lengths[b] > lengths[b - 1])
      throw Error(cat("batch lengths must be sorted longest first, but sequence ", b, " has length ", lengths[b],
                      " after ", lengths[b - 1]));
  }
  Packing p;
  p.lengths.assign(lengths.begin(), lengths.end());
  const int steps = lengths[0];
  p.batch_sizes.resize(steps);
  p.step_offset.resize(steps + 1);
  int active = p.batch();
  p.step_offset[0] = 0;
  for (int t = 0; t < steps; ++t) {
    while (lengths[active - 1] <= t) --active;  // lengths[0] > t, so this stops at active >= 1
    p.batch_sizes[t] = active;
    p.step_offset[t + 1] = p.step_offset[t] + active;
  }
  return p;
}

Pool parse_pool(std::string_view name) {
  for (Pool p : {Pool::last, Pool::mean, Pool::max})
    if (name == pool_name(p)) return p;
  throw InputError(cat("--pool: unknown pooling '", name, "' (last, mean or max)"));
}

const char* pool_name(Pool pool) {
  switch (pool) {
    case Pool::mean: return "mean";
    case Pool::max: return "max";
    default: return "last";
  }
}

}  // namespace rnn_dist
