"""omni's tests: `fast/` (a scripted engine, in-memory transports) and `acceptance/` (real models, servers and devices)."""
