// Scheduler policy tests: a fake forward pass and a fake vault, no model
// weights and no threads. The fake forward pass makes the greedy token at
// position p equal to kFirstWord + p % kNumWords, so outputs are known; the
// fake vault counts pages and spills to an in-memory tier.
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "model/sampler_vocab.h"
#include "model/tokenizer.h"

namespace kvault {
namespace {

constexpr TokenId kEos = 2;
constexpr TokenId kFirstWord = 3;
constexpr int kNumWords = 20;

std::unique_ptr<Tokenizer> MakeTokenizer() {
  Vocab v;
  v.kind = VocabKind::kSpm;
  v.tokens = {"<unk>", "<s>", "</s>"};
  v.types = {TokenType::kUnknown, TokenType::kControl, TokenType::kControl};
  for (int i = 0; i < kNumWords; ++i) {
    v.tokens.push_back(std::string(1, static_cast<char>('a' + i)));
    v.types.push_back(TokenType::kNormal);
  }
  v.unk = 0;
  v.bos = 1;
  v.eos = kEos;
  auto t = Tokenizer::Create(std::move(v));
  EXPECT_TRUE(t.ok()) << t.status();
  return std::move(t).value();
}

// Pages, residency and an unbounded spill tier (or none).
class FakeKv final : public SlotKv {
 public:
  FakeKv(uint64_t num_pages, uint64_t page_size, bool has_tier)
      : num_pages_(num_pages), page_size_(page_size), has_tier_(has_tier) {}

  uint64_t page_size() const override { return page_size_; }
  uint64_t num_free_pages() const override {
    uint64_t used = 0;
    for (const auto& [seq, s] : seqs_) used += s.spilled ? 0 : Pages(s.len);
    return num_pages_ - used;
  }
  uint64_t PagesHeld(SeqId seq) const override {
    const Seq* s = Find(seq);
    return s == nullptr || s->spilled ? 0 : Pages(s->len);
  }
  uint64_t PagesToGrow(SeqId seq, uint64_t num_cells) const override {
    const uint64_t len = ResidentLength(seq);
    return Pages(len + num_cells) - Pages(len);
  }
  Status MakeRoom(uint64_t num_pages) override {
    std::vector<SeqId> idle;  // least recently used first
    uint64_t could_free = num_free_pages();
    for (const auto& [seq, s] : seqs_) {
      if (!s.active && !s.spilled && s.len > 0 && has_tier_) {
        idle.push_back(seq);
        could_free += Pages(s.len);
      }
    }
    if (could_free < num_pages) return ResourceExhaustedError("no room");
    std::sort(idle.begin(), idle.end(), [&](SeqId a, SeqId b) {
      return seqs_[a].touched < seqs_[b].touched;
    });
    for (SeqId seq : idle) {
      if (num_free_pages() >= num_pages) break;
      seqs_[seq].spilled = true;
    }
    return Status::Ok();
  }
  uint64_t ResidentLength(SeqId seq) const override {
    const Seq* s = Find(seq);
    return s == nullptr || s->spilled ? 0 : s->len;
  }
  bool IsSpilled(SeqId seq) const override {
    const Seq* s = Find(seq);
    return s != nullptr && s->spilled;
  }
  StatusOr<Eviction> Evict(SeqId seq) override {
    Seq& s = seqs_[seq];
    if (s.active) return FailedPreconditionError("active");
    if (!has_tier_) return ResourceExhaustedError("no tier");
    s.spilled = true;
    ++num_spills;
    return Eviction{seq, "ram", s.len, s.len * 16};
  }
  Status BringBack(SeqId seq) override {
    Seq& s = seqs_[seq];
    if (!s.spilled) return Status::Ok();
    // As the vault: idle sequences are evicted for it when short.
    KV_RETURN_IF_ERROR(MakeRoom(Pages(s.len)));
    s.spilled = false;
    return Status::Ok();
  }
  Status Truncate(SeqId seq, Pos keep) override {
    seqs_[seq].len = std::min<uint64_t>(seqs_[seq].len, keep);
    return Status::Ok();
  }
  Status SharePrefix(SeqId dst, SeqId src, uint64_t num_cells) override {
    const Seq* s = Find(src);
    if (s == nullptr || s->spilled) return NotFoundError("not resident");
    seqs_[dst] = Seq{.len = std::min(num_cells, s->len)};
    ++num_shares;
    return Status::Ok();
  }
  Status Erase(SeqId seq) override {
    seqs_.erase(seq);
    return Status::Ok();
  }
  void PublishPrefix(SeqId seq) override { ++num_publishes; }
  void NotePrefill(uint64_t num_tokens, double seconds) override {
    prefill_tokens_noted += num_tokens;
  }
  // A store holding the whole pages of `stored`.
  uint64_t ExtendFromStore(SeqId seq, std::span<const TokenId> prompt,
                           uint64_t keep) override {
    size_t n = 0;
    while (n < stored.size() && n + 1 < prompt.size() &&
           stored[n] == prompt[n]) {
      ++n;
    }
    n = n / page_size_ * page_size_;
    if (n <= keep) return keep;
    seqs_[seq].len = n;
    return n;
  }
  void SetActive(SeqId seq, bool active) override {
    seqs_[seq].active = active;
  }
  void Touch(SeqId seq) override { seqs_[seq].touched = ++clock_; }

