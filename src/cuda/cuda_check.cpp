// The reporting half of cuda_check.h: where the failing rank runs, and the error or warning line.
#include "cuda_check.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "rnn_dist/util/error.h"

namespace rnn_dist::cuda {

std::string host_name() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "?";
  return buf;
}

std::string where() {
  // The launcher's variables, not MPI: a failure may come before MPI_Init or in a process without MPI.
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"})
    if (const char* v = std::getenv(var); v && *v) return cat("rank ", v, " on host ", host_name());
  return cat("rank ? on host ", host_name());
}

namespace {
std::string line(const char* library, const char* message, const char* expr, const char* file, int at) {
  return cat(library, " error: ", message ? message : "(no message)", " in `", expr, "` at ", file, ":", at, " (",
             where(), ")");
}
}  // namespace

void fail(const char* library, const char* message, const char* expr, const char* file, int at) {
  throw Error(line(library, message, expr, file, at));
}

bool sync_after_launch() {
#ifdef NDEBUG
  static const bool sync = [] {
    const char* v = std::getenv("RNN_DIST_CUDA_SYNC");
    return v && std::string(v) == "1";
  }();
  return sync;
#else
  return true;
#endif
}

void discard_stale_error() noexcept { (void)cudaGetLastError(); }

void check_launch(cudaError_t launched, const char* expr, const char* file, int at) {
  if (launched != cudaSuccess) fail("CUDA", cudaGetErrorString(launched), expr, file, at);
  if (!sync_after_launch()) return;
  const cudaError_t ran = cudaDeviceSynchronize();
  if (ran != cudaSuccess)
    fail("CUDA", cat("kernel failed while running: ", cudaGetErrorString(ran)).c_str(), expr, file, at);
}

void warn(const char* library, const char* message, const char* expr, const char* file, int at) noexcept {
  try {
    std::fprintf(stderr, "warning: %s\n", line(library, message, expr, file, at).c_str());
  } catch (...) {
    std::fprintf(stderr, "warning: %s error in `%s` at %s:%d\n", library, expr, file, at);
  }
}

}  // namespace rnn_dist::cuda
