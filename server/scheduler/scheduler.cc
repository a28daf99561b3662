// Locking: one mutex guards the queues, the id index, the expiry set, the counters and each
// worker's idle and claimed flags. Workers hold it only to pick a batch; staging, Execute and
// completion callbacks run without it, and condition variables are notified after it is
// released. Every request leaves the queues exactly once, under the mutex (taken into a batch or
// a caller's claim, cancelled, expired or failed by a drain), and whoever removed it answers it:
// that is the exactly-once guarantee.
#include "scheduler/scheduler.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <list>
#include <mutex>
#include <new>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>

#if defined(__linux__)
#include <sys/prctl.h>
#endif

#include "scheduler/batch_data.h"
#include "scheduler/scheduler_checks.h"

namespace ltserve {
namespace {

// Linux lets a timed wait of a normal thread end up to its timer slack late, 50 µs by default,
// so that wake-ups can be merged; a batch window of max_queue_delay_microseconds (often 100 to
// 500 µs) then closes 50-65 µs late, which the request's latency pays. The batcher's threads
// ask for 1 ns: their waits end when the window does (the cost, a few more timer interrupts,
// is one per batch at most).
void UsePreciseTimedWaits() {
#if defined(__linux__)
  prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
#endif
}

// One turn of a polling loop: tells the core it spins (less power, and the sibling
// hyperthread gets the pipeline) without giving the thread up.
inline void PollPause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;

// Timeouts and delays beyond ten years mean "none": the cap keeps time_point arithmetic from
// overflowing on absurd configuration or request values.
constexpr std::uint64_t kLongestWaitUs = 10ULL * 365 * 24 * 3600 * 1000 * 1000;

std::chrono::microseconds CappedMicros(std::uint64_t us) {
  return std::chrono::microseconds(std::min(us, kLongestWaitUs));
}

std::uint64_t NanosBetween(TimePoint from, TimePoint to) {
  if (to <= from) return 0;
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(to - from).count());
}

FailureReason ReasonFor(StatusCode code) {
  switch (code) {
    case StatusCode::kInvalidArgument: return FailureReason::kInvalidInput;
    case StatusCode::kResourceExhausted: return FailureReason::kQueueFull;
    case StatusCode::kDeadlineExceeded: return FailureReason::kTimeout;
    case StatusCode::kCancelled: return FailureReason::kCancelled;
    case StatusCode::kUnavailable: return FailureReason::kUnavailable;
    default: return FailureReason::kInternal;
  }
}

// A request accepted into a queue.
struct Queued {
  std::uint64_t id = 0;
  std::unique_ptr<InferenceRequest> request;
  std::size_t level = 0;  // index into the queues: 0 is priority 1, the highest
  TimePoint enqueued;
  TimePoint expiry = TimePoint::max();
};
using QueueList = std::list<Queued>;

// What a worker thread owns: its instance and scratch space reused from batch to batch, all
// allocated at Create.
struct Worker {
  ExecutorInstance* instance = nullptr;
  std::vector<const InferenceRequest*> requests;
  std::vector<std::int32_t> sequence_lengths;
  // With a key-padding mask: one buffer per output that the padded [batch, seq, width]
  // outputs are scattered into (max_batch_tokens tokens each).
  std::vector<std::vector<std::byte>> scatter;
  // Under the mutex. `idle`: the worker thread is running no batch (it waits for one, or has
  // not started yet), so its instance is free.
  // `claimed`: a caller took the instance (Enqueue's ClaimedRun) and drives it until RunClaimed
  // is over; the worker thread picks no batch meanwhile. `claimed_batch` is the caller's.
  bool idle = true;
  bool claimed = false;
  QueueList claimed_batch;
};

}  // namespace

struct Scheduler::Impl {
  SchedulerOptions options;
  std::vector<std::unique_ptr<ExecutorInstance>> instances;
  ModelStats* stats = nullptr;
  BatchLayout layout = BatchLayout::kWhole;
  std::int64_t max_batch_tokens = 0;  // a token layout's budget; 0: none
  bool batching = false;            // dynamic batching over a batch dimension
  std::int64_t max_preferred = 1;   // the largest preferred size, else max_batch_size
  std::chrono::nanoseconds max_queue_delay{0};

