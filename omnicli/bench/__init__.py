"""`omni bench-wer`: synthesize a dataset, transcribe it back and score word error rate and latency."""
