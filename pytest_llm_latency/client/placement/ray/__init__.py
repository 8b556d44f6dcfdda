"""The nodes of a Ray cluster: the placement (``placement``), the cluster and its check that
``ray`` is the package (``cluster``), one shard per node (``shards``), a closed loop's books as an
actor (``loop``) and the pool of rounds (``pool``).  Ray is imported only when a workload names a
cluster.

May import the rest of ``client/placement`` (``processes`` included: a node runs the same shard
runner) and the client's earlier stages; never a driver."""
