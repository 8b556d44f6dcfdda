"""The load engine of one process: open and closed loops with their schedules and books
(``engine``), one request sent and recorded (``send_one``) and the samples a workload plans
(``sample_count``).

May import the client's earlier stages (``transport`` to ``prepare``) and ``core``."""