  mutable std::mutex mutex;
  std::condition_variable work_cv;    // workers: new requests, drain, stop
  std::condition_variable expiry_cv;  // expiry thread: an earlier deadline, stop
  std::condition_variable idle_cv;    // Drain: nothing pending
  std::vector<QueueList> queues;      // by level, highest priority first
  std::unordered_map<std::uint64_t, QueueList::iterator> queued_by_id;
  std::set<std::pair<TimePoint, std::uint64_t>> expiries;  // queued requests with a deadline
  std::uint64_t next_id = 1;
  std::size_t pending = 0;
  bool draining = false;
  bool stopping = false;
  std::vector<Worker> worker_state;  // one per instance, same order
  // Workers claimed by callers. While any is, a notification goes to all workers: one sent to a
  // claimed worker alone would be lost, since it must not pick the batch up.
  std::atomic<int> claimed_workers{0};
  std::vector<std::thread> workers;
  std::thread expiry_thread;
  // Bumped, under the mutex, whenever a request is admitted or the scheduler starts to drain
  // or stop: what a polling worker watches without the mutex (SchedulerOptions::worker_poll_us).
  std::atomic<std::uint64_t> work_generation{0};

  const SchedulerOptions::QueuePolicy& PolicyFor(std::size_t level) const {
    auto it = options.priority_policies.find(static_cast<std::uint32_t>(level + 1));
    return it == options.priority_policies.end() ? options.default_policy : it->second;
  }

  std::size_t LevelFor(std::uint32_t priority) const {
    if (options.priority_levels == 0) return 0;
    if (priority == 0 || priority > options.priority_levels) {
      priority = options.default_priority_level;
    }
    return priority - 1;
  }

  // A request's own timeout counts only where the policy allows overriding its default (or has
  // none), and only ever brings the expiry earlier.
  static TimePoint ExpiryFor(const InferenceRequest& request,
                             const SchedulerOptions::QueuePolicy& policy) {
    TimePoint expiry = request.deadline;
    auto after = [&](std::uint64_t us) { return request.arrival + CappedMicros(us); };
    if (policy.default_timeout_us > 0) expiry = std::min(expiry, after(policy.default_timeout_us));
    if (request.timeout_us > 0 &&
        (policy.allow_timeout_override || policy.default_timeout_us == 0)) {
      expiry = std::min(expiry, after(request.timeout_us));
    }
    return expiry;
  }

  // Queues a validated request; refuses it when draining or its level's queue is full.
  Result<std::uint64_t> AdmitLocked(std::unique_ptr<InferenceRequest> request,
                                    bool* earliest_expiry) {
    const std::size_t level = LevelFor(request->priority);
    const SchedulerOptions::QueuePolicy& policy = PolicyFor(level);
    if (draining) return Unavailable("the model is shutting down");
    if (policy.max_queue_size > 0 && queues[level].size() >= policy.max_queue_size) {
      return ResourceExhausted("the queue for priority level " + std::to_string(level + 1) +
                               " is full (max_queue_size " +
                               std::to_string(policy.max_queue_size) + ")");
    }
    Queued entry;
    entry.id = next_id++;
    entry.level = level;
    entry.enqueued = Clock::now();
    if (request->trace != nullptr) {
      request->trace->Record(TraceActivity::kQueueStart, entry.enqueued);
    }
    entry.expiry = ExpiryFor(*request, policy);
    entry.request = std::move(request);
    if (entry.expiry != TimePoint::max()) {
      *earliest_expiry = expiries.empty() || entry.expiry < expiries.begin()->first;
      expiries.emplace(entry.expiry, entry.id);
    }
    const std::uint64_t id = entry.id;
    QueueList& queue = queues[level];
    queue.push_back(std::move(entry));
    queued_by_id.emplace(id, std::prev(queue.end()));
    ++pending;
    stats->RecordPending(1);
    work_generation.fetch_add(1, std::memory_order_release);
    return id;
  }

  bool AnyQueuedLocked() const { return !queued_by_id.empty(); }

  // Moves one queued request out of the queues into `out`.
  void TakeLocked(QueueList::iterator it, QueueList& out) {
    queued_by_id.erase(it->id);
    if (it->expiry != TimePoint::max()) expiries.erase({it->expiry, it->id});
    out.splice(out.end(), queues[it->level], it);
  }

  QueueList TakeAllLocked() {
    QueueList all;
    for (QueueList& queue : queues) {
      while (!queue.empty()) TakeLocked(queue.begin(), all);
    }
    return all;
  }

