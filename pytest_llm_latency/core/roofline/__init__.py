"""The hardware's ceilings: bytes a decode step reads per model architecture (``archs``,
``modelbytes``, ``kv_layout``, ``checkpoint_tensors``), the hardware figures (``hardware``), the
decode ceiling and a run's efficiency against it (``ceiling``, ``roofline_requests``,
``roofline_spec``, ``roofline_text``, ``decode_diagnosis``) and the prefill fit (``prefill``,
``prefill_fit``).  Reading files (GGUF, safetensors, the catalog) is the ``roofline`` layer's.

May import ``core.measure``, ``core.prompts``, ``core.spec``, ``core.result`` (the part it fills)
and the base modules of ``core``."""
