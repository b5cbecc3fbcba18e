"""The tests run the code of this checkout, as the workflow does, not another installed copy."""

from pathlib import Path

import hetfl
from tests.conftest import SRC


def test_the_tests_import_this_checkouts_hetfl():
    assert Path(hetfl.__file__).resolve().is_relative_to(SRC.resolve())
