"""Worker processes of this host: the placement (``placement``), one shard per process and its
worker-side runner (``shard``), the spawned workers and their merge (``workers``), a closed
loop's books in shared memory (``closed``) and the persistent pool of rounds (``pool``).

May import the rest of ``client/placement`` and the client's earlier stages; never a driver."""
