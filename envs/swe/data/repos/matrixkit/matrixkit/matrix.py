"""Dense matrices stored as lists of rows of floats."""

EPSILON = 1e-12


class MatrixError(ValueError):
    pass


class Matrix:
    def __init__(self, rows):
        rows = [list(map(float, r)) for r in rows]
        if not rows or not rows[0]:
            raise MatrixError("a matrix needs at least one row and one column")
        width = len(rows[0])
        if any(len(r) != width for r in rows):
            raise MatrixError("all rows must have the same length")
        self.rows = rows

    @property
    def shape(self):
        return len(self.rows), len(self.rows[0])

    def __getitem__(self, index):
        i, j = index
        return self.rows[i][j]

    def __eq__(self, other):
        if not isinstance(other, Matrix) or other.shape != self.shape:
            return False
        return all(
            abs(a - b) <= 1e-9 for ra, rb in zip(self.rows, other.rows) for a, b in zip(ra, rb)
        )

    def __repr__(self):
        return f"Matrix({self.rows!r})"

    def _check_same_shape(self, other):
        if self.shape != other.shape:
            raise MatrixError(f"shape mismatch: {self.shape} vs {other.shape}")

    def __add__(self, other):
        self._check_same_shape(other)
        return Matrix([[a + b for a, b in zip(ra, rb)] for ra, rb in zip(self.rows, other.rows)])

    def __sub__(self, other):
        self._check_same_shape(other)
        return Matrix([[a - b for a, b in zip(ra, rb)] for ra, rb in zip(self.rows, other.rows)])

    def scale(self, k):
        return Matrix([[k * a for a in r] for r in self.rows])

    def __matmul__(self, other):
        n, m = self.shape
        m2, p = other.shape
        if m != m2:
            raise MatrixError(f"cannot multiply {self.shape} by {other.shape}")
        out = [[0.0] * p for _ in range(n)]
        for i in range(n):
            for j in range(p):
                total = 0.0
                for k in range(m):
                    total += self.rows[i][k] * other.rows[k][j]
                out[i][j] = total
        return Matrix(out)

    def transpose(self):
        n, m = self.shape
        return Matrix([[self.rows[i][j] for i in range(n)] for j in range(m)])

    def trace(self):
        self._require_square()
        return sum(self.rows[i][i] for i in range(self.shape[0]))

    def _require_square(self):
        if self.shape[0] != self.shape[1]:
            raise MatrixError(f"matrix is not square: {self.shape}")

    def determinant(self):
        """Determinant by elimination; each row swap flips the sign."""
        self._require_square()
        a = [r[:] for r in self.rows]
        n = len(a)
        det = 1.0
        for col in range(n):
            pivot = max(range(col, n), key=lambda r: abs(a[r][col]))
            if abs(a[pivot][col]) < EPSILON:
                return 0.0
            if pivot != col:
                a[col], a[pivot] = a[pivot], a[col]
                det = -det
            det *= a[col][col]
            for r in range(col + 1, n):
                factor = a[r][col] / a[col][col]
                for c in range(col, n):
                    a[r][c] -= factor * a[col][c]
        return det

    def inverse(self):
        self._require_square()
        n = self.shape[0]
        return solve(self, identity(n))

    def power(self, k):
        """Matrix power for k >= 0 by repeated squaring."""
        self._require_square()
        if k < 0:
            raise MatrixError("negative powers are not supported")
        result = identity(self.shape[0])
        base = self
        while k > 0:
            if k % 2 == 1:
                result = result @ base
            base = base @ base
            k //= 2
        return result


def identity(n):
    return Matrix([[1.0 if i == j else 0.0 for j in range(n)] for i in range(n)])


def solve(a, b):
    """Solve a @ x = b for x (b may have several columns), Gauss-Jordan with pivoting."""
    a._require_square()
    n = a.shape[0]
    if b.shape[0] != n:
        raise MatrixError(f"right-hand side has {b.shape[0]} rows, expected {n}")
    width = b.shape[1]
    aug = [a.rows[i][:] + b.rows[i][:] for i in range(n)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(aug[r][col]))
        if abs(aug[pivot][col]) < EPSILON:
            raise MatrixError("matrix is singular")
        aug[col], aug[pivot] = aug[pivot], aug[col]
        p = aug[col][col]
        aug[col] = [v / p for v in aug[col]]
        for r in range(n):
            if r != col:
                factor = aug[r][col]
                aug[r] = [rv - factor * cv for rv, cv in zip(aug[r], aug[col])]
    return Matrix([row[n:n + width] for row in aug])
