"""The dense CUDA engine: a thread per document over all K topics."""
