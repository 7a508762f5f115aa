// A shared library that exports NCCL's entry points by name, for
// NcclLibraryTest: built several times with different FIXTURE_VERSION and
// FIXTURE_* switches, it lets the loader's decisions (version floor,
// required symbols, optional fault-tolerance calls) be tested without a GPU.
// Only ncclGetVersion does anything; the loader calls nothing else, and
// every other entry point fails with ncclInternalError (3) if reached.
extern "C" {

int ncclGetVersion(int* version) {
  *version = FIXTURE_VERSION;
  return 0;
}

#define KH_FIXTURE_FN(name) \
  int name() { return 3; }

KH_FIXTURE_FN(ncclGetErrorString)
KH_FIXTURE_FN(ncclGetLastError)
KH_FIXTURE_FN(ncclGetUniqueId)
KH_FIXTURE_FN(ncclCommInitRankConfig)
KH_FIXTURE_FN(ncclCommAbort)
KH_FIXTURE_FN(ncclCommGetAsyncError)
#ifndef FIXTURE_NO_ALLREDUCE
KH_FIXTURE_FN(ncclAllReduce)
#endif
KH_FIXTURE_FN(ncclAllGather)
KH_FIXTURE_FN(ncclBroadcast)
KH_FIXTURE_FN(ncclSend)
KH_FIXTURE_FN(ncclRecv)
KH_FIXTURE_FN(ncclGroupStart)
KH_FIXTURE_FN(ncclGroupEnd)
KH_FIXTURE_FN(ncclRedOpCreatePreMulSum)
KH_FIXTURE_FN(ncclRedOpDestroy)
#ifdef FIXTURE_SHRINK
KH_FIXTURE_FN(ncclCommShrink)
#endif
#ifdef FIXTURE_REVOKE
KH_FIXTURE_FN(ncclCommRevoke)
#endif
#ifdef FIXTURE_GROW
KH_FIXTURE_FN(ncclCommGrow)
KH_FIXTURE_FN(ncclCommGetUniqueId)
#endif

}  // extern "C"
