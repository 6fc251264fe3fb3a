import pytest

from unitkit import UnitError, convert


def test_km_to_m():
    """Kilometres to metres."""
    assert convert(2, "km", "m") == 2000


def test_incompatible():
    """Length cannot become mass."""
    with pytest.raises(UnitError):
        convert(1, "m", "kg")
