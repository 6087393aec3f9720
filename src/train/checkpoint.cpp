// Checkpoint writing and reading (see checkpoint.h).
#include "rnn_dist/train/checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "rnn_dist/data/h5.h"
#include "rnn_dist/train/fault_injection.h"
#include "rnn_dist/train/memory_plan.h"
#include "rnn_dist/util/atomic_file.h"
#include "rnn_dist/util/error.h"

namespace rnn_dist {

namespace fs = std::filesystem;

namespace {

// Checkpoint files of a directory, oldest first (the zero-padded step sorts by name).
std::vector<std::string> list_checkpoints(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const auto& e : fs::directory_iterator(dir)) {
    std::string n = e.path().filename().string();
    if (n.starts_with("step-") && n.ends_with(".h5") && n.size() == 16) out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// FNV-1a (64 bit) over the bytes of every parameter, in the order and layout of the PyTorch names, so
// the value does not depend on the backend's internal weight layout.
std::string params_checksum(const std::vector<float>& flat, const std::vector<ParamSlice>& slices) {
  uint64_t h = 1469598103934665603ull;
  for (const ParamSlice& s : slices) {
    const auto* p = reinterpret_cast<const unsigned char*>(flat.data() + s.offset);
    const size_t n = static_cast<size_t>(numel_of(s.shape)) * sizeof(float);
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  }
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

// Temporaries of writes that never committed (the writer was killed): only rank 0 of one job writes to
// a directory, and its own have committed when this runs, so any left is stale.
void remove_stale_temporaries(const std::string& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if ((n.starts_with("step-") || n.starts_with("best.")) && n.find(".h5.tmp.") != std::string::npos)
      fs::remove(e.path(), ec);
  }
}

}  // namespace

std::vector<float> to_file_order(const std::vector<float>& flat, const std::vector<ParamSlice>& slices) {
  std::vector<float> out;
  for (const ParamSlice& s : slices)
    out.insert(out.end(), flat.begin() + s.offset, flat.begin() + s.offset + numel_of(s.shape));
  return out;
}

std::vector<float> from_file_order(const std::vector<float>& file, const std::vector<ParamSlice>& slices,
                                   int64_t total, const std::string& what) {
  int64_t need = 0;
  for (const ParamSlice& s : slices) need += numel_of(s.shape);
  if (static_cast<int64_t>(file.size()) != need)
    throw InputError(cat(what, " has ", file.size(), " values, the model has ", need, " parameters"));
  std::vector<float> flat(static_cast<size_t>(total), 0.0f);
  auto next = file.begin();
  for (const ParamSlice& s : slices) {
    std::copy_n(next, numel_of(s.shape), flat.begin() + s.offset);
    next += numel_of(s.shape);
  }
  return flat;
}

std::string newest_checkpoint(const std::string& dir) {
  std::vector<std::string> all = list_checkpoints(dir);
  return all.empty() ? "" : all.back();
}

std::string best_checkpoint_path(const std::string& dir) { return (fs::path(dir) / "best.h5").string(); }

std::string checkpoint_path(const std::string& dir, int64_t step) {
  char name[32];
  std::snprintf(name, sizeof(name), "step-%08lld.h5", static_cast<long long>(step));
  return (fs::path(dir) / name).string();
}

namespace {

// The content of every checkpoint, written to `path` atomically; `extra` adds attributes before the commit.
template <class Extra>
void write_checkpoint_file(const std::string& path, Model& model, Optimizer& optimizer, const Vocabularies& vocab,
                           const TrainingPosition& pos, const std::string& fail_point, Extra extra) {
  const ModelConfig& c = model.config();
  if (c.task != Task::lm && static_cast<int64_t>(vocab.labels.size()) != c.classes)
    throw Error(cat("write_checkpoint: ", vocab.labels.size(), " label names for ", c.classes, " classes"));
  AtomicFile out(path);
  {
    h5::File f = h5::File::create(out.temp_path());
    f.write_attr("/", "format", std::string("rnn_dist.checkpoint"));
    // Version 1 readers know language models only: a classifier or tagger is version 2; a model with
    // tensors neither knows (an LSTM projection, a tied or adaptive output layer) is version 3.
    const bool v3 = c.tie_embeddings || c.adaptive() || c.proj > 0;
    f.write_attr("/", "version", int64_t{v3 ? 3 : c.task == Task::lm ? 1 : 2});
    f.write_attr("/", "task", std::string(task_name(c.task)));
    f.write_attr("/", "vocab_size", c.vocab);
    f.write_attr("/", "embed", int64_t{c.embed});
    f.write_attr("/", "hidden", int64_t{c.hidden});
    f.write_attr("/", "layers", int64_t{c.layers});
    f.write_attr("/", "dropout", double{c.dropout});
    if (c.task != Task::lm) {
      f.write_attr("/", "bidirectional", int64_t{c.bidirectional});
      f.write_attr("/", "classes", c.classes);
      if (c.task == Task::classify) f.write_attr("/", "pool", std::string(pool_name(c.pool)));
      f.write_strings("/label_vocab", vocab.labels);
    }
    if (c.proj > 0) f.write_attr("/", "proj_size", int64_t{c.proj});
    if (c.tie_embeddings) f.write_attr("/", "tie_embeddings", int64_t{1});
    if (c.adaptive()) {
      f.write_attr("/", "softmax", std::string("adaptive"));
      f.write_attr("/", "cutoffs", cutoffs_text(c.cutoffs));
      f.write_attr("/", "div_value", c.div_value);
    }
    f.write_attr("/", "tokenizer", vocab.tokenizer);
    if (!vocab.token_split.empty()) f.write_attr("/", "token_split", vocab.token_split);
    f.write_attr("/", "step", pos.step);
    f.write_attr("/", "epoch", pos.epoch);
    f.write_attr("/", "step_in_epoch", pos.step_in_epoch);
    f.write_attr("/", "validated", int64_t{pos.validated});
    f.write_attr("/", "seed", static_cast<int64_t>(pos.seed));
    f.write_attr("/", "plateau_factor", pos.plateau_factor);
    f.write_attr("/", "best_loss", pos.best_loss);
    f.write_attr("/", "best_objective", pos.best_objective);
    f.write_attr("/", "data_plan", pos.plan);
    f.write_attr("/", "steps_per_epoch", pos.steps_per_epoch);
    f.write_attr("/", "epoch_rows", pos.epoch_rows);
    f.write_strings("/vocab", vocab.tokens);
    if (!vocab.tokenizer_model.empty())  // a checkpoint alone can encode and decode
      f.write("/tokenizer_model", std::vector<uint8_t>(vocab.tokenizer_model.begin(), vocab.tokenizer_model.end()));
    if (!pos.stream_state.empty()) {
      // [h | c], layers x columns x width each: 2 x L x C x H without a projection, flat with one (h is P wide).
      const uint64_t columns = pos.stream_state.size() / (uint64_t(c.layers) * uint64_t(c.hidden + c.state_width()));
      if (c.proj > 0)
        f.write("/stream_state", pos.stream_state);
      else
        f.write("/stream_state", pos.stream_state, {2, uint64_t(c.layers), columns, uint64_t(c.hidden)});
    }
    f.create_group("/model");
    {
      // Freed before the optimizer's state is staged: a MemoryPlan counts the larger of the two.
      const std::vector<float> host = model.download_params();
      f.write_attr("/", "params_fnv1a64", params_checksum(host, model.param_slices()));
      for (const ParamSlice& s : model.param_slices()) {
        std::vector<float> part(host.begin() + s.offset, host.begin() + s.offset + numel_of(s.shape));
        std::vector<uint64_t> shape(s.shape.begin(), s.shape.end());
        f.write("/model/" + s.name, part, shape);
      }
    }
    f.create_group("/optimizer");
    f.write_attr("/optimizer", "kind", optimizer.config().kind);
    f.write_attr("/optimizer", "steps", optimizer.steps());
    // In the file's parameter order, like /model: a checkpoint resumes on any backend.
    for (auto& [name, tensor] : optimizer.state()) {
      std::vector<float> state(tensor->numel());
      model.backend().download(state.data(), tensor->data(), state.size() * sizeof(float));
      f.write("/optimizer/" + name, to_file_order(state, model.param_slices()));
    }
    extra(f);
    f.flush();
  }
  if (std::getenv("RNN_DIST_TEST_FAIL")) injected_failure(0, fail_point.c_str());  // rank 0 writes
  out.commit();
}

}  // namespace

void write_checkpoint(const std::string& dir, int keep, Model& model, Optimizer& optimizer, const Vocabularies& vocab,
                      const TrainingPosition& pos) {
  const std::string path = checkpoint_path(dir, pos.step);
  write_checkpoint_file(path, model, optimizer, vocab, pos, cat("write@", pos.step), [](h5::File&) {});
  remove_stale_temporaries(dir);

  std::vector<std::string> existing = list_checkpoints(dir);
  for (size_t i = 0; i + static_cast<size_t>(std::max(keep, 1)) < existing.size(); ++i) fs::remove(existing[i]);
}

void write_best_checkpoint(const std::string& dir, Model& model, Optimizer& optimizer, const Vocabularies& vocab,
                           const TrainingPosition& pos, const std::string& select_by, double value) {
  write_checkpoint_file(best_checkpoint_path(dir), model, optimizer, vocab, pos, cat("best@", pos.step), [&](h5::File& f) {
    f.write_attr("/", "selected_by", select_by);
    f.write_attr("/", "selected_value", value);
  });
}

CheckpointData read_checkpoint(const std::string& path, Backend& backend) {
  h5::File f = h5::File::open_read(path);
  if (!f.has_attr("/", "format") || f.read_attr_string("/", "format") != "rnn_dist.checkpoint")
    throw InputError(cat(path, ": not an rnn_dist checkpoint"));
  CheckpointData d;
  d.config.vocab = f.read_attr_int("/", "vocab_size");
  d.config.embed = static_cast<int>(f.read_attr_int("/", "embed"));
  d.config.hidden = static_cast<int>(f.read_attr_int("/", "hidden"));
  d.config.layers = static_cast<int>(f.read_attr_int("/", "layers"));
  d.config.dropout = static_cast<float>(f.read_attr_double("/", "dropout"));
  // Version 1 files are language models.
  if (f.has_attr("/", "task")) d.config.task = parse_task(f.read_attr_string("/", "task"), cat(path, ": task"));
  if (d.config.task != Task::lm) {
    d.config.bidirectional = f.read_attr_int("/", "bidirectional") != 0;
    d.config.classes = f.read_attr_int("/", "classes");
    if (d.config.task == Task::classify) d.config.pool = parse_pool(f.read_attr_string("/", "pool"));
    d.label_vocab = f.read_strings("/label_vocab");
    if (static_cast<int64_t>(d.label_vocab.size()) != d.config.classes)
      throw InputError(cat(path, ": /label_vocab has ", d.label_vocab.size(), " entries but classes is ",
                           d.config.classes));
  }
  if (f.has_attr("/", "proj_size")) d.config.proj = static_cast<int>(f.read_attr_int("/", "proj_size"));
  d.config.tie_embeddings = f.has_attr("/", "tie_embeddings") && f.read_attr_int("/", "tie_embeddings") != 0;
  if (f.has_attr("/", "softmax") && f.read_attr_string("/", "softmax") == "adaptive") {
    d.config.cutoffs = parse_cutoffs(f.read_attr_string("/", "cutoffs"), cat(path, ": cutoffs"));
    d.config.div_value = f.read_attr_double("/", "div_value");
  }
  d.tokenizer = f.read_attr_string("/", "tokenizer");
  if (f.has_attr("/", "token_split")) d.token_split = f.read_attr_string("/", "token_split");
  d.vocab = f.read_strings("/vocab");
  if (f.exists("/tokenizer_model")) {
    const std::vector<uint8_t> bytes = f.read<uint8_t>("/tokenizer_model");
    d.tokenizer_model.assign(bytes.begin(), bytes.end());
  }
  if (static_cast<int64_t>(d.vocab.size()) != d.config.vocab)
    throw InputError(cat(path, ": /vocab has ", d.vocab.size(), " entries but vocab_size is ", d.config.vocab));
  d.position.step = f.read_attr_int("/", "step");
  d.position.epoch = f.read_attr_int("/", "epoch");
  d.position.step_in_epoch = f.read_attr_int("/", "step_in_epoch");
  d.position.validated = !f.has_attr("/", "validated") || f.read_attr_int("/", "validated") != 0;
  d.position.seed = static_cast<uint64_t>(f.read_attr_int("/", "seed"));
  d.position.plateau_factor = f.read_attr_double("/", "plateau_factor");
  d.position.best_loss = f.read_attr_double("/", "best_loss");
  if (f.has_attr("/", "best_objective")) d.position.best_objective = f.read_attr_double("/", "best_objective");
  if (f.has_attr("/", "selected_by")) {
    d.selected_by = f.read_attr_string("/", "selected_by");
    d.selected_value = f.read_attr_double("/", "selected_value");
  }
  if (f.has_attr("/", "data_plan")) {
    d.position.plan = f.read_attr_string("/", "data_plan");
    d.position.steps_per_epoch = f.read_attr_int("/", "steps_per_epoch");
  }
  if (f.has_attr("/", "epoch_rows")) d.position.epoch_rows = f.read_attr_int("/", "epoch_rows");
  if (f.exists("/stream_state")) d.position.stream_state = f.read<float>("/stream_state");
  d.optimizer_kind = f.read_attr_string("/optimizer", "kind");
  d.optimizer_steps = f.read_attr_int("/optimizer", "steps");
  // The layout of a model on this backend, without its memory.
  const std::unique_ptr<Backend> counting = make_counting_backend(backend);
  Model layout(*counting, d.config);
  for (const char* name : {"exp_avg", "exp_avg_sq", "momentum_buffer"})
    if (const std::string set = std::string("/optimizer/") + name; f.exists(set))
      d.optimizer_state.emplace_back(
          name, from_file_order(f.read<float>(set), layout.param_slices(), layout.num_params(), cat(path, ": ", set)));
  d.params.assign(layout.num_params(), 0.0f);
  d.parameter_count = layout.parameter_count();
  for (const ParamSlice& s : layout.param_slices()) {
    const std::string name = "/model/" + s.name;
    std::vector<uint64_t> shape = f.shape(name);
    if (!std::equal(shape.begin(), shape.end(), s.shape.begin(), s.shape.end(),
                    [](uint64_t a, int64_t b) { return a == static_cast<uint64_t>(b); }))
      throw InputError(cat(path, ": ", name, " has the wrong shape"));
    std::vector<float> part = f.read<float>(name);
    std::copy(part.begin(), part.end(), d.params.begin() + s.offset);
  }
  if (f.has_attr("/", "params_fnv1a64")) {
    const std::string stored = f.read_attr_string("/", "params_fnv1a64");
    if (stored != params_checksum(d.params, layout.param_slices()))
      throw InputError(cat(path, ": parameter checksum mismatch (file corrupted): stored ", stored, ", computed ",
                           params_checksum(d.params, layout.param_slices())));
  }
  return d;
}

}  // namespace rnn_dist
