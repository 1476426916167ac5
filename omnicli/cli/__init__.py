"""The `omni` command line: one module per sub-command and the helpers they share."""
