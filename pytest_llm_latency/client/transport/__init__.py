"""Bytes on the wire: the HTTP client and its timeouts (``http``), stamps of every read
(``clock``, ``kernel_stamps``, ``recv_stamp``, ``read_pump``), SSE and NDJSON framing (``sse``,
``ndjson``) and what a failed request was (``failures``).

May import ``core`` only (the first stage of the client)."""
