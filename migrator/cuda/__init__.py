"""The CUDA side: source reading and preprocessing, parsing, kernel IR, and analysis."""
