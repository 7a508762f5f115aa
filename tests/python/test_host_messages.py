"""State._host_messages: Horovod's queue of host updates, which its elastic
scripts poll with empty(), as a view of the runtime's membership_changed()."""

import khorovod
from khorovod import elastic
from khorovod._context import CONTEXT


class _FakeRuntime:
    def __init__(self, changed):
        self.changed = changed

    def membership_changed(self):
        return self.changed


def test_empty_without_a_job():
    state = elastic.ObjectState(epoch=0)
    assert state._host_messages.empty()
    assert state._host_messages.qsize() == 0
    assert state._last_updated_timestamp == 0


def test_not_empty_while_the_rendezvous_announces_a_change(monkeypatch):
    state = elastic.ObjectState(epoch=0)
    fake = _FakeRuntime(True)
    monkeypatch.setattr(type(CONTEXT), "runtime", lambda self: fake)
    assert not state._host_messages.empty()
    assert state._host_messages.qsize() == 1
    fake.changed = False  # re-formed: nothing pending any more
    assert state._host_messages.empty()


def test_not_initialized_is_the_only_error_swallowed(monkeypatch):
    def broken(self):
        raise RuntimeError("boom")

    monkeypatch.setattr(type(CONTEXT), "runtime", broken)
    try:
        elastic.ObjectState(epoch=0)._host_messages.empty()
    except RuntimeError as e:
        assert "boom" in str(e)
    else:
        raise AssertionError("a runtime error must not read as 'no host update'")
    assert khorovod  # the package imports
