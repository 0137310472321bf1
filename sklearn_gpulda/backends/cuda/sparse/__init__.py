"""The sparse CUDA engine (ESCA over PDOW): its sampler, layout, streaming,
hybrid word-topic storage and memory plan, with the launchers of its kernels."""