  // Answers removed requests that will not run.
  void Fail(QueueList& done, const Status& status) {
    if (done.empty()) return;
    const TimePoint now = Clock::now();
    for (Queued& entry : done) {
      stats->RecordFailure(ReasonFor(status.code()), NanosBetween(entry.request->arrival, now));
      entry.request->on_complete(status, {});
    }
    const std::size_t answered = done.size();
    done.clear();  // drop keep_alive and callbacks before Drain can see the requests answered
    Release(answered);
  }

  void Release(std::size_t answered) {
    bool idle = false;
    {
      // Under the lock so the gauge never runs ahead of `pending`: a finished Drain sees it at 0.
      std::lock_guard lock(mutex);
      pending -= answered;
      stats->RecordPending(-static_cast<std::int64_t>(answered));
      idle = pending == 0;
    }
    if (idle) idle_cv.notify_all();
  }

  // How many requests from the head of the queues (priority order, FIFO within a level) to run
  // now, following Triton's dynamic batcher; 0 with `wake` set when the batch should wait.
  std::size_t DecideLocked(TimePoint now, TimePoint* wake) const {
    if (!batching) return 1;
    std::size_t count = 0;
    std::int64_t samples = 0;
    std::int64_t tokens = 0;  // rows the executor sees: samples, or tokens when packed
    std::size_t best_count = 0;  // a preferred size, or the most that fits the largest one
    TimePoint oldest = TimePoint::max();
    bool send_now = draining;
    const InferenceRequest* first = nullptr;
    bool full = false;  // the next request cannot join: the batch is as large as it gets
    for (auto queue = queues.begin(); queue != queues.end() && !full; ++queue) {
      for (auto entry = queue->begin(); entry != queue->end() && !full; ++entry) {
        const std::int64_t size = entry->request->batch_size;
        if (first == nullptr) {
          first = entry->request.get();
        } else {
          if (samples + size > max_preferred && best_count == 0) best_count = count;
          full = samples + size > options.max_batch_size ||
                 !SameSampleShape(*first, *entry->request, layout) ||
                 (max_batch_tokens > 0 &&
                  tokens + RowsOf(*entry->request, layout) > max_batch_tokens);
          if (full) break;
        }
        ++count;
        samples += size;
        tokens += RowsOf(*entry->request, layout);
        oldest = std::min(oldest, entry->enqueued);
        if (std::find(options.preferred_batch_sizes.begin(), options.preferred_batch_sizes.end(),
                      samples) != options.preferred_batch_sizes.end()) {
          best_count = count;
        }
      }
    }
    send_now = send_now || full;
    const bool delay_exceeded = now - oldest >= max_queue_delay;
    if (best_count > 0 && !delay_exceeded && !draining) return best_count;
    if (send_now || delay_exceeded || samples >= max_preferred) return count;
    *wake = oldest + max_queue_delay;
    return 0;
  }

  void NotifyWork() {
    if (claimed_workers.load() > 0) {
      work_cv.notify_all();
    } else {
      work_cv.notify_one();
    }
  }

  // A lone request that may start now, on an idle instance that a caller may drive: taken out
  // of the queues into that worker's claimed_batch. Returns the worker, if one was claimed.
  std::optional<std::size_t> ClaimForCallerLocked() {
    if (!options.run_on_caller_when_idle || queued_by_id.size() != 1) return std::nullopt;
    TimePoint wake = TimePoint::max();
    if (DecideLocked(Clock::now(), &wake) == 0) return std::nullopt;  // it waits for a batch
    for (std::size_t w = 0; w < worker_state.size(); ++w) {
      Worker& worker = worker_state[w];
      if (!worker.idle || worker.claimed) continue;
      worker.claimed = true;
      ++claimed_workers;
      TakeLocked(queued_by_id.begin()->second, worker.claimed_batch);
      return w;
    }
    return std::nullopt;
  }

  // With worker_poll_us set: lets go of the mutex and polls work_generation for up to that
  // long. Returns with the mutex held again; true when the generation moved (a request came, or
  // a drain or stop began), so the caller looks at the queues again instead of sleeping. An
  // Enqueue's notification meanwhile finds no waiter and is lost, which is why the generation is
  // read once more under the mutex: whatever moved it before then is seen, whatever comes after
  // finds this worker waiting on work_cv.
  bool PollForWork(std::unique_lock<std::mutex>& lock) {
    if (options.worker_poll_us == 0) return false;
    const std::uint64_t seen = work_generation.load(std::memory_order_acquire);
    lock.unlock();
    const TimePoint until = Clock::now() + std::chrono::microseconds(options.worker_poll_us);
    while (work_generation.load(std::memory_order_acquire) == seen && Clock::now() < until) {
      PollPause();
    }
    lock.lock();
    return work_generation.load(std::memory_order_relaxed) != seen;
  }

