"""The decode roofline's inputs: the hardware catalog and its data, hardware detection
(``nvidia-smi``, the local-CPU bandwidth probe), the GGUF reader, and the one
model-bytes resolver shared by the pytest gate and the ``ceiling`` CLI.  The
arithmetic itself is pure and lives in ``core.roofline.ceiling``."""
