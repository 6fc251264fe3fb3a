"""matrixkit: small dense matrices in pure Python."""

from matrixkit.matrix import Matrix, MatrixError, identity, solve

__all__ = ["Matrix", "MatrixError", "identity", "solve"]
