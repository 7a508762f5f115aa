"""The process's khorovod runtime, as Horovod's module-level API needs it.

Contract: Horovod's Python API is a set of module functions (``hvd.init()``,
``hvd.rank()``), so the package owns exactly one ``_khorovod.Runtime`` per
process, created by the first ``init()`` and kept in the single ``CONTEXT``
object below. That object is the only mutable module state of the package;
everything else receives what it needs from it. ``shutdown()`` ends the
runtime (collective, like the C++ one); a later ``init()`` starts a fresh
one. An ``atexit`` hook shuts a forgotten runtime down before the
interpreter tears down. An elastic worker that comes to join after the job
finished training has nothing to do: ``init()`` ends it with exit status 0
(JobFinishedExit, a SystemExit) instead of raising JobFinishedError.

Orphans: an async handle dropped while its operation is in flight hands its
tensors to ``adopt_orphan``; they stay referenced here until the runtime has
finished with them (checked at every later adoption and at ``reap_orphans``),
and at the latest until ``shutdown``/``reset`` has stopped the background
thread, after which the runtime touches no tensor memory. So no Python program
can make the runtime write into freed memory by dropping a handle.

Thread-safety: ``init``/``shutdown`` are serialized by a lock; the other
calls may come from any thread (the C++ Runtime is thread-safe).
"""

import atexit
import threading

from . import _khorovod
from ._errors import JobFinishedError, NotInitializedError, exit_job_finished, raise_for_status


class _Context:
    def __init__(self):
        self._lock = threading.Lock()
        self._runtime = None
        self._name_counters = {}  # process set id -> unnamed collectives so far
        # Changes whenever the runtime's session ends (shutdown, reset): what
        # was registered in it (process sets) is gone with it.
        self._generation = 0
        self._per_session = {}  # key -> (generation, value): see per_session
        # (native handle, tensors) of dropped handles still in flight.
        self._orphans_lock = threading.Lock()
        self._orphans = []
        # Called with the new Runtime after init() and with None before
        # shutdown(): khorovod.tensorflow's op library attaches its kernels.
        self._runtime_listeners = []

    def add_runtime_listener(self, listener):
        """``listener(runtime)`` runs with the running Runtime now (if any),
        after every later init(), and with None before every shutdown()."""
        with self._lock:
            self._runtime_listeners.append(listener)
            runtime = self._runtime
        if runtime is not None and runtime.is_initialized():
            listener(runtime)

    def init(self):
        with self._lock:
            if self._runtime is not None and self._runtime.is_initialized():
                return False  # Horovod allows init() twice
            runtime = _khorovod.Runtime()
            try:
                raise_for_status(runtime.init())
            except JobFinishedError as e:  # a late joiner: nothing left to do
                exit_job_finished(e)
            self._runtime = runtime
            self._generation += 1
            for listener in self._runtime_listeners:
                listener(runtime)
            return True

    def shutdown(self):
        with self._lock:
            runtime, self._runtime = self._runtime, None
            self._generation += 1
            if runtime is not None:
                for listener in self._runtime_listeners:
                    listener(None)
        if runtime is not None:
            status = runtime.shutdown()
            self._release_orphans()  # the background thread has stopped
            raise_for_status(status)

    def reset(self):
        """Elastic: re-forms the job (Runtime.reset); returns its status."""
        with self._lock:
            self._generation += 1
        status = self.runtime().reset()
        self.reap_orphans()  # the old session's operations have all ended
        return status

    def adopt_orphan(self, native_handle, tensors):
        """Keeps ``tensors`` alive until ``native_handle`` is ready: its Python
        Handle was dropped while the runtime still reads or writes them."""
        self.reap_orphans()
        with self._orphans_lock:
            self._orphans.append((native_handle, tensors))

    def reap_orphans(self):
        """Lets go of the tensors of orphaned operations that have finished."""
        with self._orphans_lock:
            if self._orphans:
                self._orphans = [o for o in self._orphans if not o[0].ready()]

    def orphan_count(self):
        with self._orphans_lock:
            return len(self._orphans)

    def _release_orphans(self):
        with self._orphans_lock:
            self._orphans = []

    def generation(self):
        return self._generation

    def per_session(self, key, compute):
        """``compute()``'s value, computed once per session (from one init or
        re-formation to the next) and cached under ``key``."""
        with self._lock:
            cached = self._per_session.get(key)
            generation = self._generation
        if cached is not None and cached[0] == generation:
            return cached[1]
        value = compute()
        with self._lock:
            self._per_session[key] = (generation, value)
        return value

    def is_initialized(self):
        runtime = self._runtime
        return runtime is not None and runtime.is_initialized()

    def runtime(self):
        """The initialized runtime; NotInitializedError (a ValueError) if none."""
        runtime = self._runtime
        if runtime is None or not runtime.is_initialized():
            raise NotInitializedError(
                "FAILED_PRECONDITION",
                "khorovod has not been initialized; call khorovod.init() (hvd.init()) first",
            )
        return runtime

    def auto_name(self, prefix, process_set=0):
        """A name for an unnamed tensor. Horovod derives these from the call
        order, so unnamed collectives must be issued in the same order on
        every rank; the same rule holds here. Each process set counts apart,
        so collectives in a set that some ranks are not in do not shift the
        names of the others' later unnamed collectives."""
        with self._lock:
            count = self._name_counters.get(process_set, 0) + 1
            self._name_counters[process_set] = count
        if process_set:
            return f"{prefix}.set{process_set}.noname.{count}"
        return f"{prefix}.noname.{count}"


CONTEXT = _Context()


@atexit.register
def _shutdown_at_exit():
    try:
        CONTEXT.shutdown()
    except Exception:  # noqa: BLE001 - nothing useful to do at interpreter exit
        pass
