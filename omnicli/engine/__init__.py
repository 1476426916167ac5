"""The engines behind every command: what hears, thinks and speaks, in this process or on vLLM."""
