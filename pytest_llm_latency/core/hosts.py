"""Host names and addresses.  Pure stdlib."""
from __future__ import annotations

import ipaddress


def is_loopback(host: str | None) -> bool:
    """``localhost`` or a loopback IP (127.0.0.0/8, ::1); False for anything else, a name included."""
    if host in (None, ""):
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
