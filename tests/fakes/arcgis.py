"""The `arcgis` pytest fixture: the fake ArcGIS REST server of feedledger.demo.featureserver
(the one the demo serves its zoning layer with), serving on 127.0.0.1 for the test, in the
flavour an indirect parameter names ("11.1" when unset)::

    @pytest.mark.parametrize("arcgis", FLAVOURS, indirect=True)
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from feedledger.demo.featureserver import FakeArcGIS, running


@pytest.fixture(name="arcgis")
def arcgis_fixture(request: pytest.FixtureRequest) -> Iterator[FakeArcGIS]:
    with running(getattr(request, "param", "11.1")) as fake:
        yield fake
