"""The sparse engine's chain spread over several GPUs of one host."""
