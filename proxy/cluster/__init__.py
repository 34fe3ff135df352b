"""More than one node: which tenants a node may write (placement, leases), continuous
replication with Litestream, and the spool of exchanges answered during a claim."""
