"""The durable log: messages appended as received, their hash-chain identity, and the
question vectors kept until the turn they were asked in is logged."""
