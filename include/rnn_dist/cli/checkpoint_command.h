// What the single-process commands that apply a checkpoint share (eval, sample, predict): their option
// parsing, the device they run on, and the model loaded from the checkpoint.
#pragma once

#include <boost/program_options.hpp>

#include <memory>
#include <string>

#include "rnn_dist/cli/commands.h"
#include "rnn_dist/nn/model.h"
#include "rnn_dist/train/checkpoint.h"

namespace rnn_dist {

// Parses args into desc's variables (InputError on a bad option or a non-finite number); returns false
// when --help was printed, with `usage` above the options.
bool parse_command(const Args& args, const boost::program_options::options_description& desc, const char* usage);

// --device as train's, for one process: cpu, cuda (InputError without a usable GPU), or auto (GPU 0 of
// the visible ones when there is one, saying so when there is none; `doing` completes "no usable GPU, ...").
DeviceType command_device(const std::string& device, const char* doing);

// The checkpoint's model on `backend`, its parameters loaded; `data` receives the rest of the checkpoint.
std::unique_ptr<Model> load_model(const std::string& path, Backend& backend, CheckpointData& data);

}  // namespace rnn_dist
