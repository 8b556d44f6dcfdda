"""Kernel stamps for socket reads and writes (Linux; docs/load.md#stamps-and-their-bound): when the
bytes arrived (``SO_TIMESTAMPNS``), not when the client got round to reading them, and when a
write's last byte left (``SO_TIMESTAMPING`` transmit stamps).  Used by ``recv_stamp.StampedStream``.

For TCP the kernel stamps a read with the arrival of its **last** byte (segments waiting in the
receive queue are coalesced), so every event of a late read arrived no later than that stamp and
the client's own delay on it is exactly ``t_read - t_arrival``.  The stamps are on
``CLOCK_REALTIME``, the measurement clock is ``CLOCK_MONOTONIC``: ``sample_offset`` keeps the
narrowest of ``n`` monotonic/realtime/monotonic brackets (offset = realtime − midpoint,
uncertainty = half the bracket).  A wall-clock step during a run (NTP) moves every converted stamp.

Transmit stamps (``enable_tx``: ``SOF_TIMESTAMPING_TX_SOFTWARE | OPT_ID | OPT_TSONLY``) are queued
on the socket's error queue; ``drain_tx`` reads them without blocking (a pending one makes ``poll``
report the socket readable-with-error, so they are drained before the connection goes back to a
pool).  Where there is no such stamp, ``enable`` answers False and the caller keeps its own.
"""
from __future__ import annotations

import socket
import struct
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

#: Linux's SO_TIMESTAMPNS (asm-generic and x86 value; Python's socket module does not name it);
#: the control message carrying the stamp has the same number (SCM_TIMESTAMPNS)
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
_TIMESPEC = struct.Struct("@qq")  # struct timespec on 64-bit Linux: seconds, nanoseconds
#: Linux's SO_TIMESTAMPING (and SCM_TIMESTAMPING); its flags: software transmit stamps, reported in
#: software, one per send (OPT_ID), without the payload echoed back (OPT_TSONLY)
SO_TIMESTAMPING = getattr(socket, "SO_TIMESTAMPING", 37)
TX_FLAGS = (1 << 1) | (1 << 4) | (1 << 7) | (1 << 11)
#: room for the arrival stamp and an SCM_TIMESTAMPING (three timespecs) that may come with it
_RX_ANC = socket.CMSG_SPACE(_TIMESPEC.size) + socket.CMSG_SPACE(3 * _TIMESPEC.size)


def supported() -> bool:
    """Kernel arrival stamps are asked for only on 64-bit Linux (the layout read here)."""
    return sys.platform.startswith("linux") and struct.calcsize("@l") == 8


def _ask(sock: socket.socket, option: int, value: int) -> bool:
    if not supported():
        return False
    try:
        sock.setsockopt(socket.SOL_SOCKET, option, value)
    except OSError:
        return False
    return True


def enable(sock: socket.socket) -> bool:
    """Ask the kernel to stamp this socket's reads; False where it cannot (then keep read stamps)."""
    return _ask(sock, SO_TIMESTAMPNS, 1)


def enable_tx(sock: socket.socket) -> bool:
    """Ask the kernel for a transmit stamp of each send's last byte; False where it cannot."""
    return _ask(sock, SO_TIMESTAMPING, TX_FLAGS)


def drain_tx(sock: socket.socket) -> int | None:
    """Read every queued transmit stamp without blocking (the socket's timeout is left at 0: the
    caller sets its own before its next read); the latest one (``CLOCK_REALTIME`` ns), or None."""
    latest = None
    try:
        sock.settimeout(0)
    except OSError:  # closed under the reader (a client shut down while a straggler read): no stamp
        return None
    while True:
        try:
            _data, ancdata, _flags, _addr = sock.recvmsg(1, 512, socket.MSG_ERRQUEUE)
        except OSError:  # drained (BlockingIOError), or nothing more to learn from this socket's error queue
            return latest
        for level, kind, cdata in ancdata:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPING and len(cdata) >= _TIMESPEC.size:
                sec, nsec = _TIMESPEC.unpack_from(cdata)  # the software stamp is the first of three
                if sec or nsec:
                    latest = sec * 1_000_000_000 + nsec


def recv_stamped(sock: socket.socket, bufsize: int) -> tuple[bytes, int | None]:
    """One read: (its bytes, the kernel's ``CLOCK_REALTIME`` arrival stamp in ns, or None when the
    read carried none)."""
    data, ancdata, _flags, _addr = sock.recvmsg(bufsize, _RX_ANC)
    for level, kind, cdata in ancdata:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(cdata) >= _TIMESPEC.size:
            sec, nsec = _TIMESPEC.unpack_from(cdata)
            return data, sec * 1_000_000_000 + nsec
    return data, None


@dataclass(frozen=True)
class ClockOffset:
    """``CLOCK_REALTIME − CLOCK_MONOTONIC`` in ns, and the half-width of the bracket it came from."""

    realtime_minus_monotonic_ns: int
    uncertainty_ns: int


def sample_offset(n: int = 9, *, monotonic: Callable[[], int] = time.monotonic_ns,
                  realtime: Callable[[], int] = time.time_ns) -> ClockOffset:
    """The realtime − monotonic offset from the narrowest of ``n`` brackets (module docstring)."""
    best: tuple[int, int] | None = None
    for _ in range(max(1, n)):
        m0 = monotonic()
        r = realtime()
        m1 = monotonic()
        width = m1 - m0
        if best is None or width < best[1]:
            best = (r - (m0 + m1) // 2, width)
    assert best is not None
    return ClockOffset(best[0], (best[1] + 1) // 2)
