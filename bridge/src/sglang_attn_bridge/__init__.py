"""sglang attention bridge for HF transformers."""