  // Blocks until a batch is due; returns it, or nothing when stopping.
  QueueList NextBatchLocked(Worker& worker, std::unique_lock<std::mutex>& lock) {
    worker.idle = true;
    while (!stopping) {
      if (worker.claimed || !AnyQueuedLocked()) {
        if (!worker.claimed && PollForWork(lock)) continue;
        work_cv.wait(lock);
        continue;
      }
      TimePoint wake = TimePoint::max();
      std::size_t count = DecideLocked(Clock::now(), &wake);
      if (count == 0) {
        work_cv.wait_until(lock, wake);
        continue;
      }
      QueueList batch;
      for (QueueList& queue : queues) {
        while (count > 0 && !queue.empty()) {
          TakeLocked(queue.begin(), batch);
          --count;
        }
      }
      worker.idle = false;
      return batch;
    }
    return {};
  }

  void WorkerLoop(Worker& worker) {
    while (true) {
      QueueList batch;
      bool more = false;
      {
        std::unique_lock lock(mutex);
        batch = NextBatchLocked(worker, lock);
        if (batch.empty()) return;
        more = AnyQueuedLocked();
      }
      // Another idle worker may form the next batch while this one executes.
      if (more) NotifyWork();
      RunBatch(worker, batch);
    }
  }

  void RunBatch(Worker& worker, QueueList& batch) {
    const TimePoint start = Clock::now();
    QueueList expired;
    for (auto it = batch.begin(); it != batch.end();) {
      auto next = std::next(it);
      if (it->expiry <= start) expired.splice(expired.end(), batch, it);
      it = next;
    }
    Fail(expired, DeadlineExceeded("request timed out in the queue"));
    if (batch.empty()) return;

    std::vector<const InferenceRequest*>& requests = worker.requests;
    requests.clear();
    std::int64_t samples = 0;
    for (const Queued& entry : batch) {
      requests.push_back(entry.request.get());
      samples += entry.request->batch_size;
    }
    ExecuteTimings timings;
    const TimePoint compute_start = Clock::now();
    Status status = Execute(worker, &timings);
    const TimePoint executed = Clock::now();
    Result<std::vector<std::vector<OutputSlice>>> slices = status;
    if (status.ok() && options.tokens && options.tokens->pooled) {
      // One output row per sequence: sliced as rows, the padding never reached them.
      slices = SliceOutputs(*worker.instance, requests, options.output_types.size(),
                            BatchLayout::kRows, options.output_dims);
    } else if (status.ok() && options.tokens && options.tokens->mask_input) {
      slices = ScatterMaskedOutputs(*worker.instance, requests, *options.tokens,
                                    options.output_types, worker.scatter);
    } else if (status.ok()) {
      slices = SliceOutputs(*worker.instance, requests, options.output_types.size(), layout,
                            options.output_dims);
    }
    if (!slices.ok()) {
      Fail(batch, slices.status());
      return;
    }
    stats->RecordBatch(layout == BatchLayout::kWhole ? 1 : samples, timings);
    const TimePoint done = Clock::now();
    std::size_t index = 0;
    for (Queued& entry : batch) {
      if (entry.request->trace != nullptr) {
        StampCompute(*entry.request->trace, compute_start, executed, timings);
      }
      stats->RecordSuccess(NanosBetween(entry.request->arrival, done),
                           NanosBetween(entry.enqueued, start), timings,
                           entry.request->batch_size);
      entry.request->on_complete(Status::Ok(), slices.value()[index++]);
    }
    const std::size_t answered = batch.size();
    batch.clear();
    Release(answered);
  }

  // Start and end are the host's clock around Execute. The executor reports its phases as
  // durations (a GPU's, from its events), laid end to end from the start: what the host spends
  // around them (calls reaching the GPU, waking from the wait) shows in the last phase.
  static void StampCompute(RequestTrace& trace, TimePoint compute_start, TimePoint executed,
                           const ExecuteTimings& timings) {
    const TimePoint input_end =
        std::min(executed, compute_start + std::chrono::nanoseconds(timings.input_ns));
    const TimePoint output_start =
        std::min(executed, input_end + std::chrono::nanoseconds(timings.infer_ns));
    trace.Record(TraceActivity::kComputeStart, compute_start);
    trace.Record(TraceActivity::kComputeInputEnd, input_end);
    trace.Record(TraceActivity::kComputeOutputStart, output_start);
    trace.Record(TraceActivity::kComputeEnd, executed);
  }

