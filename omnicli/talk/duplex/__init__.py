"""`omni talk --duplex`: the client side of the duplex contract (the link, the session shapes of known models, the probe)."""
