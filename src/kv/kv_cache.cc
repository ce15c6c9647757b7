#include "kv/kv_cache.h"

#include <chrono>
#include <utility>

#include "kv/defrag_planner.h"

namespace kvault {

StatusOr<std::unique_ptr<KvCache>> KvCache::Create(const KvCacheOptions& o) {
  // contiguous+defrag places as contiguous does; Append adds the retry.
  const KvPolicy placement =
      o.policy == KvPolicy::kPaged ? KvPolicy::kPaged : KvPolicy::kContiguous;
  KV_ASSIGN_OR_RETURN(std::unique_ptr<AllocationPolicy> policy,
                      MakeAllocationPolicy(KvPolicyName(placement)));
  KV_ASSIGN_OR_RETURN(PagePool pool, PagePool::Create(o.num_pages, o.page_size));
  std::optional<KvStorage> storage;
  if (o.layout) {
    KV_ASSIGN_OR_RETURN(KvStorage s, KvStorage::Create(*o.layout, pool.num_cells()));
    storage.emplace(std::move(s));
  }
  return std::unique_ptr<KvCache>(new KvCache(
      std::move(pool), std::move(policy), std::move(storage), o.policy));
}

KvCache::KvCache(PagePool pool, std::unique_ptr<AllocationPolicy> policy,
                 std::optional<KvStorage> storage, KvPolicy kv_policy)
    : pool_(std::move(pool)),
      policy_(std::move(policy)),
      table_(std::make_unique<SequenceTable>(&pool_, policy_.get())),
      storage_(std::move(storage)),
      kv_policy_(kv_policy) {}

void KvCache::ApplyMoves(const CellMoves& moves) {
  if (storage_ && !moves.empty()) storage_->ApplyMoves(moves);
}

StatusOr<std::vector<CellId>> KvCache::Append(
    SeqId seq, std::span<const TokenPos> tokens) {
  if (MayMoveCellsOnAppend() && !table_->CanAppend(seq, tokens.size()) &&
      pool_.num_free_pages() > 0) {
    Defrag();
  }
  KV_ASSIGN_OR_RETURN(AppendResult result, table_->Append(seq, tokens));
  ApplyMoves(result.cow_moves);
  return std::move(result.cells);
}

Status KvCache::RemoveRange(SeqId seq, Pos p0, Pos p1) {
  KV_ASSIGN_OR_RETURN(CellMoves moves, table_->RemoveRange(seq, p0, p1));
  ApplyMoves(moves);
  return Status::Ok();
}

Status KvCache::CopySequence(SeqId src, SeqId dst, uint64_t num_cells) {
  return table_->CopySequence(src, dst, num_cells);
}

Status KvCache::AppendSequence(SeqId dst, SeqId from) {
  return table_->AppendSequence(dst, from);
}

Status KvCache::ReplaceSequence(SeqId dst, SeqId from) {
  return table_->ReplaceSequence(dst, from);
}

void KvCache::RemoveSequence(SeqId seq) { table_->RemoveSequence(seq); }
void KvCache::KeepOnly(SeqId seq) { table_->KeepOnly(seq); }
void KvCache::Clear() { table_->Clear(); }

void KvCache::ShiftPositions(SeqId seq, Pos p0, Pos p1, Pos delta) {
  table_->ShiftPositions(seq, p0, p1, delta);
}

DefragReport KvCache::Defrag() {
  auto t0 = std::chrono::steady_clock::now();
  DefragInput input{pool_.num_pages(), pool_.page_size(),
                    table_->SequencePageLists()};
  DefragPlan plan = PlanDefrag(input);
  ApplyMoves(plan.moves);
  table_->ApplyPageRemap(plan.new_page_of);
  auto t1 = std::chrono::steady_clock::now();
  ++counters_.defrag_runs;
  counters_.cells_moved += plan.cells_moved;
  DefragReport report;
  report.num_moves = plan.moves.size();
  report.cells_moved = plan.cells_moved;
  report.lower_bound_cells = plan.lower_bound_cells;
  report.num_sequences_left_fragmented = plan.num_sequences_left_fragmented;
  report.elapsed_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  return report;
}

}  // namespace kvault
