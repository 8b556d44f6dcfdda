"""Synthetic prompts to an exact token count: the salted prompts of every workload
(``synthesis``) and the block texts of a trace replay whose token counts add up (``block_text``).

May import ``core.measure`` and the base modules of ``core``."""
