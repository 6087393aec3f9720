// The names of the math modes (--precision).
#include "rnn_dist/nn/backend.h"

#include "rnn_dist/util/error.h"

namespace rnn_dist {

MathMode math_mode_from(const std::string& precision) {
  for (MathMode m : {MathMode::fp32, MathMode::tf32, MathMode::bf16})
    if (precision == math_mode_name(m)) return m;
  throw InputError(cat("--precision: unknown precision '", precision, "' (fp32, tf32 or bf16)"));
}

const char* math_mode_name(MathMode math) {
  switch (math) {
    case MathMode::tf32: return "tf32";
    case MathMode::bf16: return "bf16";
    default: return "fp32";
  }
}

}  // namespace rnn_dist