  // Stages the inputs (counted as input time) and runs the batch. Executor failures become
  // INTERNAL, except INVALID_ARGUMENT (a batch larger than the instance was sized for).
  Status Execute(Worker& worker, ExecuteTimings* timings) {
    const TimePoint staging = Clock::now();
    Result<BatchShape> shape =
        StageInputs(*worker.instance, worker.requests, layout, &worker.sequence_lengths,
                    options.tokens ? &*options.tokens : nullptr);
    const std::uint64_t staging_ns = NanosBetween(staging, Clock::now());
    Status status = shape.ok() ? worker.instance->Execute(shape.value(), timings) : shape.status();
    timings->input_ns += staging_ns;
    if (status.ok() || status.code() == StatusCode::kInvalidArgument) return status;
    return Internal("executing a batch of " + std::to_string(worker.requests.size()) +
                    " requests: " + status.message());
  }

  void ExpiryLoop() {
    std::unique_lock lock(mutex);
    while (!stopping) {
      if (expiries.empty()) {
        expiry_cv.wait(lock);
        continue;
      }
      const TimePoint next = expiries.begin()->first;
      if (Clock::now() < next) {
        expiry_cv.wait_until(lock, next);
        continue;
      }
      QueueList expired;
      const TimePoint now = Clock::now();
      while (!expiries.empty() && expiries.begin()->first <= now) {
        TakeLocked(queued_by_id.at(expiries.begin()->second), expired);
      }
      lock.unlock();
      NotifyWork();  // the head of the queues changed
      Fail(expired, DeadlineExceeded("request timed out in the queue"));
      lock.lock();
    }
  }
};

