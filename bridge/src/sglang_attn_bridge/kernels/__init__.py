"""Triton kernels: the forward (with log-sum-exp) and the FA2-form backward."""
