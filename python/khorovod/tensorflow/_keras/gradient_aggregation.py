"""Local gradient aggregation for the Keras 2 DistributedOptimizer
(Horovod's backward_passes_per_step > 1): gradients are summed locally for
backward_passes_per_step passes and reduced across ranks only on the last
one; the optimizer applies them only then.

Contract (as Horovod's LocalGradientAggregationHelperEager, which its
tests inspect through ``optimizer._agg_helper.counter``):
- ``counter`` (a tf.Variable) counts the passes since the last reduction;
  it is back at 0 right after a reduction.
- compute_gradients(grads, variables) adds each gradient to its
  accumulator and returns the accumulated values, reduced through
  ``reduce_fn`` (divided by backward_passes_per_step when
  average_aggregated_gradients) on the pass that makes counter reach
  backward_passes_per_step; the accumulators are then cleared.
- apply_gradients(apply, optimizer) runs ``apply`` when the counter is 0
  (a reduction just happened) and otherwise only advances
  ``optimizer.iterations``, so ``iterations`` counts passes, as Horovod's.
- IndexedSlices gradients need sparse_as_dense (accumulators are dense).
Works eagerly and inside tf.function (the branches are tf.cond's).
Thread-safety: one training loop per helper.
"""

import tensorflow as tf


class LocalGradientAggregationHelper:
    def __init__(
        self, backward_passes_per_step, reduce_fn, sparse_as_dense, average_aggregated_gradients
    ):
        if backward_passes_per_step <= 0:
            raise ValueError("backward_passes_per_step must be > 0")
        self.backward_passes_per_step = backward_passes_per_step
        self._reduce_fn = reduce_fn
        self._sparse_as_dense = sparse_as_dense
        self._average = average_aggregated_gradients
        self._accumulators = {}
        self.counter = tf.Variable(0, trainable=False, dtype=tf.int32)

    def _dense(self, grad):
        if isinstance(grad, tf.IndexedSlices):
            if not self._sparse_as_dense:
                raise ValueError(
                    "IndexedSlices are not supported when `backward_passes_per_step` > 1 "
                    "and `sparse_as_dense` is False."
                )
            return tf.convert_to_tensor(grad)
        return grad

    def _accumulate(self, grads):
        totals = []
        for i, grad in enumerate(grads):
            if grad is None:
                totals.append(None)
                continue
            grad = self._dense(grad)
            if i not in self._accumulators:
                self._accumulators[i] = tf.Variable(
                    tf.zeros_like(grad), trainable=False, dtype=grad.dtype
                )
            self._accumulators[i].assign_add(grad)
            totals.append(self._accumulators[i].read_value())
        return totals

    def _reduce_and_clear(self, totals, variables):
        reduced = self._reduce_fn(totals, variables)
        if self._average:
            reduced = [g if g is None else g / self.backward_passes_per_step for g in reduced]
        with tf.control_dependencies([g for g in reduced if g is not None]):
            self.counter.assign(0)
            for acc in self._accumulators.values():
                acc.assign(tf.zeros_like(acc))
            return [g if g is None else tf.identity(g) for g in reduced]

    def compute_gradients(self, grads, variables):
        totals = self._accumulate(list(grads))
        self.counter.assign_add(1)
        present = [i for i, g in enumerate(totals) if g is not None]

        def reduce_branch():
            reduced = self._reduce_and_clear(totals, list(variables))
            return [reduced[i] for i in present]

        def keep_branch():
            return [totals[i] for i in present]

        values = tf.cond(
            tf.equal(self.counter, self.backward_passes_per_step), reduce_branch, keep_branch
        )
        if not isinstance(values, (list, tuple)):
            values = [values]
        out = [None] * len(totals)
        for i, v in zip(present, values):
            out[i] = v
        return out

    def apply_gradients(self, apply, optimizer):
        def skip():
            iterations = getattr(optimizer, "iterations", None)
            if iterations is None:
                return tf.no_op()
            return iterations.assign_add(1)

        def run_apply():
            result = apply()
            return tf.no_op() if result is None else result

        if tf.executing_eagerly():
            return run_apply() if int(self.counter.numpy()) == 0 else skip()
        return tf.cond(
            tf.equal(self.counter, 0), lambda: _as_op(run_apply()), lambda: _as_op(skip())
        )


def _as_op(result):
    """A branch result tf.cond accepts on both sides: an operation."""
    if isinstance(result, tf.Operation):
        return result
    return tf.group(result)