  // The forward pass appends cells; false when the pool cannot take them.
  bool Append(SeqId seq, Pos pos) {
    Seq& s = seqs_[seq];
    EXPECT_FALSE(s.spilled) << "decoding a spilled sequence";
    EXPECT_EQ(pos, static_cast<Pos>(s.len)) << "position gap";
    if (PagesToGrow(seq, 1) > num_free_pages()) return false;
    ++s.len;
    return true;
  }
  bool IsActive(SeqId seq) const {
    const Seq* s = Find(seq);
    return s != nullptr && s->active;
  }

  uint64_t num_spills = 0;
  uint64_t num_shares = 0;
  uint64_t num_publishes = 0;
  uint64_t prefill_tokens_noted = 0;
  std::vector<TokenId> stored;  // what the fake prefix store holds

 private:
  struct Seq {
    uint64_t len = 0;
    bool spilled = false;
    bool active = false;
    uint64_t touched = 0;
  };
  uint64_t Pages(uint64_t cells) const {
    return (cells + page_size_ - 1) / page_size_;
  }
  const Seq* Find(SeqId seq) const {
    auto it = seqs_.find(seq);
    return it == seqs_.end() ? nullptr : &it->second;
  }

  uint64_t num_pages_;
  uint64_t page_size_;
  bool has_tier_;
  std::map<SeqId, Seq> seqs_;
  uint64_t clock_ = 0;
};

// Appends to the fake vault; the logits favour kFirstWord + pos % kNumWords
// for the token after position pos.
class FakeForward final : public ForwardPass {
 public:
  explicit FakeForward(FakeKv* kv, size_t n_vocab)
      : kv_(kv), n_vocab_(n_vocab) {}

  StatusOr<std::vector<float>> Decode(
      std::span<const BatchToken> batch) override {
    std::vector<float> logits;
    std::set<SeqId> seqs;
    for (const BatchToken& t : batch) {
      if (!kv_->Append(t.seq, t.pos)) {
        return ResourceExhaustedError("fake pool full");
      }
      seqs.insert(t.seq);
      if (!t.want_logits) continue;
      std::vector<float> row(n_vocab_, 0.0f);
      row[NextToken(t.pos)] = 10.0f;
      logits.insert(logits.end(), row.begin(), row.end());
    }
    batches.push_back({batch.size(), seqs.size()});
    return logits;
  }
  Status DiscardRange(SeqId, Pos, Pos) override {
    return UnimplementedError("no context shift here");
  }
  size_t n_vocab() const override { return n_vocab_; }

  static TokenId NextToken(Pos pos) { return kFirstWord + pos % kNumWords; }

  struct Batch {
    size_t num_tokens;
    size_t num_seqs;
  };
  std::vector<Batch> batches;

