"""The elastic Keras callbacks (Horovod's horovod._keras.elastic): commit
the state every N batches and at each epoch's end, and keep the state's
``batch``/``epoch`` current so a re-formed job resumes where it was.

Contract (as Horovod's): CommitStateCallback(state, batches_per_commit)
commits (through its ``commit()`` method, which subclasses may override)
after every batches_per_commit-th batch of each fit() and at each epoch's
end;
UpdateBatchStateCallback sets state.batch after each batch (0 at the
epoch's end) and, when fit() has steps_per_epoch, makes the epoch resumed
at state.batch B run only steps_per_epoch - B batches, under Keras 3 and
tf-keras alike (see the class);
UpdateEpochStateCallback sets state.epoch to the next epoch to run.
Thread-safety: callbacks run on the training thread.
"""


class CommitStateCallbackImpl:
    def __init__(self, state, batches_per_commit=1):
        self.state = state
        self.batches_per_commit = batches_per_commit
        self.batches_remaining = batches_per_commit

    def on_train_begin(self, logs=None):
        # Every fit() after a re-formation counts afresh, on survivors and
        # newcomers alike, so all ranks commit (an allreduce) at the same batch.
        del logs
        self.batches_remaining = self.batches_per_commit

    def on_batch_end(self, batch, logs=None):
        del batch, logs
        self.batches_remaining -= 1
        if self.batches_remaining == 0:
            self.commit()
            self.batches_remaining = self.batches_per_commit

    def on_epoch_end(self, epoch, logs=None):
        del epoch, logs
        self.commit()

    def commit(self):
        """Commits the state; subclasses may override it (Horovod's hook)."""
        self.state.commit()


class UpdateBatchStateCallbackImpl:
    """Horovod's rule, made to hold in every Keras fit loop: an epoch that
    begins at state.batch B > 0 (resumed after a reset) runs
    steps_per_epoch - B batches, numbered B, B+1, ... in state.batch.

    Horovod shortens the epoch only by lowering ``params["steps"]``, which
    no fit loop of Keras 3 or of tf-keras 2.x reads (the loops iterate over
    their own step counts), so the resumed epoch ran whole again. The
    callback still lowers ``params["steps"]`` (progress bars show it) and
    ends the shortened epoch with the public ``model.stop_training`` flag,
    which every fit loop checks after each batch's callbacks; it clears
    the flag again at the epoch's end when it was the one that set it, so
    the following epochs run as asked. A callback that sets the flag in
    ``on_epoch_end`` of that one resumed epoch before this one (earlier in
    the list) is overridden, and stops training an epoch later.
    """

    def __init__(self, state):
        self.state = state
        self.steps_per_epoch = None
        self._first_batch = 0  # state.batch of this epoch's first batch
        self._epoch_steps = None  # batches this epoch runs when cut short
        self._stopped_epoch = False

    def on_train_begin(self, logs=None):
        del logs
        self.steps_per_epoch = None

    def on_epoch_begin(self, epoch, logs=None):
        del epoch, logs
        self._first_batch, self._epoch_steps, self._stopped_epoch = 0, None, False
        if self.params.get("steps"):
            if self.steps_per_epoch is None:
                self.steps_per_epoch = self.params.get("steps")
            steps = self.steps_per_epoch - self.state.batch
            self.params["steps"] = steps
            if 0 < steps < self.steps_per_epoch:
                self._first_batch, self._epoch_steps = self.state.batch, steps

    def on_batch_end(self, batch, logs=None):
        del logs
        # Keras numbers a resumed epoch's batches from 0; the state counts
        # the whole epoch's, so a second reset resumes where this one is.
        self.state.batch = self._first_batch + batch
        if self._epoch_steps is not None and batch + 1 >= self._epoch_steps:
            if not self.model.stop_training:
                self.model.stop_training = True
                self._stopped_epoch = True

    def on_epoch_end(self, epoch, logs=None):
        del epoch, logs
        self.state.batch = 0
        if self._stopped_epoch:
            self.model.stop_training = False
            self._stopped_epoch = False


class UpdateEpochStateCallbackImpl:
    def __init__(self, state):
        self.state = state
        self.initial_epoch = state.epoch

    def on_train_begin(self, logs=None):
        del logs
        self.initial_epoch = self.state.epoch

    def on_epoch_end(self, epoch, logs=None):
        del logs
        self.state.epoch = self.initial_epoch + epoch + 1
