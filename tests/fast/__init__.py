"""The fast layer: exact tests on a scripted engine and in-memory transports."""
