// Percentiles and length summaries (see stats.h).
#include "rnn_dist/util/stats.h"

#include <algorithm>
#include <cmath>

#include "rnn_dist/util/error.h"

namespace rnn_dist {

int64_t percentile(std::vector<int64_t> values, double p) {
  if (values.empty()) return 0;
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(values.size())));
  size_t k = rank == 0 ? 0 : rank - 1;
  k = std::min(k, values.size() - 1);
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(k), values.end());
  return values[k];
}

std::string length_summary(const std::vector<int64_t>& values) {
  if (values.empty()) return "no sequences";
  auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  return cat("min ", *lo, ", p50 ", percentile(values, 50), ", p90 ", percentile(values, 90), ", p99 ",
             percentile(values, 99), ", max ", *hi);
}

}  // namespace rnn_dist