 private:
  FakeKv* kv_;
  size_t n_vocab_;
};

// Records one request's output.
class RecordingSink final : public CompletionSink {
 public:
  bool OnToken(const TokenEvent& event) override {
    tokens.push_back(event.token);
    return true;
  }
  void OnDone(const StatusOr<CompletionResult>& r) override {
    done = true;
    status = r.status();
    if (r.ok()) result = *r;
  }
  std::vector<TokenId> tokens;
  bool done = false;
  Status status;
  CompletionResult result;
};

// A slot job whose I/O the test completes by hand.
class FakeJob final : public SlotJob {
 public:
  explicit FakeJob(int* log) : log_(log) {}
  JobKind kind() const override { return JobKind::kSave; }
  std::string where() const override { return "fake save"; }
  JobStep Start(JobContext&) override { return JobStep{true, {}}; }
  Status Io() override { return Status::Ok(); }
  JobStep Resume(JobContext&, const Status& io) override {
    ++*log_;
    return JobStep{false, io};
  }
  void Fail(JobContext&, const Status&) override { *log_ = -1; }
  void TimedOut(JobContext&, const Status&) override { *log_ = -2; }

 private:
  int* log_;
};

class SchedulerTest : public ::testing::Test {
 protected:
  void Build(uint32_t n_slots, uint64_t num_pages, bool has_tier,
             uint32_t max_batch = 64, uint32_t chunk = 64) {
    kv_ = std::make_unique<FakeKv>(num_pages, /*page_size=*/4, has_tier);
    forward_ = std::make_unique<FakeForward>(kv_.get(),
                                             tokenizer_->vocab().size());
    SchedulerOptions o;
    o.n_slots = n_slots;
    o.max_batch_tokens = max_batch;
    o.prefill_chunk = chunk;
    o.generation.ctx_per_slot = 256;
    o.cache_idle_slots = cache_idle_slots_;
    scheduler_ = std::make_unique<Scheduler>(o, kv_.get(), forward_.get(),
                                             tokenizer_.get(), &vocab_);
  }
  std::shared_ptr<RecordingSink> Submit(std::vector<TokenId> prompt,
                                        int32_t n_predict,
                                        std::optional<uint32_t> slot = {}) {
    auto sink = std::make_shared<RecordingSink>();
    CompletionWork work;
    work.task_id = ++next_task_;
    work.params.prompt = std::move(prompt);
    work.params.n_predict = n_predict;
    work.params.sampling.temperature = 0;
    work.params.slot = slot;
    work.sink = sink;
    scheduler_->Enqueue(std::move(work));
    return sink;
  }
  // Admits and steps until nothing runs (at most `max_steps` steps).
  void RunToIdle(int max_steps = 500) {
    for (int i = 0; i < max_steps; ++i) {
      scheduler_->Admit();
      if (!scheduler_->HasWork()) break;
      scheduler_->Step();
      Deliver();
    }
    Deliver();
  }
  void Deliver() {
    Deliveries calls;
    calls.swap(scheduler_->state().deliveries);
    for (auto& call : calls) call();
  }
  const Slot& slot(uint32_t i) { return scheduler_->state().slots[i]; }
  // What a request of `prompt` generates alone: the fake model's tokens.
  static std::vector<TokenId> Expected(size_t prompt_len, int n) {
    std::vector<TokenId> out;
    for (int i = 0; i < n; ++i) {
      out.push_back(FakeForward::NextToken(prompt_len - 1 + i));
    }
    return out;
  }
  static std::vector<TokenId> Prompt(size_t n, TokenId salt) {
    std::vector<TokenId> p;
    for (size_t i = 0; i < n; ++i) {
      p.push_back(kFirstWord + (salt + i * 7) % kNumWords);
    }
    return p;
  }

