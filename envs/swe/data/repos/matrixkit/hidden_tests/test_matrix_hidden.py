import pytest

from matrixkit import Matrix, MatrixError, identity, solve


def test_subtract():
    """Subtraction is element-wise."""
    assert Matrix([[5, 5]]) - Matrix([[1, 2]]) == Matrix([[4, 3]])


def test_shape_mismatch_add():
    """Adding matrices of different shapes is an error."""
    with pytest.raises(MatrixError):
        Matrix([[1, 2]]) + Matrix([[1], [2]])


def test_matmul():
    """Matrix product of a 2x3 and a 3x2 matrix."""
    a = Matrix([[1, 2, 3], [4, 5, 6]])
    b = Matrix([[7, 8], [9, 10], [11, 12]])
    assert a @ b == Matrix([[58, 64], [139, 154]])


def test_matmul_shape_error():
    """Multiplying incompatible shapes is an error."""
    with pytest.raises(MatrixError):
        Matrix([[1, 2]]) @ Matrix([[1, 2]])


def test_transpose():
    """transpose swaps rows and columns."""
    assert Matrix([[1, 2, 3], [4, 5, 6]]).transpose() == Matrix([[1, 4], [2, 5], [3, 6]])


def test_trace_and_scale():
    """trace sums the diagonal; scale multiplies every entry."""
    m = Matrix([[1, 2], [3, 4]])
    assert m.trace() == 5
    assert m.scale(2) == Matrix([[2, 4], [6, 8]])


def test_determinant_2x2_and_3x3():
    """Determinants of small matrices, including one that needs a row swap."""
    assert Matrix([[1, 2], [3, 4]]).determinant() == pytest.approx(-2)
    assert Matrix([[0, 1], [1, 0]]).determinant() == pytest.approx(-1)
    assert Matrix([[2, 0, 1], [1, 3, 2], [1, 1, 2]]).determinant() == pytest.approx(6)


def test_singular_determinant_is_zero():
    """A matrix with dependent rows has determinant 0."""
    assert Matrix([[1, 2], [2, 4]]).determinant() == 0


def test_inverse():
    """A matrix times its inverse is the identity."""
    m = Matrix([[4, 7], [2, 6]])
    assert m @ m.inverse() == identity(2)
    assert m.inverse() == Matrix([[0.6, -0.7], [-0.2, 0.4]])


def test_solve_system():
    """solve finds x with a @ x = b."""
    a = Matrix([[2, 1, -1], [-3, -1, 2], [-2, 1, 2]])
    b = Matrix([[8], [-11], [-3]])
    assert solve(a, b) == Matrix([[2], [3], [-1]])


def test_solve_singular():
    """Solving with a singular matrix is an error."""
    with pytest.raises(MatrixError):
        solve(Matrix([[1, 2], [2, 4]]), Matrix([[1], [2]]))


def test_power():
    """power uses repeated squaring: Fibonacci matrix to the 10th power."""
    fib = Matrix([[1, 1], [1, 0]])
    assert fib.power(10) == Matrix([[89, 55], [55, 34]])
    assert fib.power(0) == identity(2)
    assert fib.power(1) == fib


def test_non_square_trace():
    """trace of a non-square matrix is an error."""
    with pytest.raises(MatrixError):
        Matrix([[1, 2, 3]]).trace()


def test_indexing():
    """m[i, j] reads row i, column j."""
    assert Matrix([[1, 2], [3, 4]])[1, 0] == 3
