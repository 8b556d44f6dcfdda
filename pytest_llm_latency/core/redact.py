"""Secrets never reach an output: the API key, credentials in a URL, and every value
expanded into a managed server's command.

Pure (no I/O).  ``Redactor`` masks known secret strings *and* any ``user:password@`` in a
URL, so a message that quotes a URL with credentials is safe even when nobody registered
that password.  ``expand_command`` expands ``${VAR}``/``$VAR``/``~`` in a managed command and
returns the values it put in, so that they can be masked everywhere the command's output or
errors are shown, while the unexpanded template is what gets displayed.
"""
from __future__ import annotations

import os
import re
from typing import Iterable, Mapping, Sequence
from urllib.parse import quote, unquote, urlsplit, urlunsplit

MASK = "***"
# Values shorter than this are not masked: a 1-3 character "secret" protects nothing, and
# masking it ("4", "on", "cpu") would garble every message it occurs in.
MIN_SECRET_CHARS = 4

# scheme://user:password@ or scheme://token@ (up to the end of the authority)
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^\s/?#:@]*)"
                       r"(?::(?P<pw>[^\s/?#]*))?@")
_VAR = re.compile(r"\$(?:\{(?P<braced>[^}]*)\}|(?P<plain>\w+))", re.ASCII)  # as os.path.expandvars


def redact_url(text: str) -> str:
    """``https://user:token@host`` → ``https://user:***@host``; ``https://token@host`` →
    ``https://***@host``.  Works on any text, not only a bare URL."""
    def mask(m: re.Match) -> str:
        if m.group("pw") is not None:
            return f"{m.group('scheme')}{m.group('user')}:{MASK}@"
        return f"{m.group('scheme')}{MASK}@"
    return _USERINFO.sub(mask, text)


def split_url_credentials(url: str) -> tuple[str, tuple[str, str] | None]:
    """``(url without userinfo, (user, password) percent-decoded)``; ``None`` when the URL
    carries no credentials."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url, None
    if "@" not in parts.netloc:
        return url, None
    userinfo, _, hostport = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    return urlunsplit(parts._replace(netloc=hostport)), (unquote(user), unquote(password))


def credential_secrets(creds: tuple[str, str] | None) -> tuple[str, ...]:
    """The strings to mask for URL credentials: the password (the user when it is a bare
    token), and the basic-auth header value they become (a server may log its headers)."""
    if not creds:
        return ()
    import base64

    user, password = creds
    basic = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    return ((password,) if password else (user,)) + (basic,)


def expand_command(command: Sequence[str], env: Mapping[str, str] = os.environ) -> tuple[list[str], tuple[str, ...]]:
    """Expand ``${VAR}``/``$VAR`` (then ``~``) in each argument, as ``os.path.expandvars`` does.

    Returns ``(argv, secrets)``: ``secrets`` are the values put in for variables, to be
    masked in every message; the unexpanded template is what a message shows."""
    secrets: list[str] = []
    argv = []
    for arg in command:
        def sub(m: re.Match) -> str:
            name = m.group("braced") if m.group("braced") is not None else m.group("plain")
            if name not in env:
                return m.group(0)  # unknown variables stay as written (expandvars does the same)
            secrets.append(env[name])
            return env[name]
        argv.append(os.path.expanduser(_VAR.sub(sub, arg)))
    return argv, tuple(dict.fromkeys(s for s in secrets if len(s) >= MIN_SECRET_CHARS))


class Redactor:
    """Masks the given secrets (longest first) and any URL credentials in a text."""

    def __init__(self, secrets: Iterable[str | None] = ()):
        found = {s for s in secrets if s}
        # a percent-encoded form may be what a URL in a message shows
        found |= {enc for s in list(found) if (enc := quote(s, safe="")) != s}
        self._secrets = tuple(sorted(found, key=len, reverse=True))

    @property
    def secrets(self) -> tuple[str, ...]:
        return self._secrets

    def __call__(self, text: str) -> str:
        for s in self._secrets:
            text = text.replace(s, MASK)
        return redact_url(text)

    def __repr__(self) -> str:
        return f"Redactor({len(self._secrets)} secrets)"
