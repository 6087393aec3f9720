// The training job (see trainer.h): set-up agreed between ranks, the step loop with read-ahead, the
// all-reduce, the optimizer, logging, validation, checkpoints, signals and the non-finite-step policy.
#include "rnn_dist/train/trainer.h"

#include <algorithm>
#include <filesystem>
#include <chrono>
#include <cmath>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <iterator>
#include <iostream>
#include <limits>
#include <optional>
#include <utility>

#include "rnn_dist/backends/make_backend.h"
#include "rnn_dist/cuda/cuda_device.h"
#include "rnn_dist/cuda/nccl_communicator.h"
#include "rnn_dist/data/dataset.h"
#include "rnn_dist/dist/gradient_reducer.h"
#include "rnn_dist/dist/sparse_exchange.h"
#include "rnn_dist/dist/rank_errors.h"
#include "rnn_dist/dist/watchdog.h"
#include "rnn_dist/train/checkpoint.h"
#include "rnn_dist/train/evaluation.h"
#include "rnn_dist/train/fault_injection.h"
#include "rnn_dist/train/memory_plan.h"
#include "rnn_dist/train/read_ahead.h"
#include "rnn_dist/train/step_source.h"
#include "rnn_dist/train/stream.h"
#include "rnn_dist/util/error.h"
#include "rnn_dist/util/number.h"
#include "rnn_dist/util/random.h"

namespace rnn_dist {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

volatile std::sig_atomic_t g_stop_signal = 0;
constexpr int kStopSignals[] = {SIGTERM, SIGINT, SIGUSR1};
extern "C" void on_stop_signal(int sig) { g_stop_signal = sig; }

// What a step sums over the ranks besides the gradients: its loss sum, loss terms (Batch::units) and
// input rows, and per stop signal how many ranks received it.
struct StepTotals {
  static constexpr int kSize = 3 + std::size(kStopSignals);
  double v[kSize] = {};
  StepTotals(double loss_sum, const Batch& batch, int signal) : v{loss_sum, double(batch.units()), double(batch.tokens())} {
    for (size_t i = 0; i < std::size(kStopSignals); ++i) v[3 + i] = signal == kStopSignals[i];
  }
  double loss_sum() const { return v[0]; }
  double units() const { return v[1]; }
  double rows() const { return v[2]; }
  // The largest signal number any rank received (0: none), as every rank computes it from the same sums.
  int stop_signal() const {
    int s = 0;
    for (size_t i = 0; i < std::size(kStopSignals); ++i)
      if (v[3 + i] > 0) s = std::max(s, kStopSignals[i]);
    return s;
  }
};

// Under Open MPI's mpirun across nodes, a node that drops off the network is noticed only by the TCP
// keepalive of its daemon's connection, and only if that comes before --comm-timeout: once a rank's
// watchdog has ended it, mpirun's abort message to the lost daemon waits in a send queue where keepalive
// does not apply (Linux gives up after about 15 minutes). The line that says so, with settings that fit
// (detection in 3/4 of --comm-timeout), or "" when they already do or another launcher runs the job.
std::string keepalive_warning(double comm_timeout) {
  auto env = [](const char* name) -> const char* { const char* v = std::getenv(name); return v && *v ? v : nullptr; };
  const char* nodes = env("OMPI_MCA_orte_num_nodes");
  if (!env("OMPI_MCA_orte_hnp_uri") || !nodes || std::atoi(nodes) < 2) return "";
  const char *time = env("OMPI_MCA_oob_tcp_keepalive_time"), *intvl = env("OMPI_MCA_oob_tcp_keepalive_intvl"),
             *probes = env("OMPI_MCA_oob_tcp_keepalive_probes");
  const double detection = time && intvl && probes ? std::atof(time) + std::atof(intvl) * std::atof(probes) : -1;
  if (detection > 0 && detection < comm_timeout) return "";
  const int t = std::max(1, int(comm_timeout / 2)), p = std::max(1, int(comm_timeout / 4));
  return cat("warning: mpirun across ", nodes, " nodes with --comm-timeout ", comm_timeout, " s, but Open MPI's TCP keepalive ",
             detection > 0 ? cat("notices a lost node only after ", detection, " s") : std::string("is not set"),
             ": a node that drops off the network would leave mpirun waiting for minutes after every rank has "
             "ended; export OMPI_MCA_oob_tcp_keepalive_time=", t, " OMPI_MCA_oob_tcp_keepalive_intvl=1 "
             "OMPI_MCA_oob_tcp_keepalive_probes=", p, " before mpirun (", t + p, " s), or raise --comm-timeout (jobs/README.md)");
}

// How much longer than --comm-timeout the other ranks wait for rank 0 to write a checkpoint.
constexpr double kCheckpointWriteAllowance = 600;
// The exit status of a run that finished, but with steps skipped or its metrics incomplete (0: neither;
// 1, 2: errors; 3: a deadline).
constexpr int kExitFinishedWithProblems = 4;

// What must match between a checkpoint and the command line's model.
std::string shape_of(const ModelConfig& m) {
  std::string s = cat("task ", task_name(m.task), ", vocab ", m.vocab, ", embed ", m.embed, ", hidden ", m.hidden,
                      m.proj > 0 ? cat(", proj ", m.proj) : "", ", layers ", m.layers);
  if (m.task != Task::lm) s += cat(m.bidirectional ? ", bidirectional" : ", unidirectional", ", ", m.classes, " classes");
  if (m.task == Task::classify) s += cat(", pool ", pool_name(m.pool));
  if (m.task == Task::lm) s += ", " + head_name(m);
  return s;
}

class Trainer {
 public:
  Trainer(const TrainerConfig& c, Topology& topo) : c_(c), topo_(topo), lead_(topo.world_rank() == 0) {}
  ~Trainer();
  // Set-up is local to the rank (no collective, so a rank that fails cannot leave the others waiting);
  // check_ranks_agree() then compares the ranks' plans and placement, and connect() (after every rank has
  // agreed that the job can run) creates the communicators; train() agrees on the errors of each.
  void setup();
  void check_ranks_agree();
  void connect();
  void connected();
  int run();
  DeviceType choose_device();

