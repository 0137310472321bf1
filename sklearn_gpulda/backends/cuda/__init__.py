"""The CUDA backends: the sparse (PDOW) and dense samplers, one launcher module per ``.cu`` file,
and the fold-in. Importing this package does not import CuPy; its modules do, when used."""
