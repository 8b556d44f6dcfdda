"""File I/O shared by every layer above ``core``: atomic, crash-safe writes."""