 private:
  void load_checkpoint(const std::string& path, bool resume);
  void save();
  // After a validation: DIR/best.h5 when `objective` improves on the best so far.
  void save_best(double objective);
  Vocabularies vocabularies() const {
    return {train_->tokenizer(), train_->vocab(), train_->label_vocab(), train_->token_split(),
            train_->tokenizer_model()};
  }
  // The loss and metrics of a file with the training batching, split across ranks and all-reduced.
  Evaluation evaluate(const SequenceFile& file);
  // `steer`: a validation that picks best.h5 and drives the plateau schedule (one at an epoch's end).
  void report_eval(const char* kind, const SequenceFile& file, int64_t epoch, bool steer = true);
  // Rows all ranks have trained in the epoch in progress (collective), -1 when a resumed run does not know
  // those before it.
  int64_t epoch_rows_so_far();
  void log_step(int64_t epoch, float lr, double norm);
  // The watchdog around a collective outside the step's own (nothing with a single rank).
  void arm(const char* what, double margin = 0) {
    if (watchdog_) watchdog_->arm(what, pos_.step, margin);
  }
  void disarm() {
    if (watchdog_) watchdog_->disarm();
  }
  // In stream mode: every rank's columns of the carried state gathered into one global tensor (h: layers x
  // columns x R, R the projection's width or hidden; then c: layers x columns x hidden), for the
  // checkpoint; and the reverse.
  std::vector<float> gather_stream_state();
  void scatter_stream_state(const std::vector<float>& global);
  // The width of the carried h (hc 0) and c (hc 1).
  int64_t state_width(int hc) const { return hc == 0 ? model_->config().state_width() : c_.model.hidden; }
  int64_t state_elems(int hc) const { return int64_t{c_.model.layers} * local_columns_ * state_width(hc); }
  int64_t bucket_elems() const {
    return std::max<int64_t>(1, static_cast<int64_t>(c_.bucket_mb * (1 << 20) / sizeof(float)));
  }
  // Where c starts after h in a state buffer: aligned, as cuDNN wants its state arguments.
  int64_t c_offset() const { return align_elems(state_elems(0)); }

