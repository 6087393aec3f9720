// Faults on demand, for the tests that prove one rank's failure ends every rank: RNN_DIST_TEST_FAIL.
#pragma once

#include <cstdint>

namespace rnn_dist {

// RNN_DIST_TEST_FAIL="RANK:AT" makes that rank throw Error at AT, "RANK:AT:kill" makes it die of SIGKILL
// there, and "RANK:AT:hang" makes it wait forever. AT is a step (before that step), "check" (where the
// placement is judged, after the node-level gather), "connect" (while the ranks connect), "validate" (as
// an evaluation starts) or "write@STEP" (rank 0, in the middle of writing the checkpoint of STEP: its
// temporary file written, not yet renamed).
// Does nothing when the variable is unset.
void injected_failure(int rank, const char* at);
void injected_failure(int rank, int64_t step);
// RNN_DIST_TEST_FAIL="RANK:STEP:nan": true at that step on that rank, whose gradient the trainer then
// makes NaN, as an overflow would (the step is skipped on every rank).
bool injected_nan(int rank, int64_t step);

}  // namespace rnn_dist
