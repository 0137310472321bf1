"""Input: validation of count matrices, token corpora, row blocks, host layouts."""