Scheduler::Scheduler(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<Scheduler>> Scheduler::Create(
    SchedulerOptions options, std::vector<std::unique_ptr<ExecutorInstance>> instances,
    ModelStats* stats) {
  LTSERVE_RETURN_IF_ERROR(ValidateOptions(options));
  if (stats == nullptr) return InvalidArgument("scheduler: no ModelStats");
  if (instances.empty()) return InvalidArgument("scheduler: no executor instances");
  for (const auto& instance : instances) {
    if (instance == nullptr) return InvalidArgument("scheduler: a null executor instance");
  }
  auto impl = std::make_unique<Impl>();
  impl->layout = options.max_batch_size == 0 ? BatchLayout::kWhole
                 : options.tokens            ? BatchLayout::kPackedSequences
                                             : BatchLayout::kRows;
  impl->max_batch_tokens = options.tokens ? options.tokens->max_batch_tokens : 0;
  impl->batching = options.max_batch_size > 0 && options.dynamic_batching;
  impl->max_preferred = options.max_batch_size;
  if (!options.preferred_batch_sizes.empty()) {
    impl->max_preferred = *std::max_element(options.preferred_batch_sizes.begin(),
                                            options.preferred_batch_sizes.end());
  }
  impl->max_queue_delay = CappedMicros(options.max_queue_delay_us);
  impl->queues.resize(std::max<std::uint32_t>(options.priority_levels, 1));
  impl->options = std::move(options);
  impl->instances = std::move(instances);
  impl->stats = stats;
  Impl* state = impl.get();
  const auto max_samples = static_cast<std::size_t>(std::max(state->options.max_batch_size, 1));
  state->worker_state.resize(state->instances.size());
  try {
    for (std::size_t i = 0; i < state->instances.size(); ++i) {
      Worker& worker = state->worker_state[i];
      worker.instance = state->instances[i].get();
      worker.requests.reserve(max_samples);
      worker.sequence_lengths.reserve(max_samples);
      const std::optional<TokenLayout>& tokens = state->options.tokens;
      if (!tokens || !tokens->mask_input || tokens->pooled) continue;
      for (std::size_t token_bytes : tokens->output_token_bytes) {
        worker.scatter.emplace_back(static_cast<std::size_t>(tokens->max_batch_tokens) *
                                    token_bytes);
      }
    }
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("scheduler: allocating the masked-output buffers of " +
                             std::to_string(state->options.tokens->max_batch_tokens) + " tokens");
  }
  for (Worker& worker : state->worker_state) {
    state->workers.emplace_back([state, &worker] {
      UsePreciseTimedWaits();
      state->WorkerLoop(worker);
    });
  }
  state->expiry_thread = std::thread([state] {
    UsePreciseTimedWaits();
    state->ExpiryLoop();
  });
  return std::unique_ptr<Scheduler>(new Scheduler(std::move(impl)));
}

Scheduler::~Scheduler() {
  QueueList rest;
  {
    std::lock_guard lock(impl_->mutex);
    impl_->draining = true;
    impl_->stopping = true;
    impl_->work_generation.fetch_add(1, std::memory_order_release);
    rest = impl_->TakeAllLocked();
  }
  impl_->work_cv.notify_all();
  impl_->expiry_cv.notify_all();
  impl_->Fail(rest, Unavailable("the model is being unloaded"));
  for (std::thread& worker : impl_->workers) worker.join();
  impl_->expiry_thread.join();
}

Result<std::uint64_t> Scheduler::Enqueue(std::unique_ptr<InferenceRequest> request) {
  return Enqueue(std::move(request), nullptr);
}

Result<std::uint64_t> Scheduler::Enqueue(std::unique_ptr<InferenceRequest> request,
                                         ClaimedRun* claimed) {
  Impl& s = *impl_;
  std::optional<std::size_t> claimed_worker;
  const TimePoint arrival = request != nullptr ? request->arrival : Clock::now();
  Status status = ValidateRequest(request.get(), s.options);
  bool earliest_expiry = false;
  Result<std::uint64_t> id = status;
  if (status.ok()) {
    std::lock_guard lock(s.mutex);
    id = s.AdmitLocked(std::move(request), &earliest_expiry);
    if (id.ok() && claimed != nullptr) claimed_worker = s.ClaimForCallerLocked();
  }
  if (!id.ok()) {
    s.stats->RecordFailure(ReasonFor(id.status().code()), NanosBetween(arrival, Clock::now()));
    return id;
  }
  if (claimed_worker) {
    claimed->worker_ = *claimed_worker;
    return id;  // no worker to wake, and the request left the expiry set with the queue
  }
  s.NotifyWork();
  if (earliest_expiry) s.expiry_cv.notify_one();
  return id;
}

void Scheduler::RunClaimed(ClaimedRun& claimed) {
  if (!claimed) return;
  Impl& s = *impl_;
  Worker& worker = s.worker_state[claimed.worker_];
  claimed.worker_ = ClaimedRun::kNone;
  QueueList batch;
  batch.splice(batch.end(), worker.claimed_batch);
  s.RunBatch(worker, batch);
  bool more = false;
  {
    std::lock_guard lock(s.mutex);
    worker.claimed = false;
    --s.claimed_workers;
    more = s.AnyQueuedLocked();
  }
  // What queued meanwhile went to other workers, or waited for this one.
  if (more) s.NotifyWork();
}

void Scheduler::Cancel(std::uint64_t request_id) {
  QueueList cancelled;
  {
    std::lock_guard lock(impl_->mutex);
    auto it = impl_->queued_by_id.find(request_id);
    if (it == impl_->queued_by_id.end()) return;
    impl_->TakeLocked(it->second, cancelled);
  }
  impl_->NotifyWork();  // the head of the queues may have changed
  // gRPC cancels a call whose deadline has passed, and that cancellation can reach us before
  // the expiry loop does: a request past its deadline timed out, whichever path noticed first.
  // The client's own deadline passes first (see kDeadlineCancelLead), hence the lead.
  const bool expired = !cancelled.empty() &&
                       Clock::now() + kDeadlineCancelLead >= cancelled.front().request->deadline;
  impl_->Fail(cancelled, expired ? DeadlineExceeded("request timed out in the queue")
                                 : Cancelled("request cancelled by the client"));
}

bool Scheduler::Drain(std::chrono::steady_clock::time_point deadline) {
  {
    std::lock_guard lock(impl_->mutex);
    impl_->draining = true;
    impl_->work_generation.fetch_add(1, std::memory_order_release);
  }
  impl_->work_cv.notify_all();  // waiting batches go now
  QueueList rest;
  {
    std::unique_lock lock(impl_->mutex);
    if (impl_->idle_cv.wait_until(lock, deadline, [&] { return impl_->pending == 0; })) {
      return true;
    }
    rest = impl_->TakeAllLocked();
  }
  impl_->Fail(rest, Unavailable("the model shut down before this request could run"));
  return false;
}

std::size_t Scheduler::pending() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->pending;
}

}  // namespace ltserve
