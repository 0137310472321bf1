"""The mini-batched CUDA engine (segmented CSR, ``algorithm='minibatch'``)."""
