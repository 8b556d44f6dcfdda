"""A raw-socket loopback server for protocol violations: read one request, answer with
whatever ``respond(request_bytes)`` returns, close.  Bounded: accept polls every 0.5 s and
every socket operation has a timeout; ``stop()`` ends it."""
from __future__ import annotations

import socket
import threading
from typing import Callable


def raw_server(respond: Callable[[bytes], bytes]) -> tuple[int, Callable[[], None]]:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    srv.settimeout(0.5)
    stop = threading.Event()

    def loop():
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except (socket.timeout, OSError):
                continue
            with conn:
                conn.settimeout(2)
                try:
                    conn.sendall(respond(conn.recv(65536)))
                except OSError:
                    pass
    threading.Thread(target=loop, daemon=True).start()
    return srv.getsockname()[1], lambda: (stop.set(), srv.close())


def read_request(conn: socket.socket, buf: bytes = b"") -> tuple[bytes, bytes] | None:
    """One HTTP/1.1 request read off ``conn`` after ``buf`` (what an earlier read left): its body and
    what came after it (a pipelined next request), or None where the peer closed before a whole head."""
    while b"\r\n\r\n" not in buf:
        got = conn.recv(65536)
        if not got:
            return None
        buf += got
    head, _, buf = buf.partition(b"\r\n\r\n")
    length = int(next((ln.split(b":", 1)[1] for ln in head.split(b"\r\n")
                       if ln.lower().startswith(b"content-length:")), b"0"))
    while len(buf) < length:
        buf += conn.recv(65536)
    return buf[:length], buf[length:]
