"""What the server says about itself: ``/metrics`` scraped and parsed (``prometheus``,
``server_view``) and the dtype it serves (``served_dtype``).

May import ``client.transport``, ``client.apis`` and ``core``."""
