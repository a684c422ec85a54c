# SPDX-License-Identifier: MIT
"""Core masks: the default one, and the cores this process's calls hold.

The library refuses a launch on a core that is busy in another launch
(CG_ERR_CORE_BUSY) rather than wait. Every call of this package first
reserves its mask here, waiting while another Python thread's call holds any
of its cores, so threads that share cores take turns instead of failing.
"""
import os
import threading

MAX_CORES = 32


def _affinity_mask():
    cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else range(os.cpu_count() or 1)
    mask = 0
    for cpu in cpus:
        if cpu < MAX_CORES:
            mask |= 1 << cpu
    return mask or 1


_AFFINITY_MASK = _affinity_mask()


def default_core_mask():
    """CONVGRAD_CORE_MASK (decimal, 0x.. or 0b..) when set, else one core per
    CPU this process may run on (os.sched_getaffinity, CPUs 0..31)."""
    env = os.environ.get("CONVGRAD_CORE_MASK")
    if env:
        try:
            return int(env, 0)
        except ValueError:
            raise ValueError("CONVGRAD_CORE_MASK=%r is not an integer" % env) from None
    return _AFFINITY_MASK


def resolve(core_mask):
    """The mask to use: core_mask, or the default for None; as an unsigned
    32-bit value (bit 31 included)."""
    if core_mask is None:
        core_mask = default_core_mask()
    if isinstance(core_mask, bool) or not isinstance(core_mask, int):
        raise TypeError("core_mask must be an int, not %s" % type(core_mask).__name__)
    if not 0 <= core_mask < 1 << MAX_CORES:
        raise ValueError("core_mask=%#x does not fit in 32 bits" % core_mask)
    return core_mask


def as_c_int(mask):
    """The unsigned 32-bit mask as the C int the library takes."""
    return mask - (1 << 32) if mask >= 1 << 31 else mask


class CoreReservations:
    """The cores held by this process's calls, under one condition variable."""

    def __init__(self):
        self._changed = threading.Condition()
        self._held = 0

    def acquire(self, mask):
        with self._changed:
            while self._held & mask:
                self._changed.wait()
            self._held |= mask

    def release(self, mask):
        with self._changed:
            self._held &= ~mask
            self._changed.notify_all()

    def call(self, mask, function, *args):
        """function(*args) while holding mask's cores; its result. The try
        follows the acquire at once, so an exception (Ctrl-C) leaves no core
        held."""
        self.acquire(mask)
        try:
            return function(*args)
        finally:
            self.release(mask)


reservations = CoreReservations()
