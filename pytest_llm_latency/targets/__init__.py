"""Servers the plugin starts: one process manager (``process``) used by managed
targets and by the reference launcher, and the embedded reference server."""
