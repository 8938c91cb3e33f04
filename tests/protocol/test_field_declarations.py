"""`protocol.schema.f`, the one way a field is declared: what it infers and what it refuses."""
from __future__ import annotations

import pytest

from protocol.schema import Versions, f


def test_a_tag_number_makes_the_field_tagged_in_its_versions() -> None:
    field = f("epoch", "int64", "3+", tag=1, default=-1)
    assert field.tag == 1
    assert field.tagged == Versions.parse("3+")


def test_a_tagged_field_without_a_tag_number_is_refused() -> None:
    """It could not be written (a tag is its number on the wire), and sorting the tagged
    fields of a version by tag would fail on None, far from the declaration."""
    with pytest.raises(ValueError, match="epoch is tagged in 3\\+ but has no tag number"):
        f("epoch", "int64", "3+", tagged="3+")
