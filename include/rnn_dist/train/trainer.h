// The training job behind `rnn_dist train`: every rank plans the same steps, reads only its own part of
// each, computes the gradient of its part's summed loss scaled by 1/(global target tokens), and the
// gradients' all-reduce makes every rank's update equal (one small all-reduce beside it carries the loss
// sum, the counts and the stop requests). Packed mode trains on shuffled global batches of whole sequences; stream mode on a token stream
// with the hidden state carried between steps (truncated BPTT).
#pragma once

#include "rnn_dist/dist/communicator.h"
#include "rnn_dist/train/trainer_config.h"

namespace rnn_dist {

// Runs the job on every rank of topo; returns the exit code. Errors are reported once: set-up errors
// are agreed between ranks, an error during training on one rank ends every rank. SIGTERM, SIGINT or
// SIGUSR1 on any rank makes every rank finish its step, rank 0 write a checkpoint, and all exit 0.
int train(const TrainerConfig& config, Topology& topo);

}  // namespace rnn_dist
