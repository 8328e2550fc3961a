"""The template agent: generated Triton kernels for pointwise chains and row reductions."""
