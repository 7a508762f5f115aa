"""The elastic Keras callbacks (Horovod's horovod._keras.elastic): commit
the state every N batches and at each epoch's end, and keep the state's
``batch``/``epoch`` current so a re-formed job resumes where it was.

Contract (as Horovod's): CommitStateCallback(state, batches_per_commit)
commits (through its ``commit()`` method, which subclasses may override)
after every batches_per_commit-th batch of each fit() and at each epoch's
end;
UpdateBatchStateCallback sets state.batch after each batch (0 at the
epoch's end) and shortens the resumed epoch by the batches already done;
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
    def __init__(self, state):
        self.state = state
        self.steps_per_epoch = None

    def on_train_begin(self, logs=None):
        del logs
        self.steps_per_epoch = None

    def on_epoch_begin(self, epoch, logs=None):
        del epoch, logs
        if self.params.get("steps"):
            if self.steps_per_epoch is None:
                self.steps_per_epoch = self.params.get("steps")
            self.params["steps"] = self.steps_per_epoch - self.state.batch

    def on_batch_end(self, batch, logs=None):
        del logs
        self.state.batch = batch

    def on_epoch_end(self, epoch, logs=None):
        del epoch, logs
        self.state.batch = 0


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
