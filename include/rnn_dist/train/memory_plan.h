// Predicts one rank's peak memory for a training run before it starts (`rnn_dist check`): the model, its
// optimizer and its workspaces are built, and the largest batches this rank will train and evaluate are
// run, on a backend that allocates nothing and computes nothing but counts every allocation, through the
// trainer's own code (with the adaptive softmax, each cluster with the most rows any one batch routes
// to it, read from the files); the host's terms (the files' index, batches read ahead, checkpoint staging, the
// process itself) are added from the same sizes the trainer will use.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rnn_dist/data/dataset.h"
#include "rnn_dist/nn/backend.h"
#include "rnn_dist/train/trainer_config.h"

namespace rnn_dist {

struct MemoryPlan {
  // In the device's memory (on the CPU backend, the host's): counted by the dry run.
  int64_t params = 0, grads = 0, optimizer = 0;
  int64_t workspaces = 0;     // activations and workspaces of the largest batches, training and evaluation,
                              // and the model's other small buffers
  int64_t communication = 0;  // the all-reduce's scratch, the carried stream state, the step's scalars
  // In host memory.
  int64_t data = 0;     // the files' index and vocabulary, the batches read ahead, host scratch of a step
  int64_t write = 0;    // a checkpoint's host copies while rank 0 writes it (with the workspaces still held)
  int64_t load = 0;     // a checkpoint's tensors on the host while --resume or --init-from loads it (before
                        // the first step, so not at the same time as the workspaces)
  int64_t process = 0;  // the process before training: code, libraries, MPI (measured by the caller)
  bool cpu = true;      // the device's memory is the host's

  int64_t model_bytes() const { return params + grads + optimizer; }
  // The device's peak: the model, then the larger of the training phase and the loading phase.
  int64_t device_peak() const { return model_bytes() + workspaces + communication; }
  // The host's peak (the process's resident memory): on the CPU the device's memory with the host's terms.
  int64_t host_peak() const;
  // "1.23 GiB (parameters 0.10, gradients 0.10, optimizer 0.20, workspaces 0.80, ...)".
  std::string describe() const;
};

// The plan of this rank (`rank` of `world`) for the run `config` describes on `train`, evaluating the
// files `evaluated` (--valid, --test), with the device kind of `target` (its LSTM implementation and
// logits block size are used; nothing is allocated on it). resume_from: the checkpoint --resume or
// --init-from will load ("" if none). The CUDA backend's own small scratch (per-row loss, the packing on
// the device) is not counted.
MemoryPlan plan_memory(const TrainerConfig& config, const SequenceFile& train,
                       const std::vector<SequenceFile>& evaluated, int world, int rank, Backend& target,
                       const std::string& resume_from);

// A backend of target's kind that allocates nothing and computes nothing, counting the bytes of its
// Buffers: a Model built on it has the layout of one built on target (read_checkpoint uses it so).
std::unique_ptr<Backend> make_counting_backend(Backend& target);

// This process's resident memory now and at its peak, and the host's available memory (Linux:
// /proc/self/status VmRSS and VmHWM, /proc/meminfo MemAvailable; 0 elsewhere).
int64_t resident_bytes();
int64_t peak_resident_bytes();
int64_t available_memory_bytes();

// Human-readable bytes: "512 B", "3.2 MiB", "1.25 GiB".
std::string bytes_text(int64_t bytes);

}  // namespace rnn_dist
