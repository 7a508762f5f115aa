"""Horovod's horovod.common.util helpers that scripts and Horovod's tests
import: version comparison and the power-of-two check. Pure functions."""


def _version_tuple(text):
    parts = []
    for piece in str(text).replace("-", "+").split("+")[0].split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def is_version_greater_equal_than(ver, target):
    """True when version string ``ver`` is at least ``target`` (numeric
    components compared; suffixes such as "-tf" or "rc1" ignored)."""
    return _version_tuple(ver) >= _version_tuple(target)


def num_rank_is_power_2(num_rank):
    """True when ``num_rank`` is a positive power of two (Adasum needs it)."""
    return num_rank > 0 and (num_rank & (num_rank - 1)) == 0