  const TrainerConfig& c_;
  Topology& topo_;
  bool lead_;
  std::optional<SequenceFile> train_, valid_, test_;
  std::unique_ptr<StepSource> source_;
  int64_t local_columns_ = 0, first_column_ = 0;  // stream mode
  int device_index_ = 0;
  std::unique_ptr<Backend> backend_;
  // The gradients' all-reduce runs over topo_ (MPI, host memory) or, when they are on GPUs, over its NCCL
  // mirror nccl_topo_; scratch_ is the hierarchical algorithm's padded copy on the same device.
  Topology nccl_topo_;
  Topology* reduce_topo_ = nullptr;
  Tensor scratch_;
  std::optional<Watchdog> watchdog_;  // deadline of the set-up and of each step's collectives, with several ranks
  double grace_ = 0;                  // this rank's addition to --comm-timeout (see connect())
  bool overlap_ = false;              // --overlap, resolved for this rank's device and the world's size
  std::optional<GradientReducer> reducer_;
  // --sparse-embedding: the touched rows' exchange between ranks, and what it moved over the steps.
  std::optional<SparseExchange> sparse_exchange_;
  double sparse_rows_ = 0, sparse_bytes_ = 0, sparse_seconds_ = 0, sparse_agreed_seconds_ = 0;
  int64_t sparse_gathers_ = 0, sparse_steps_ = 0;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<LrSchedule> schedule_;
  TrainingPosition pos_;
  Tensor state_;  // stream mode: h, then c at c_offset(), of this rank's columns, carried on the device
  int64_t total_steps_ = 0;
  std::ofstream metrics_;
  std::string metrics_error_;  // why the metrics file stopped being written ("" while it is)
  // After each write to metrics_: the first failure is reported once; training goes on without metrics.
  void check_metrics();
  // Progress since the last log line, and where the time went.
  Clock::time_point start_, last_log_;
  double interval_tokens_ = 0, interval_units_ = 0, interval_loss_ = 0;
  double t_wait_ = 0, t_compute_ = 0, t_allreduce_ = 0, t_update_ = 0;
  // Host synchronisations with the device in the steps (Backend::host_syncs): their sum and the most in one.
  int64_t step_syncs_ = 0, max_step_syncs_ = 0, synced_steps_ = 0;
  // The step's loss sum and squared gradient norm (dense part, then the sparse rows') in the backend's
  // memory, read back together.
  Buffer step_scalars_;
  double total_tokens_ = 0;
  int64_t bad_steps_ = 0, bad_in_a_row_ = 0;
  int64_t saved_step_ = -1;  // the step of the last checkpoint written (-1: none in this run)
  int64_t first_step_ = 0;  // pos_.step when this run's training began (after a resume: the checkpoint's)
  // The epoch in progress: this rank's rows in this run, and all ranks' before it (a resumed run's, from
  // its checkpoint; -1 when an older checkpoint did not record them).
  int64_t epoch_rows_ = 0, rows_before_ = 0;
};

void Trainer::setup() {
  const int world = topo_.world_size();
  train_.emplace(SequenceFile::open(c_.train));
  const Task task = train_->task();
  if (!c_.task.empty() && parse_task(c_.task, "--task") != task)
    throw InputError(cat("--task ", c_.task, ": ", c_.train, " holds ", task_name(task),
                         " data (rnn_prep decides: --label-field, --label-from-file or --format tsv make classify "
                         "data, --format conll tag data)"));
  if (task != Task::lm && c_.batching == "stream")
    throw InputError(cat("--batching stream is a language model's mode; ", c_.train, " holds ", task_name(task), " data"));
  if (task == Task::lm && c_.select_by != "loss")
    throw InputError(cat("--select-by ", c_.select_by, ": a language model is selected by its loss"));
  if (c_.select_by != "loss" && c_.valid.empty()) throw InputError(cat("--select-by ", c_.select_by, " needs --valid"));
  for (auto [path, file] : {std::pair{&c_.valid, &valid_}, std::pair{&c_.test, &test_}}) {
    if (path->empty()) continue;
    file->emplace(SequenceFile::open(*path));
    if ((*file)->num_sequences() == 0) throw InputError(cat(*path, ": no sequences"));
    // Every token now (these files are small), not first at the end of an epoch's training.
    (*file)->validate_tokens();
    if ((*file)->vocab() != train_->vocab())
      throw InputError(cat(*path, ": vocabulary differs from the training file ", c_.train));
    if ((*file)->task() != task)
      throw InputError(cat(*path, ": ", task_name((*file)->task()), " data, but ", c_.train, " holds ", task_name(task)));
    if ((*file)->label_vocab() != train_->label_vocab())
      throw InputError(cat(*path, ": labels differ from the training file ", c_.train,
                           " (prepare every split in one rnn_prep run)"));
  }
  for (int64_t i = 0; i < train_->num_sequences(); ++i)
    if (train_->length(i) <= framing_of(task))
      throw InputError(cat(c_.train, ": sequence ", i, task == Task::lm ? " has fewer than 2 tokens"
                                                                        : " has no token between <s> and </s>"));
  if (c_.batching == "stream") {
    auto s = std::make_unique<StreamSource>(*train_, c_.batch.batch_size, c_.bptt, world, topo_.world_rank());
    local_columns_ = s->local_columns();
    first_column_ = s->first_column();
    source_ = std::move(s);
  } else {
    check_sequences_fit(train_->offsets(), c_.batch, framing_of(task));  // a micro-batch holds the longest
    try {
      source_ = std::make_unique<PackedSource>(*train_, step_batching(c_), world, topo_.world_rank(), c_.seed);
    } catch (const InputError& e) {
      // The step's batch is --accumulate micro-batches: say so, where the plan only sees their total.
      if (c_.accumulate == 1) throw;
      throw InputError(cat(e.what(), "; with --accumulate ", c_.accumulate, " a step takes ", c_.accumulate,
                           " micro-batches of --batch-size ", c_.batch.batch_size, " (lower --accumulate)"));
    }
  }
  total_steps_ = source_->steps_per_epoch() * c_.epochs;
  if (c_.max_steps > 0) total_steps_ = std::min(total_steps_, c_.max_steps);

  const DeviceType device = choose_device();
  backend_ = make_backend(device, device_index_, c_.threads,
                          device == DeviceType::cuda ? math_mode_of(c_) : MathMode::fp32);
  check_overlap_device(c_, device);
  model_ = std::make_unique<Model>(*backend_, model_config(c_, *train_));
  model_->init(c_.seed);
  // Overlap pays where there is something to overlap (gradients of more than one bucket) and where the
  // MPI library lets a thread communicate; from 4 ranks with the flat algorithm: below 4, and on the
  // hierarchical algorithm's smaller communicators, Open MPI's non-blocking all-reduce is a binomial tree,
  // twice the bytes of the blocking ring (docs/scaling.md). With one rank nothing is sent at all.
  overlap_ = topo_.world_size() > 1 &&
             (c_.overlap == "on" || (c_.overlap == "auto" && device == DeviceType::cpu && c_.allreduce == "flat" &&
                                     topo_.world_size() >= 4 && mpi_threads_serialized() &&
                                     model_->num_params() - model_->dense_grad_offset() > bucket_elems()));
  optimizer_ = std::make_unique<Optimizer>(*backend_, c_.optimizer, model_->num_params());
  schedule_ = std::make_unique<LrSchedule>(c_.schedule, c_.optimizer.lr, total_steps_);
  // Every buffer a step touches lives on this rank's device: the classic multi-GPU failure, checked.
  auto on_device = [&](const std::string& what, const Tensor& t) {
    if (!(t.device() == backend_->device()))
      throw Error(cat(what, " is on ", t.device().str(), ", not on this rank's device ", backend_->device().str()));
  };
  on_device("the parameters", model_->params());
  on_device("the gradients", model_->grads());
  for (const auto& [name, tensor] : optimizer_->state()) on_device(cat("optimizer state ", name), *tensor);
  if (c_.batching == "stream") {
    state_ = Tensor(*backend_, {c_offset() + state_elems(1)});
    backend_->zero(state_.data(), state_.numel());
    on_device("the carried hidden state", state_);
  }
  if (lead_ && !c_.metrics.empty()) {
    metrics_.open(c_.metrics, std::ios::app);
    if (!metrics_) throw InputError(cat("--metrics ", c_.metrics, ": cannot open for writing"));
  }
  pos_.seed = c_.seed;
  pos_.plan = source_->plan();
  const std::string from = c_.resume.empty() ? "" : newest_checkpoint(c_.checkpoint_dir);
  if (from.empty() && c_.resume == "require")
    throw InputError(cat("--resume=require: no checkpoint in --checkpoint-dir ", c_.checkpoint_dir));
  if (!from.empty()) {
    load_checkpoint(from, true);
  } else {
    if (!c_.resume.empty() && lead_) std::cout << "--resume: no checkpoint in " << c_.checkpoint_dir << ", starting fresh" << std::endl;
    if (!c_.init_from.empty()) load_checkpoint(c_.init_from, false);
  }
}

DeviceType Trainer::choose_device() {
  const int gpus = cuda_device_count();
  if (c_.device == "cpu" || (c_.device == "auto" && gpus == 0)) {
    if (c_.device == "auto" && lead_)
      std::cout << "--device auto: no usable GPU, training on the CPU"
                << (math_mode_of(c_) != MathMode::fp32
                        ? cat(" (in fp32: --precision ", math_mode_name(math_mode_of(c_)), " is ignored)")
                        : "")
                << std::endl;
    return DeviceType::cpu;
  }
  // One rank per GPU: with one visible GPU per rank (srun --gpus-per-task=1) it is device 0, otherwise
  // the rank's local index.
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (gpus != 1 && topo_.local_size() > gpus)
    throw InputError(cat("host ", topo_.host, " runs ", topo_.local_size(), " rank(s) but has ", gpus,
                         " visible GPU(s) (CUDA_VISIBLE_DEVICES=", visible ? visible : "unset",
                         "): launch one rank per GPU (mpirun -np <GPUs per node> per node, or srun --ntasks-per-node=<GPUs> "
                         "--gpus-per-task=1), or use --device cpu"));
  if (c_.deterministic)
    throw InputError("--deterministic: the GPU backend is not bitwise repeatable yet (its embedding gradient uses "
                     "atomics); use --device cpu or drop --deterministic");
  device_index_ = gpus == 1 ? 0 : topo_.local_rank();
  return DeviceType::cuda;
}

void Trainer::check_ranks_agree() {
  // Every rank must plan the same number of steps, or one would wait forever in a collective; and train
  // on the same kind of device. These verdicts come from all-reduced values, so every rank reaches them.
  const int64_t cuda = backend_->device().type == DeviceType::cuda;
  int64_t v[6] = {total_steps_, -total_steps_, topo_.local_size(), -topo_.local_size(), cuda, -cuda};
  topo_.world->allreduce_max(v, 6);
  if (v[0] != -v[1]) throw Error("ranks disagree on the number of training steps (are their data files the same?)");
  if (c_.allreduce == "hierarchical" && v[2] != -v[3])
    throw InputError("--allreduce hierarchical needs the same number of ranks on every node");
  if (v[4] != -v[5]) throw InputError("--device auto chose a GPU on some ranks and the CPU on others: set --device");
  // This one is reached by the ranks of one node only, so no rank may act on it before train() has agreed
  // on it over the world: the other nodes would otherwise go on into NCCL's set-up and wait there forever.
  if (cuda) {
    // Two ranks of a node on one GPU (each sees a single GPU, but the same one) would compete for it.
    const std::vector<std::string> names = topo_.node->allgather_strings(backend_->device_name());
    for (int a = 0; a < topo_.local_size(); ++a)
      for (int b = a + 1; b < topo_.local_size(); ++b)
        if (names[a] == names[b])
          throw InputError(cat("host ", topo_.host, ": local ranks ", a, " and ", b, " are bound to the same GPU (",
                               names[a], "): give each rank its own GPU (srun --gpus-per-task=1, or one rank per "
                               "visible GPU)"));
  }
  injected_failure(topo_.world_rank(), "check");
}

void Trainer::connect() {
  if (lead_)
    if (const std::string w = keepalive_warning(c_.comm_timeout); !w.empty()) std::cerr << w << std::endl;
  // Rank 0 reports first; the others, waiting for the same hung rank, a little later (one message). NCCL's
  // set-up blocks without a deadline (a rank that fails or hangs in it holds the others there), so it runs
  // under the watchdog, which stays armed until every rank has agreed that it went well (connected()).
  if (topo_.world_size() > 1) {
    grace_ = Watchdog::grace_of(topo_.world_rank(), c_.comm_timeout);
    watchdog_.emplace(c_.comm_timeout, grace_, cat("rank ", topo_.world_rank(), " (", topo_.host, ")"));
    watchdog_->arm("the set-up of the communicators", 0);
  }
  injected_failure(topo_.world_rank(), "connect");
  // On GPUs the gradients live in device memory: they are summed by NCCL, bootstrapped over MPI. A single
  // rank sums nothing (the GradientReducer skips it) and starts no NCCL. NCCL's deadline has the same
  // grace as the watchdog's, so that rank 0 reports there too.
  const bool nccl = backend_->device().type == DeviceType::cuda && topo_.world_size() > 1;
  if (nccl) nccl_topo_ = make_nccl_topology(topo_, *backend_, c_.comm_timeout + grace_);
  reduce_topo_ = nccl ? &nccl_topo_ : &topo_;
  scratch_ = Tensor(*backend_, {0});
  step_scalars_ = Buffer(*backend_, 3 * sizeof(double));
  GradientReducer::Options ro;
  ro.algo = c_.allreduce == "flat" ? AllreduceAlgo::flat : AllreduceAlgo::hierarchical;
  ro.wire = c_.allreduce_dtype == "bf16" ? WireType::bf16 : WireType::fp32;
  ro.overlap = overlap_;
  ro.bucket_elems = bucket_elems();
  reducer_.emplace(*reduce_topo_, scratch_, ro, watchdog_ ? &*watchdog_ : nullptr, nccl ? kNcclAbortMargin : 0.0);
  if (model_->sparse_embedding_grad()) {
    sparse_exchange_.emplace(*backend_, *topo_.world, *reduce_topo_->world, model_->config().vocab,
                             model_->config().embed, sparse_exchange_mode_from(c_.sparse_exchange));
  }
  if (c_.verbose) {
    const Device d = backend_->device();
    const std::vector<std::string> lines = topo_.world->allgather_strings(
        cat("rank ", topo_.world_rank(), "/", topo_.world_size(), " (local ", topo_.local_rank(), "/",
            topo_.local_size(), ") on ", topo_.host, ": ", backend_->device_name(),
            d.type == DeviceType::cpu ? cat(", ", c_.threads, " thread(s)")
                                      : cat(", ", math_mode_name(math_mode_of(c_)), " matrix products")));
    if (lead_)
      for (const std::string& l : lines) std::cout << "placement: " << l << std::endl;
  }
}

void Trainer::connected() {
  if (watchdog_) watchdog_->disarm();
}

Trainer::~Trainer() {
  reducer_.reset();  // its thread first: it uses the communicators
  // Destroying NCCL communicators waits for their peers, which may be gone: under the deadline too.
  if (watchdog_ && nccl_topo_.world) {
    watchdog_->arm("the shutdown of the NCCL communicators", pos_.step);
    nccl_topo_ = Topology();
    watchdog_->disarm();
  }
}

void Trainer::load_checkpoint(const std::string& path, bool resume) {
  CheckpointData ck = read_checkpoint(path, *backend_);
  const std::string saved = shape_of(ck.config), ours = shape_of(model_->config());
  if (saved != ours) throw InputError(cat(path, ": model (", saved, ") differs from the command line's (", ours, ")"));
  if (ck.vocab != train_->vocab()) throw InputError(cat(path, ": vocabulary differs from ", c_.train));
  if (ck.label_vocab != train_->label_vocab()) throw InputError(cat(path, ": labels differ from ", c_.train));
  model_->upload_params(ck.params);
  if (!resume) {
    if (lead_) std::cout << "initialised from " << path << " (fresh optimizer)" << std::endl;
    return;
  }
  if (ck.optimizer_kind != c_.optimizer.kind)
    throw InputError(cat(path, ": written with --optimizer ", ck.optimizer_kind, ", not ", c_.optimizer.kind));
  optimizer_->set_steps(ck.optimizer_steps);
  for (auto& [name, tensor] : optimizer_->state()) {
    auto saved = std::find_if(ck.optimizer_state.begin(), ck.optimizer_state.end(),
                              [&](const auto& entry) { return entry.first == name; });
    // A moment estimate left at zero would resume a different run, silently: refuse instead.
    if (saved == ck.optimizer_state.end() || static_cast<int64_t>(saved->second.size()) != tensor->numel())
      throw InputError(cat(path, ": no usable /optimizer/", name, " for --optimizer ", c_.optimizer.kind));
    backend_->upload(tensor->data(), saved->second.data(), saved->second.size() * sizeof(float));
  }
  const TrainingPosition& p = ck.position;
  pos_.step = p.step;
  pos_.epoch = p.epoch;
  pos_.step_in_epoch = p.step_in_epoch;
  pos_.validated = p.validated;
  schedule_->plateau_factor = p.plateau_factor;
  schedule_->best_loss = p.best_loss;
  pos_.best_objective = p.best_objective;
  // The rows trained so far of the epoch in progress, under the same plan only (another cuts it otherwise).
  pos_.epoch_rows = p.plan == pos_.plan ? p.epoch_rows : -1;
  const int64_t steps = source_->steps_per_epoch();
  if (p.plan != pos_.plan && p.step_in_epoch > 0 && p.step_in_epoch < steps) {
    // Another global batch cuts the epoch differently: continue at the same fraction of it.
    pos_.step_in_epoch = p.step_in_epoch * steps / std::max<int64_t>(p.steps_per_epoch, 1);
    // One step counter, the optimizer's: the run ends after the rest of the epochs in the new plan.
    total_steps_ = p.step + steps * (c_.epochs - p.epoch + 1) - pos_.step_in_epoch;
    if (c_.max_steps > 0) total_steps_ = std::min(total_steps_, c_.max_steps);
    if (lead_)
      std::cout << "--resume: the checkpoint's data plan (" << p.plan << ") differs from this run's (" << pos_.plan
                << "): continuing epoch " << p.epoch << " at its batch " << pos_.step_in_epoch << " of " << steps
                << ", from step " << p.step << " to step " << total_steps_
                << (c_.batching == "stream" ? ", with a fresh hidden state" : "") << std::endl;
  } else if (p.plan == pos_.plan && !p.stream_state.empty()) {
    scatter_stream_state(p.stream_state);
  }
  if (lead_) std::cout << "resumed from " << path << " (step " << p.step << ")" << std::endl;
}

std::vector<float> Trainer::gather_stream_state() {
  const int64_t L = c_.model.layers, C = local_columns_ * topo_.world_size();
  std::vector<float> local(state_.numel()), global(size_t(L * C * (state_width(0) + state_width(1))), 0.0f);
  backend_->download(local.data(), state_.data(), local.size() * sizeof(float));
  for (int hc = 0; hc < 2; ++hc) {
    const int64_t W = state_width(hc), at = hc * L * C * state_width(0);
    for (int64_t l = 0; l < L; ++l)
      std::copy_n(local.data() + hc * c_offset() + l * local_columns_ * W, local_columns_ * W,
                  global.data() + at + (l * C + first_column_) * W);
  }
  // Each rank fills its own columns and zeros elsewhere, so the sum is exact.
  topo_.world->allreduce_sum(global.data(), static_cast<int64_t>(global.size()));
  return global;
}

void Trainer::scatter_stream_state(const std::vector<float>& global) {
  const int64_t L = c_.model.layers, C = local_columns_ * topo_.world_size();
  const int64_t want = L * C * (state_width(0) + state_width(1));
  if (static_cast<int64_t>(global.size()) != want)
    throw InputError(cat("checkpoint stream state has ", global.size(), " values, expected ", want));
  std::vector<float> local(state_.numel());
  for (int hc = 0; hc < 2; ++hc) {
    const int64_t W = state_width(hc), at = hc * L * C * state_width(0);
    for (int64_t l = 0; l < L; ++l)
      std::copy_n(global.data() + at + (l * C + first_column_) * W, local_columns_ * W,
                  local.data() + hc * c_offset() + l * local_columns_ * W);
  }
  backend_->upload(state_.data(), local.data(), local.size() * sizeof(float));
}

int64_t Trainer::epoch_rows_so_far() {
  double rows = double(epoch_rows_);
  arm("the epoch's row count");
  topo_.world->allreduce_sum(&rows, 1);
  disarm();
  return rows_before_ < 0 ? -1 : rows_before_ + int64_t(rows);
}

void Trainer::save() {
  pos_.plateau_factor = schedule_->plateau_factor;
  pos_.best_loss = schedule_->best_loss;
  pos_.steps_per_epoch = source_->steps_per_epoch();
  if (c_.checkpoint_dir.empty()) return;
  pos_.epoch_rows = epoch_rows_so_far();
  // A diverged model is not saved: the checkpoints kept are the last finite ones. Every rank holds the
  // same parameters and state, so every rank decides alike.
  auto finite = [&](const Tensor& t) { return std::isfinite(backend_->sum_squares(t.data(), t.numel())); };
  bool ok = finite(model_->params());
  for (const auto& [name, tensor] : optimizer_->state()) ok = ok && finite(*tensor);
  if (!ok) {
    const std::string good = newest_checkpoint(c_.checkpoint_dir);
    throw AgreedError(cat("step ", pos_.step, ": the parameters or the optimizer state are not finite, so no checkpoint "
                          "was written (", good.empty() ? "none was before" : cat("the last good one is ", good),
                          "); lower --lr or set --clip-norm"));
  }
  pos_.stream_state.clear();
  if (c_.batching == "stream") {
    arm("the gather of the stream state");
    pos_.stream_state = gather_stream_state();
    disarm();
  }
  if (lead_)
    write_checkpoint(c_.checkpoint_dir, c_.keep, *model_, *optimizer_, vocabularies(), pos_);
  // The other ranks wait for the write here rather than in the next step's collective: they allow a slow
  // file system kCheckpointWriteAllowance seconds beyond --comm-timeout, and rank 0, which has written,
  // the plain limit, so that a rank lost meanwhile still ends the job.
  arm("the barrier after a checkpoint", lead_ ? 0.0 : kCheckpointWriteAllowance);
  topo_.world->barrier();
  disarm();
  saved_step_ = pos_.step;
}

void Trainer::save_best(double objective) {
  if (c_.checkpoint_dir.empty() || !(objective < pos_.best_objective)) return;
  pos_.best_objective = objective;
  TrainingPosition p = pos_;
  p.validated = true;
  p.plateau_factor = schedule_->plateau_factor;
  p.best_loss = schedule_->best_loss;
  p.steps_per_epoch = source_->steps_per_epoch();
  const double value = c_.select_by == "loss" ? objective : 1 - objective;
  if (lead_) write_best_checkpoint(c_.checkpoint_dir, *model_, *optimizer_, vocabularies(), p, c_.select_by, value);
  // As after save(): the others wait for rank 0's write here.
  arm("the barrier after best.h5", lead_ ? 0.0 : kCheckpointWriteAllowance);
  topo_.world->barrier();
  disarm();
}

Evaluation Trainer::evaluate(const SequenceFile& file) {
  injected_failure(topo_.world_rank(), "validate");
  Evaluation ev(file.task(), file.label_vocab());
  if (c_.batching == "stream") {
    StreamSource s(file, c_.batch.batch_size, c_.bptt, topo_.world_size(), topo_.world_rank());
    // A state of its own, on the device: the training state must outlive it (a checkpoint follows).
    Tensor state(*backend_, state_.shape());
    backend_->zero(state.data(), state.numel());
    float *h = state.data(), *c = state.data() + c_offset();
    for (int64_t k = 0; k < s.steps_per_epoch(); ++k) {
      Batch b = s.load(k);
      ev.add_loss(model_->evaluate(b, h, c, h, c), double(b.units()));
    }
  } else {
    for (const SliceRange& s :
         eval_slices(file.offsets(), c_.batch, topo_.world_size(), topo_.world_rank(), framing_of(file.task())))
      ev.add(*model_, load_batch(file, s));
  }
  arm("the all-reduce of an evaluation");
  topo_.world->allreduce_sum(ev.sums().data(), static_cast<int64_t>(ev.sums().size()));
  disarm();
  return ev;
}

void Trainer::report_eval(const char* kind, const SequenceFile& file, int64_t epoch, bool steer) {
  const Evaluation ev = evaluate(file);
  const double l = ev.loss();
  const bool lm = ev.task() == Task::lm;
  const bool valid = std::string(kind) == "valid";
  if (valid && steer) {
    const double objective = ev.objective(c_.select_by);
    schedule_->on_validation(objective);
    save_best(objective);
  }
  if (!lead_) return;
  std::cout << kind << " epoch " << epoch << " step " << pos_.step << " " << ev.line();
  if (lm)
    std::cout << std::fixed << " ppl " << std::setprecision(2) << std::exp(l) << " bits/token " << std::setprecision(4)
              << l / std::log(2.0) << std::defaultfloat;
  if (valid && !steer) std::cout << " (inside the epoch: not used for best.h5 or the schedule)";
  std::cout << std::endl;
  if (metrics_.is_open() && metrics_error_.empty()) {
    metrics_ << "{\"kind\":\"" << kind << "\",\"step\":" << pos_.step << ",\"epoch\":" << epoch << ev.json_members(false);
    if (valid && !steer) metrics_ << ",\"inside_epoch\":true";
    if (lm) metrics_ << ",\"perplexity\":" << shortest(std::exp(l)) << ",\"bits_per_token\":" << shortest(l / std::log(2.0));
    metrics_ << "}" << std::endl;
    check_metrics();
  }
}

void Trainer::log_step(int64_t epoch, float lr, double norm) {
  const auto now = Clock::now();
  const double dt = std::chrono::duration<double>(now - last_log_).count();
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double l = interval_loss_ / interval_units_, tps = interval_tokens_ / std::max(dt, 1e-9);
  const bool lm = model_->config().task == Task::lm;
  // From this run's own pace: a resumed run's earlier steps took none of its time.
  const double eta = elapsed / double(std::max<int64_t>(1, pos_.step - first_step_)) * double(total_steps_ - pos_.step);
  std::cout << "epoch " << epoch << " step " << pos_.step << "/" << total_steps_ << std::fixed << std::setprecision(4)
            << " loss " << l;
  if (lm) std::cout << " ppl " << std::setprecision(2) << std::exp(l);
  std::cout << std::scientific
            << std::setprecision(3) << " lr " << lr << std::fixed << std::setprecision(3) << " grad_norm " << norm
            << std::setprecision(0) << " tok/s " << tps << " eta " << eta << "s" << std::defaultfloat << std::endl;
  if (metrics_.is_open() && metrics_error_.empty()) {
    metrics_ << "{\"kind\":\"train\",\"step\":" << pos_.step << ",\"epoch\":" << epoch << ",\"loss\":" << shortest(l);
    if (lm) metrics_ << ",\"perplexity\":" << shortest(std::exp(l));
    metrics_ << ",\"lr\":" << shortest(lr)
             << ",\"grad_norm\":" << shortest(norm) << ",\"tokens\":" << int64_t(interval_tokens_)
             << ",\"tokens_per_s\":" << shortest(tps) << ",\"elapsed_s\":" << shortest(elapsed)
             << ",\"resident_bytes\":" << resident_bytes() << "}" << std::endl;
    check_metrics();
  }
  last_log_ = now;
  interval_tokens_ = interval_units_ = interval_loss_ = 0;
}

void Trainer::check_metrics() {
  if (!metrics_error_.empty() || metrics_) return;
  metrics_error_ = cat("--metrics ", c_.metrics, ": cannot write: ", std::strerror(errno));
  std::cerr << "rnn_dist: warning: " << metrics_error_ << "; training goes on without metrics" << std::endl;
}

int Trainer::run() {
  const int64_t steps_per_epoch = source_->steps_per_epoch();
  if (lead_) {
    std::cout << "rnn_dist train: " << topo_.world_size() << " rank(s), " << model_->parameter_count()
              << " parameters, " << c_.batching << " batching"
              << (c_.accumulate > 1 ? cat(" (", c_.accumulate, " micro-batches per step)") : std::string()) << ", "
              << steps_per_epoch << " steps per epoch, " << total_steps_ << " steps";
    if (overlap_)
      std::cout << ", all-reduce overlapped in " << reducer_->buckets(model_->num_params() - model_->dense_grad_offset())
                << " bucket(s)";
    if (model_->sparse_embedding_grad())
      std::cout << ", sparse embedding gradient (exchange " << c_.sparse_exchange << ")";
    if (!source_->dropped().empty()) std::cout << " (" << source_->dropped() << ")";
    std::cout << std::endl;
  }

  Model& model = *model_;
  Backend& backend = *backend_;
  const int64_t n = model.num_params();
  // --sparse-embedding: the embedding's gradient is the touched rows (sparse), the reducer sums the rest,
  // grads()[d0, n), and hears the model's reports shifted to it.
  SparseRows* const sparse = model.sparse_embedding_grad();
  const int64_t d0 = model.dense_grad_offset();
  struct Shifted final : GradientReady {
    GradientReady& to;
    int64_t by;
    Shifted(GradientReady& t, int64_t b) : to(t), by(b) {}
    void final_from(int64_t offset) override { to.final_from(std::max<int64_t>(0, offset - by)); }
  } ready(*reducer_, d0);
  float* h = c_.batching == "stream" ? state_.data() : nullptr;
  float* cs = c_.batching == "stream" ? state_.data() + c_offset() : nullptr;
  start_ = last_log_ = Clock::now();
  first_step_ = pos_.step;
  ReadAhead reader([this](int64_t k) {
    StepBatch s{source_->load(k), {}};
    if (c_.accumulate > 1) s.parts = split_batch(s.batch, c_.accumulate);
    return s;
  });

  // A resumed run continues inside the epoch it stopped in; a finished epoch moves on to the next, after
  // the validation its checkpoint was written before.
  int64_t first_epoch = pos_.epoch, first_k = pos_.step_in_epoch;
  if (first_k >= steps_per_epoch) {
    if (!pos_.validated && valid_) report_eval("valid", *valid_, pos_.epoch);
    pos_.validated = true;
    ++first_epoch, first_k = 0;
  }
  epoch_rows_ = 0;
  rows_before_ = first_k == 0 ? 0 : pos_.epoch_rows;
  for (int64_t epoch = first_epoch; epoch <= c_.epochs && pos_.step < total_steps_; ++epoch, first_k = 0) {
    pos_.epoch = epoch;
    source_->start_epoch(epoch);
    if (first_k == 0 && c_.batching == "stream") backend.zero(state_.data(), state_.numel());
    reader.request(first_k);
    // This rank's rows, summed over the ranks (and those before a resume) and checked against the plan at
    // the end.
    epoch_rows_ = 0;
    rows_before_ = first_k == 0 ? 0 : pos_.epoch_rows;
    for (int64_t k = first_k; k < steps_per_epoch && pos_.step < total_steps_; ++k) {
      injected_failure(topo_.world_rank(), pos_.step + 1);
      auto t0 = Clock::now();
      const StepBatch loaded = reader.take();
      const Batch& batch = loaded.batch;
      if (k + 1 < steps_per_epoch) reader.request(k + 1);
      auto t1 = Clock::now();
      const int64_t syncs_before = backend.host_syncs();
      backend.zero(model.grads().data() + d0, n - d0);
      if (sparse) sparse->clear();
      auto* scalars = static_cast<double*>(step_scalars_.data());  // [loss sum, squared gradient norms]
      backend.zero(reinterpret_cast<float*>(scalars), sizeof(double) / sizeof(float));  // 0.0: all zero bits
      // Before the backward pass, which adds to it: with overlap, element 0's bucket leaves with the pass.
      if (injected_nan(topo_.world_rank(), pos_.step + 1)) {
        const float nan = std::numeric_limits<float>::quiet_NaN();
        backend.upload(model.grads().data() + d0, &nan, sizeof(nan));
      }
      reducer_->begin(model.grads().data() + d0, n - d0, pos_.step + 1);
      // Every micro-batch scaled by the whole step's loss terms: their gradients add up to the batch's.
      // Only the last one's backward pass makes gradients final, and overlaps the all-reduce.
      const float scale = source_->gradient_scale(k);
      const uint64_t seed = mix_seed(mix_seed(c_.seed, pos_.step), topo_.world_rank());
      if (loaded.parts.empty()) {
        model.forward_backward_into(scalars, batch, scale, seed, h, cs, h, cs, &ready);
      } else {
        const std::vector<Batch>& micro = loaded.parts;
        for (size_t m = 0; m < micro.size(); ++m)
          model.forward_backward_into(scalars, micro[m], scale, m == 0 ? seed : mix_seed(seed, m), nullptr, nullptr,
                                      nullptr, nullptr, m + 1 == micro.size() ? &ready : nullptr);
      }
      auto t2 = Clock::now();
      // What the backward pass has not sent yet, and the wait for every bucket (the exposed communication).
      // On a GPU nothing so far has waited for the device: the all-reduce, the gradient norm and the read
      // of both scalars are queued behind the step's kernels, and the step waits once: in complete() with
      // several ranks (finish_read then finds the values there), in finish_read() with one. The norm's
      // time, which the CPU spends here, counts as update time.
      double read[3] = {0, 0, 0}, norm_seconds = 0;
      SparseRows* rows = nullptr;  // the step's embedding rows summed over the ranks
      try {
        reducer_->finish();
        // On the CPU the reducer's collectives have returned and disarmed the watchdog, which then watches
        // the exchange alone. Over NCCL finish() leaves it armed until complete(), and that window covers the
        // exchange (whose rows are queued on the same stream; its time here is then what the host spends).
        if (sparse) {
          const bool own_watch = watchdog_ && reduce_topo_ == &topo_;
          if (own_watch) watchdog_->arm("the sparse embedding exchange", pos_.step + 1);
          const auto e0 = Clock::now();
          rows = &sparse_exchange_->exchange(*sparse, model.grads().data());
          sparse_seconds_ += seconds_since(e0);
          if (own_watch) watchdog_->disarm();
        }
        const auto n0 = Clock::now();
        backend.sum_squares(model.grads().data() + d0, n - d0, scalars + 1);
        if (rows) backend.sum_squares(rows->rows(), rows->size() * rows->dim(), scalars + 2);
        norm_seconds = seconds_since(n0);
        backend.start_read(scalars, rows ? 3 : 2);
        reducer_->complete();
        backend.finish_read(read);
        if (rows) {
          const SparseExchange::Last& last = sparse_exchange_->last();
          sparse_rows_ += double(rows->size()), sparse_bytes_ += last.bytes;
          sparse_gathers_ += last.gathered, ++sparse_steps_;
          sparse_agreed_seconds_ += last.seconds_after_agreement;
        }
      } catch (const Error& e) {
        reducer_->disarm();  // armed by finish() until complete()
        throw Error(cat("step ", pos_.step + 1, ": ", e.what()));
      }
      const double loss_sum = read[0], norm = std::sqrt(read[1] + read[2]);
      // The step's loss sum, loss terms and rows, and the stop requests (a signal on any rank stops every
      // rank after this step), in one small all-reduce of doubles (exact, where float counts are not past 2^24).
      StepTotals totals(loss_sum, batch, g_stop_signal);
      if (watchdog_) watchdog_->arm("the step's totals all-reduce", pos_.step + 1);
      topo_.world->allreduce_sum(totals.v, StepTotals::kSize);
      if (watchdog_) watchdog_->disarm();
      epoch_rows_ += batch.tokens();
      const int stop = totals.stop_signal();
      auto t3 = Clock::now();
      const double loss = totals.loss_sum() / totals.units();
      const float lr = schedule_->lr(pos_.step, epoch);
      ++pos_.step;
      pos_.step_in_epoch = k + 1;
      if (std::isfinite(norm) && std::isfinite(loss)) {
        bad_in_a_row_ = 0;
        const float clip = clip_factor(norm, c_.clip_norm);
        if (clip != 1.0f) {
          backend.scale(model.grads().data() + d0, n - d0, clip);
          if (rows) backend.scale(rows->rows(), rows->size() * rows->dim(), clip);
        }
        optimizer_->step(model.params().data(), model.grads().data(), lr, rows, d0);
        interval_tokens_ += totals.rows();
        interval_units_ += totals.units();
        interval_loss_ += totals.loss_sum();
        total_tokens_ += totals.rows();
      } else {
        // Every rank sees the same all-reduced values, so every rank skips the same steps.
        ++bad_steps_;
        ++bad_in_a_row_;
        if (lead_)
          std::cout << "step " << pos_.step << ": non-finite loss or gradient norm, update skipped (" << bad_in_a_row_
                    << " in a row, " << bad_steps_ << " in all)" << std::endl;
        if (bad_in_a_row_ >= c_.max_bad_steps)
          throw AgreedError(cat(bad_in_a_row_, " consecutive steps with a non-finite loss or gradient norm (step ",
                                pos_.step, "; --max-bad-steps ", c_.max_bad_steps, "): lower --lr or set --clip-norm"));
      }
      const int64_t syncs = backend.host_syncs() - syncs_before;
      step_syncs_ += syncs, ++synced_steps_;
      max_step_syncs_ = std::max(max_step_syncs_, syncs);
      t_wait_ += std::chrono::duration<double>(t1 - t0).count();
      t_compute_ += std::chrono::duration<double>(t2 - t1).count();
      t_allreduce_ += std::chrono::duration<double>(t3 - t2).count() - norm_seconds;
      t_update_ += seconds_since(t3) + norm_seconds;
      if (lead_ && interval_tokens_ > 0 && (pos_.step % c_.log_every == 0 || pos_.step == total_steps_))
        log_step(epoch, lr, norm);
      if (stop) {
        reader.idle();
        // A stop on an epoch's last step comes before that epoch's validation: the resumed run does it first.
        pos_.validated = !(valid_ && pos_.step_in_epoch == steps_per_epoch);
        save();
        if (lead_)
          std::cout << "stopped by signal " << stop << " after step " << pos_.step
                    << (c_.checkpoint_dir.empty() ? " (no --checkpoint-dir: nothing saved)"
                                                  : cat(": checkpoint ", checkpoint_path(c_.checkpoint_dir, pos_.step),
                                                        "; rerun with --resume to continue"))
                    << std::endl;
        return 0;
      }
      // Not while steps are being skipped: the state is that of the last good step, and rotating the
      // checkpoints then would only push older ones out.
      if (c_.save_every > 0 && pos_.step % c_.save_every == 0 && pos_.step < total_steps_ && bad_in_a_row_ == 0) {
        reader.idle();
        save();
      }
    }
    reader.idle();
    // Every sequence of the plan trained once: a batch that lost or repeated sequences on every rank alike
    // would pass the comparison of N ranks with 1 rank, but not this.
    // Summed in double, exact to 2^53 (the float slots of the gradient all-reduce are not, past 2^24 a step).
    const bool epoch_end = pos_.step_in_epoch == steps_per_epoch;
    if (epoch_end && rows_before_ >= 0) {
      const int64_t rows = epoch_rows_so_far();
      if (rows != source_->epoch_rows())
        throw Error(cat("epoch ", epoch, " trained ", rows, " rows over all ranks, but its plan holds ",
                        source_->epoch_rows(), ": the batches lost or repeated sequences"));
      if (lead_ && metrics_.is_open() && metrics_error_.empty()) {
        metrics_ << "{\"kind\":\"epoch\",\"epoch\":" << epoch << ",\"step\":" << pos_.step
                 << ",\"rows\":" << rows << "}" << std::endl;
        check_metrics();
      }
    }
    // The epoch's checkpoint, once, before its validation, so that an error there loses no training: a
    // run resumed from it validates that epoch first, which redoes what the validation changes (best.h5,
    // the plateau schedule) exactly. A run that stops inside the epoch (--max-steps) reports a validation
    // there, but it steers neither best.h5 nor the schedule: the run resumed from here decides at the
    // epoch's end exactly as the run that never stopped.
    if (valid_ && epoch_end && !c_.checkpoint_dir.empty()) {
      pos_.validated = false;
      save();
      pos_.validated = true;
    }
    if (valid_) report_eval("valid", *valid_, epoch, epoch_end);
  }
  // Unless the last epoch's checkpoint, just written, is already the final one.
  if (saved_step_ != pos_.step) save();
  if (test_) report_eval("test", *test_, pos_.epoch);
  // Over the ranks, the largest memory peaks, which `rnn_dist check` predicts (train/memory_plan.h), and
  // the slowest sparse exchange after the agreement on k (microseconds in all: the collectives end when
  // their last rank has its data).
  int64_t maxima[3] = {peak_resident_bytes(), backend_->peak_bytes(), static_cast<int64_t>(sparse_agreed_seconds_ * 1e6)};
  arm("the all-reduce of the run's maxima");
  topo_.world->allreduce_max(maxima, 3);
  disarm();
  if (lead_) {
    const double total = t_wait_ + t_compute_ + t_allreduce_ + t_update_;
    auto pct = [&](double t) { return cat(std::fixed, std::setprecision(1), 100.0 * t / std::max(total, 1e-9), "%"); };
    std::cout << "trained " << int64_t(total_tokens_) << " tokens in " << std::fixed << std::setprecision(2) << total
              << " s: " << std::setprecision(0) << total_tokens_ / std::max(total, 1e-9)
              << " tokens/s (all ranks); time split (rank 0): compute " << pct(t_compute_) << ", all-reduce "
              << pct(t_allreduce_) << ", data wait " << pct(t_wait_) << ", update " << pct(t_update_)
              << std::defaultfloat << std::endl;
    std::cout << "peak memory (largest rank): resident " << bytes_text(maxima[0]) << ", "
              << backend_->device().str() << " buffers " << bytes_text(maxima[1]) << std::endl;
    if (metrics_.is_open() && metrics_error_.empty()) {
      metrics_ << "{\"kind\":\"summary\",\"step\":" << pos_.step << ",\"tokens\":" << int64_t(total_tokens_)
               << ",\"seconds\":" << shortest(total) << ",\"tokens_per_s\":"
               << shortest(total_tokens_ / std::max(total, 1e-9)) << ",\"compute_s\":" << shortest(t_compute_)
               << ",\"allreduce_s\":" << shortest(t_allreduce_) << ",\"data_wait_s\":" << shortest(t_wait_)
               << ",\"update_s\":" << shortest(t_update_) << ",\"allreduce_dtype\":\"" << c_.allreduce_dtype
               << "\",\"overlap\":" << (overlap_ ? "true" : "false") << ",\"host_syncs_per_step\":"
               << shortest(double(step_syncs_) / double(std::max<int64_t>(1, synced_steps_)))
               << ",\"host_syncs_max\":" << max_step_syncs_ << ",\"peak_resident_bytes\":" << maxima[0]
               << ",\"peak_device_bytes\":" << maxima[1];
      // The sparse embedding's distinct rows per step (over all ranks), the bytes its exchange received per
      // rank and step (the model of dist/sparse_exchange.h), its time (part of the all-reduce's) on rank 0,
      // its time after the agreement on k on the slowest rank, and the steps whose rows were all-gathered
      // (none on one rank, which exchanges nothing).
      if (sparse_steps_ > 0)
        metrics_ << ",\"sparse_rows_per_step\":" << shortest(sparse_rows_ / double(sparse_steps_))
                 << ",\"sparse_exchange_bytes_per_step\":" << shortest(sparse_bytes_ / double(sparse_steps_))
                 << ",\"sparse_exchange_s_per_step\":" << shortest(sparse_seconds_ / double(sparse_steps_))
                 << ",\"sparse_after_agreement_s_per_step_slowest\":" << shortest(double(maxima[2]) * 1e-6 / double(sparse_steps_))
                 << ",\"sparse_gathered_steps\":" << sparse_gathers_;
      // The buckets' sizes, how long before the backward pass ended each was sent (the model's inputs) and
      // when it completed.
      if (overlap_) {
        const std::vector<double> lead = reducer_->mean_lead_seconds();
        metrics_ << ",\"bucket_elems\":[";
        for (size_t b = 0; b < lead.size(); ++b) metrics_ << (b ? "," : "") << reducer_->bucket_elems(static_cast<int>(b));
        metrics_ << "],\"bucket_lead_s\":[";
        for (size_t b = 0; b < lead.size(); ++b) metrics_ << (b ? "," : "") << shortest(lead[b]);
        const std::vector<double> done = reducer_->mean_done_seconds();
        metrics_ << "],\"bucket_done_s\":[";
        for (size_t b = 0; b < done.size(); ++b) metrics_ << (b ? "," : "") << shortest(done[b]);
        metrics_ << "]";
      }
      metrics_ << "}" << std::endl;
      check_metrics();
      metrics_.close();
      check_metrics();
    }
    if (!c_.metrics.empty()) std::cout << "metrics:    " << c_.metrics << std::endl;
    if (!c_.checkpoint_dir.empty()) {
      std::cout << "checkpoint: " << checkpoint_path(c_.checkpoint_dir, pos_.step) << std::endl;
      if (std::filesystem::exists(best_checkpoint_path(c_.checkpoint_dir)))
        std::cout << "best:       " << best_checkpoint_path(c_.checkpoint_dir) << std::endl;
      const int world = topo_.world_size();
      std::cout << "resume:     " << (world > 1 ? cat("mpirun -np ", world, " ") : std::string()) << c_.resume_command
                << std::endl;
    }
    if (bad_steps_ > 0)
      std::cout << "finished with " << bad_steps_ << " step(s) skipped for a non-finite loss or gradient norm "
                << "(their updates are missing): exit status " << kExitFinishedWithProblems << std::endl;
    if (!metrics_error_.empty())
      std::cout << "finished with the metrics file incomplete (" << metrics_error_ << "): exit status "
                << kExitFinishedWithProblems << std::endl;
    // The log itself (a redirected standard output on a full disk, say): said where it can still be read.
    if (!std::cout.flush())
      std::cerr << "rnn_dist: error: cannot write the log to standard output: " << std::strerror(errno) << std::endl;
  }
  // Every rank returns the same status, rank 0's.
  int64_t problems = lead_ && (bad_steps_ > 0 || !metrics_error_.empty() || !std::cout) ? 1 : 0;
  if (topo_.world_size() > 1) {
    arm("the all-reduce of the exit status");
    topo_.world->allreduce_max(&problems, 1);
    disarm();
  }
  return problems ? kExitFinishedWithProblems : 0;
}

}  // namespace

int train(const TrainerConfig& config, Topology& topo) {
  // From here a stop signal is deferred to the end of a step (the first one when it came during set-up).
  for (int sig : kStopSignals) std::signal(sig, on_stop_signal);
  Trainer trainer(config, topo);
  if (int rc = agree_on_errors(topo, [&] { trainer.setup(); })) return rc;
  if (int rc = agree_on_errors(topo, [&] { trainer.check_ranks_agree(); })) return rc;
  if (int rc = agree_on_errors(topo, [&] { trainer.connect(); })) return rc;
  trainer.connected();
  try {
    return trainer.run();
  } catch (const Error& e) {
    return end_job(topo, e);
  }
}

}  // namespace rnn_dist
