"""The wire: request bodies and event names that omni's client and server share, spelt once."""
