// Process sets: collectives among a subset of the job's ranks.
//
// A process set is an ascending list of global ranks registered with
// Runtime::add_process_set, a collective call every rank of the job makes
// with the same list (the global set, id kGlobalProcessSet, always exists and
// holds every rank). Registration connects the members to each other with
// their own communicator (a Gloo context among the members, its addresses
// exchanged over the job's connection), so a set's collectives involve only
// its members and run independently of the other sets' traffic.
//
// A collective names its set in its options (`process_set`); then:
//   * ranks, sizes and split counts are those of the set: allgather
//     concatenates in member order, alltoall splits have one entry per
//     member, kAverage divides by the set's size;
//   * a broadcast's root_rank is a global rank, which must be a member;
//   * a rank outside the set, or naming an id that is not registered, is
//     refused at once with kInvalidArgument;
//   * negotiation stays global (one coordinator, rank 0), which is what lets
//     it report a tensor name submitted under two different sets by ranks
//     that wait for each other as kMismatch on each of them, instead of a
//     hang; disagreements within a set are kMismatch as for the global set;
//   * tensor names must be unique among the operations in flight on a rank,
//     whatever their sets.
// Non-global sets take host tensors only (kInvalidArgument for device ones).
// Their operations bypass the response cache (whose readiness bits are
// ANDed over every rank), so each one costs a full coordinator round trip;
// the global set's steady-state path is unchanged.
//
// shutdown() stays collective over the whole job and aborts operations
// still pending on any rank: ranks whose set finished early should meet the
// others (e.g. a global barrier) before shutting down.
//
// Sets belong to one generation: an elastic reset (and shutdown) drops every
// non-global set, because the ranks they were made of no longer exist; the
// program registers them again after the reset if it still needs them.
// Ids are not reused within a generation.
//
// Thread-safety: the queries may be called from any thread; add and remove
// block until every rank made the same call.
#pragma once

namespace khorovod {

inline constexpr int kGlobalProcessSet = 0;

}  // namespace khorovod