  std::unique_ptr<Tokenizer> tokenizer_ = MakeTokenizer();
  TokenizerSamplerVocab vocab_{tokenizer_.get()};
  std::unique_ptr<FakeKv> kv_;
  std::unique_ptr<FakeForward> forward_;
  std::unique_ptr<Scheduler> scheduler_;
  uint64_t next_task_ = 0;
  bool cache_idle_slots_ = false;  // read by Build
};

TEST_F(SchedulerTest, AdmitsIntoIdleSlotsAndQueuesTheRest) {
  Build(/*n_slots=*/2, /*num_pages=*/64, /*has_tier=*/false);
  auto a = Submit(Prompt(5, 1), 4);
  auto b = Submit(Prompt(5, 2), 4);
  auto c = Submit(Prompt(5, 3), 4);
  scheduler_->Admit();
  EXPECT_EQ(slot(0).state, SlotState::kPrefilling);
  EXPECT_EQ(slot(1).state, SlotState::kPrefilling);
  EXPECT_EQ(scheduler_->NumQueuedCompletions(), 1u);
  RunToIdle();
  for (const auto& sink : {a, b, c}) {
    ASSERT_TRUE(sink->done);
    EXPECT_TRUE(sink->status.ok()) << sink->status;
    EXPECT_EQ(sink->tokens, Expected(5, 4));
    EXPECT_EQ(sink->result.stop_type, "limit");
  }
  EXPECT_EQ(slot(0).state, SlotState::kIdle);
  EXPECT_EQ(slot(1).state, SlotState::kIdle);
  EXPECT_EQ(scheduler_->state().counters.requests_total, 3u);
}

// A request in another slot reuses the prompt prefix a slot holds, in whole
// pages (4 cells here): the pages are shared, only the rest of the prompt is
// evaluated, and the output is what the request produces alone.
TEST_F(SchedulerTest, PromptPrefixHeldByAnotherSlotIsShared) {
  Build(/*n_slots=*/3, /*num_pages=*/64, /*has_tier=*/false);
  const std::vector<TokenId> system = Prompt(12, 1);
  std::vector<TokenId> pa = system;
  pa.push_back(kFirstWord);
  auto a = Submit(pa, 4, /*slot=*/0);
  RunToIdle();
  std::vector<TokenId> pb = system;
  pb.push_back(kFirstWord + 1);
  pb.push_back(kFirstWord + 2);
  auto b = Submit(pb, 4, /*slot=*/1);
  RunToIdle();
  ASSERT_TRUE(b->status.ok()) << b->status;
  EXPECT_EQ(b->tokens, Expected(pb.size(), 4));
  EXPECT_EQ(b->result.timings.cache_n, system.size());
  EXPECT_EQ(b->result.timings.prompt_n, pb.size() - system.size());
  EXPECT_EQ(kv_->num_shares, 1u);
  EXPECT_EQ(scheduler_->state().counters.prompt_tokens_shared_total,
            system.size());
  // A 14-token prompt in a third slot: 13 tokens could come from slot 1
  // (the last is always evaluated), whole pages make that 12.
  auto c = Submit(pb, 4, /*slot=*/2);
  RunToIdle();
  EXPECT_EQ(c->tokens, Expected(pb.size(), 4));
  EXPECT_EQ(c->result.timings.prompt_n, 2u);
  EXPECT_EQ(kv_->num_shares, 2u);
  // Less than a page in common: nothing is shared.
  std::vector<TokenId> pd(system.begin(), system.begin() + 3);
  pd.push_back(kFirstWord + 5);
  pd.push_back(kFirstWord + 6);
  auto d = Submit(pd, 2, /*slot=*/2);
  RunToIdle();
  EXPECT_EQ(d->result.timings.prompt_n, pd.size() - 3);  // its own 3
  EXPECT_EQ(kv_->num_shares, 2u);
}

// A prompt that continues what the prefix store holds loads those pages
// and evaluates only the rest; every finished request is published.
TEST_F(SchedulerTest, PromptContinuingTheStoreLoadsItsPages) {
  Build(2, 64, false);
  std::vector<TokenId> p = Prompt(11, 1);
  kv_->stored.assign(p.begin(), p.begin() + 9);  // two whole pages and one
  auto a = Submit(p, 3, /*slot=*/0);
  RunToIdle();
  ASSERT_TRUE(a->status.ok()) << a->status;
  EXPECT_EQ(a->tokens, Expected(p.size(), 3));
  EXPECT_EQ(a->result.timings.cache_n, 8u);
  EXPECT_EQ(a->result.timings.prompt_n, 3u);
  EXPECT_EQ(scheduler_->state().counters.prompt_tokens_from_store_total, 8u);
  EXPECT_EQ(kv_->num_publishes, 1u);
  EXPECT_EQ(kv_->prefill_tokens_noted, 3u);  // the store's recompute rate
  // The same prompt in the same slot: its own cache beats the store.
  auto b = Submit(p, 3, /*slot=*/0);
  RunToIdle();
  EXPECT_EQ(b->result.timings.prompt_n, 1u);
  EXPECT_EQ(scheduler_->state().counters.prompt_tokens_from_store_total, 8u);
  EXPECT_EQ(kv_->num_publishes, 2u);
}

TEST_F(SchedulerTest, NoSharingWithoutCachePrompt) {
  Build(2, 64, false);
  const std::vector<TokenId> p = Prompt(12, 1);
  auto a = Submit(p, 2, /*slot=*/0);
  RunToIdle();
  CompletionParams params;
  params.prompt = p;
  params.n_predict = 2;
  params.sampling.temperature = 0;
  params.slot = 1;
  params.cache_prompt = false;
  auto submit = [&](uint64_t task_id) {
    auto sink = std::make_shared<RecordingSink>();
    scheduler_->Enqueue(CompletionWork{task_id, params, sink});
    RunToIdle();
    return sink;
  };
  EXPECT_EQ(submit(99)->result.timings.prompt_n, p.size());
  EXPECT_EQ(kv_->num_shares, 0u);
  kv_->stored = p;  // nor loading from the store
  EXPECT_EQ(submit(100)->result.timings.prompt_n, p.size());
}

TEST_F(SchedulerTest, ChunkedPrefillRunsBesideDecode) {
  Build(2, 64, false, /*max_batch=*/8, /*chunk=*/4);
  auto a = Submit(Prompt(2, 1), 20);
  scheduler_->Admit();
  scheduler_->Step();  // a's prompt: 2 tokens, then it generates
  EXPECT_EQ(slot(0).state, SlotState::kGenerating);
  auto b = Submit(Prompt(12, 2), 3);
  scheduler_->Admit();
  forward_->batches.clear();
  scheduler_->Step();
  // One decode token of a beside a prompt chunk of b (the chunk limit).
  ASSERT_EQ(forward_->batches.size(), 1u);
  EXPECT_EQ(forward_->batches[0].num_seqs, 2u);
  EXPECT_EQ(forward_->batches[0].num_tokens, 1u + 4u);
  EXPECT_EQ(slot(1).state, SlotState::kPrefilling);
  RunToIdle();
  EXPECT_EQ(a->tokens, Expected(2, 20));
  EXPECT_EQ(b->tokens, Expected(12, 3));
}

TEST_F(SchedulerTest, IdleSlotIsSpilledForRoomAndItsPrefixComesBack) {
  // 6 pages of 4 cells: one 16-token conversation fills 4 of them.
  Build(2, 6, /*has_tier=*/true);
  const std::vector<TokenId> first = Prompt(14, 1);
  auto a = Submit(first, 2, /*slot=*/0);
  RunToIdle();
  ASSERT_TRUE(a->status.ok()) << a->status;
  EXPECT_EQ(slot(0).cached.size(), 15u);
  auto b = Submit(Prompt(14, 5), 2, /*slot=*/1);
  RunToIdle();
  ASSERT_TRUE(b->status.ok()) << b->status;
  EXPECT_EQ(slot(0).state, SlotState::kSpilled);  // evicted for b
  // The same conversation again on slot 0: its KV comes back, no recompute.
  std::vector<TokenId> again = first;
  again.insert(again.end(), a->tokens.begin(), a->tokens.end() - 1);
  auto c = Submit(again, 2, /*slot=*/0);
  RunToIdle();
  ASSERT_TRUE(c->status.ok()) << c->status;
  // All but the last prompt token, which is evaluated for its logits.
  EXPECT_EQ(c->result.timings.cache_n, 14u);
  EXPECT_EQ(slot(1).state, SlotState::kSpilled);
}

// --cache-idle-slots: a request starting in one slot moves every other idle
// slot's KV to the tier at once, though the pool has room; a conversation
// that returns takes its KV back and evaluates only its new tokens.
TEST_F(SchedulerTest, CacheIdleSlotsSpillsTheOtherIdleSlotsAtStart) {
  cache_idle_slots_ = true;
  Build(3, 64, /*has_tier=*/true);
  const std::vector<TokenId> first = Prompt(14, 1);
  auto a = Submit(first, 2, /*slot=*/0);
  RunToIdle();
  ASSERT_TRUE(a->status.ok()) << a->status;
  EXPECT_EQ(slot(0).state, SlotState::kIdle);  // nobody else started
  EXPECT_EQ(kv_->num_spills, 0u);
  auto b = Submit(Prompt(6, 5), 2, /*slot=*/1);
  scheduler_->Admit();
  EXPECT_EQ(slot(0).state, SlotState::kSpilled);
  EXPECT_EQ(slot(2).state, SlotState::kIdle);  // it held no KV
  EXPECT_EQ(kv_->num_spills, 1u);
  RunToIdle();
  ASSERT_TRUE(b->status.ok()) << b->status;
  std::vector<TokenId> again = first;
  again.insert(again.end(), a->tokens.begin(), a->tokens.end() - 1);
  auto c = Submit(again, 2);  // no slot named: the longest cached prefix
  RunToIdle();
  ASSERT_TRUE(c->status.ok()) << c->status;
  EXPECT_EQ(c->result.slot, 0u);
  EXPECT_EQ(c->result.timings.cache_n, 14u);
  EXPECT_EQ(slot(1).state, SlotState::kSpilled);
  EXPECT_EQ(kv_->num_spills, 2u);
}

// Without it (kvault's default) idle KV stays in the pool while it fits.
TEST_F(SchedulerTest, IdleSlotsKeepTheirKvWhileThereIsRoom) {
  Build(2, 64, /*has_tier=*/true);
  auto a = Submit(Prompt(14, 1), 2, /*slot=*/0);
  RunToIdle();
  auto b = Submit(Prompt(6, 5), 2, /*slot=*/1);
  RunToIdle();
  ASSERT_TRUE(b->status.ok()) << b->status;
  EXPECT_EQ(slot(0).state, SlotState::kIdle);
  EXPECT_EQ(kv_->num_spills, 0u);
}

TEST_F(SchedulerTest, YoungestRequestIsPreemptedAndResumesToTheSameOutput) {
  // 8 pages of 4 cells = 32 cells for two requests wanting 24 each.
  Build(2, 8, /*has_tier=*/true);
  auto old_one = Submit(Prompt(8, 1), 16);
  auto young = Submit(Prompt(8, 2), 16);
  bool saw_preempted = false;
  for (int i = 0; i < 200 && (!old_one->done || !young->done); ++i) {
    scheduler_->Admit();
    scheduler_->Step();
    Deliver();
    if (slot(1).state == SlotState::kPreempted && !saw_preempted) {
      saw_preempted = true;  // the older request goes on alone
      EXPECT_EQ(slot(0).state, SlotState::kGenerating);
      EXPECT_FALSE(kv_->IsActive(SeqId(1)));
      EXPECT_TRUE(kv_->IsSpilled(SeqId(1)));
      // /slots says so (it said "spilled", read from the vault's flag).
      EXPECT_STREQ(SlotDisplayState(slot(1), kv_->IsSpilled(SeqId(1))),
                   "preempted");
      EXPECT_STREQ(SlotDisplayState(slot(0), false), "generating");
    }
  }
  EXPECT_TRUE(saw_preempted);
  EXPECT_GE(scheduler_->state().counters.preemptions, 1u);
  ASSERT_TRUE(old_one->status.ok()) << old_one->status;
  ASSERT_TRUE(young->status.ok()) << young->status;
  EXPECT_EQ(old_one->tokens, Expected(8, 16));
  EXPECT_EQ(young->tokens, Expected(8, 16));
}

TEST_F(SchedulerTest, AloneAndWithoutRoomARequestFailsNoRoom) {
  Build(1, 2, /*has_tier=*/false);
  auto a = Submit(Prompt(12, 1), 4);  // 12 cells > 8
  RunToIdle();
  ASSERT_TRUE(a->done);
  EXPECT_TRUE(a->status.IsResourceExhausted()) << a->status;
  EXPECT_EQ(a->status.reason(), "no_room");
  EXPECT_EQ(slot(0).state, SlotState::kIdle);
}

TEST_F(SchedulerTest, SlotJobPinsItsSlotWhileOthersDecode) {
  Build(2, 64, false);
  int resumed = 0;
  SlotActionWork save;
  save.task_id = ++next_task_;
  save.slot = 0;
  save.job = std::make_unique<FakeJob>(&resumed);
  scheduler_->Enqueue(std::move(save));
  auto pinned = Submit(Prompt(4, 1), 2, /*slot=*/0);  // waits behind it
  auto other = Submit(Prompt(4, 2), 2);
  EXPECT_TRUE(scheduler_->Admit());
  EXPECT_EQ(slot(0).state, SlotState::kIo);
  std::vector<IoTicket> io = scheduler_->jobs().TakeIo();
  ASSERT_EQ(io.size(), 1u);
  RunToIdle();  // the other request runs on slot 1 meanwhile
  EXPECT_TRUE(other->done);
  EXPECT_FALSE(pinned->done);
  EXPECT_EQ(slot(0).state, SlotState::kIo);
  scheduler_->jobs().OnIoDone(io[0].id, io[0].job->Io());
  EXPECT_EQ(resumed, 1);
  EXPECT_EQ(slot(0).state, SlotState::kIdle);
  EXPECT_EQ(scheduler_->state().counters.saves_ok, 1u);
  RunToIdle();
  EXPECT_TRUE(pinned->done);
  EXPECT_EQ(pinned->result.slot, 0u);
}

TEST_F(SchedulerTest, SlotJobPastItsDeadlineAnswersAndUnpinsLate) {
  Build(1, 64, false);
  int log = 0;
  SlotActionWork save;
  save.task_id = ++next_task_;
  save.slot = 0;
  save.job = std::make_unique<FakeJob>(&log);
  scheduler_->Enqueue(std::move(save));
  scheduler_->Admit();
  std::vector<IoTicket> io = scheduler_->jobs().TakeIo();
  ASSERT_EQ(io.size(), 1u);
  ASSERT_TRUE(scheduler_->jobs().NextDeadline().has_value());
  const auto later = *scheduler_->jobs().NextDeadline() + std::chrono::hours(1);
  EXPECT_EQ(scheduler_->jobs().Expire(later), 1u);
  EXPECT_EQ(log, -2);  // TimedOut answered the caller
  EXPECT_EQ(scheduler_->state().counters.io_stuck, 1u);
  EXPECT_EQ(scheduler_->state().counters.saves_failed, 1u);
  EXPECT_EQ(slot(0).state, SlotState::kIdle);  // FakeJob does not pin
  scheduler_->jobs().OnIoDone(io[0].id, Status::Ok());
  EXPECT_EQ(scheduler_->state().counters.io_stuck, 0u);
  EXPECT_EQ(scheduler_->jobs().num_io_in_flight(), 0u);
}

TEST_F(SchedulerTest, CancelEndsQueuedAndRunningRequests) {
  Build(1, 64, false);
  auto running = Submit(Prompt(4, 1), 50);
  auto queued = Submit(Prompt(4, 2), 50);
  scheduler_->Admit();
  scheduler_->Step();
  scheduler_->Cancel({1, 2});
  Deliver();
  ASSERT_TRUE(running->done && queued->done);
  EXPECT_EQ(running->status.reason(), kReasonCancelled);
  EXPECT_EQ(queued->status.reason(), kReasonCancelled);
  EXPECT_EQ(slot(0).state, SlotState::kIdle);
  EXPECT_FALSE(scheduler_->HasWork());
}

TEST(SlotStateTest, TransitionsFollowTheDiagram) {
  using S = SlotState;
  EXPECT_TRUE(IsValidTransition(S::kIdle, S::kPrefilling));
  EXPECT_TRUE(IsValidTransition(S::kSpilled, S::kIo));
  EXPECT_TRUE(IsValidTransition(S::kGenerating, S::kPreempted));
  EXPECT_TRUE(IsValidTransition(S::kPreempted, S::kGenerating));
  EXPECT_FALSE(IsValidTransition(S::kIo, S::kPrefilling));
  EXPECT_FALSE(IsValidTransition(S::kIdle, S::kGenerating));
  EXPECT_FALSE(IsValidTransition(S::kIdle, S::kPreempted));
  EXPECT_FALSE(IsValidTransition(S::kPrefilling, S::kIo));
}

}  // namespace
}  // namespace kvault
