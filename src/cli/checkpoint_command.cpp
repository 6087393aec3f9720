// Option parsing, device choice and model loading of eval, sample and predict (see checkpoint_command.h).
#include "rnn_dist/cli/checkpoint_command.h"

#include <iostream>

#include "rnn_dist/cli/options.h"
#include "rnn_dist/cuda/cuda_device.h"
#include "rnn_dist/util/error.h"

namespace po = boost::program_options;

namespace rnn_dist {

bool parse_command(const Args& args, const po::options_description& desc, const char* usage) {
  po::variables_map vm;
  try {
    po::store(keep_last(po::command_line_parser(args).options(desc).run()), vm);
    if (vm.count("help")) {
      std::cout << usage << "\n\n" << desc << "\n";
      return false;
    }
    po::notify(vm);
  } catch (const po::error& e) {
    throw InputError(e.what());
  }
  refuse_non_finite(vm);
  return true;
}

std::unique_ptr<Model> load_model(const std::string& path, Backend& backend, CheckpointData& data) {
  data = read_checkpoint(path, backend);
  auto model = std::make_unique<Model>(backend, data.config);
  model->upload_params(data.params);
  return model;
}

DeviceType command_device(const std::string& device, const char* doing) {
  if (device == "cpu") return DeviceType::cpu;
  if (device == "cuda") {
    if (cuda_device_count() == 0)
      throw InputError(cat("--device cuda: no usable GPU here (GPU runtime: ", gpu_runtime_versions(),
                           "); use --device cpu"));
    return DeviceType::cuda;
  }
  if (device != "auto") throw InputError(cat("--device: unknown device '", device, "' (auto, cpu or cuda)"));
  if (cuda_device_count() > 0) return DeviceType::cuda;
  // A notice, on stderr: standard output is the command's result (JSON, predictions, sampled text).
  std::cerr << "--device auto: no usable GPU, " << doing << " on the CPU" << std::endl;
  return DeviceType::cpu;
}

}  // namespace rnn_dist
