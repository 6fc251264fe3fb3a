import pytest

from matrixkit import Matrix, MatrixError, identity


def test_shape():
    """shape is (rows, columns)."""
    assert Matrix([[1, 2, 3], [4, 5, 6]]).shape == (2, 3)


def test_add():
    """Addition is element-wise."""
    assert Matrix([[1, 2]]) + Matrix([[3, 4]]) == Matrix([[4, 6]])


def test_ragged_rows_rejected():
    """Rows of different lengths are an error."""
    with pytest.raises(MatrixError):
        Matrix([[1, 2], [3]])


def test_identity():
    """identity(n) has ones on the diagonal."""
    assert identity(2) == Matrix([[1, 0], [0, 1]])
