"""A folder put first on the PYTHONPATH of the processes vLLM starts for omni (engine/torch_extras.py)."""
