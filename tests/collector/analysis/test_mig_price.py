"""A MIG slice's share of its parent's price: compute slices by default, memory where the
price book says so; the parent carries only what no slice covers."""

from __future__ import annotations

import pytest

from collector.analysis.cost import PriceBook
from collector.analysis.gpu_models import GpuCatalogue
from collector.analysis.mig_price import slice_fraction, unpartitioned_fraction
from gpufleet.settings import ConfigError

H100 = GpuCatalogue.default().get("H100")


@pytest.mark.parametrize(
    ("profile", "compute", "memory"),
    [("1g.10gb", 1 / 7, 10 / 80), ("3g.40gb", 3 / 7, 40 / 80), ("7g.80gb", 1.0, 1.0)],
)
def test_a_slice_costs_its_compute_share_or_its_memory_share(
    profile: str, compute: float, memory: float
) -> None:
    assert slice_fraction(H100, profile) == pytest.approx(compute, rel=1e-12)
    assert slice_fraction(H100, profile, basis="memory") == pytest.approx(memory, rel=1e-12)


def test_a_profile_the_catalogue_lacks_is_read_from_its_name() -> None:
    assert slice_fraction(H100, "2g.24gb") == pytest.approx(2 / 7)
    assert slice_fraction(H100, "2g.24gb", basis="memory") == pytest.approx(24 / 80)
    assert slice_fraction(None, "odd") == 1.0  # nothing says: priced whole, never free


def test_the_parent_carries_only_what_no_slice_covers() -> None:
    assert unpartitioned_fraction([3 / 7, 2 / 7, 2 / 7]) == 0.0
    assert unpartitioned_fraction([3 / 7, 2 / 7]) == pytest.approx(2 / 7)
    assert unpartitioned_fraction([]) == 1.0
    assert unpartitioned_fraction([0.6, 0.6]) == 0.0  # never negative


def test_the_price_book_names_the_basis_and_refuses_an_unknown_one() -> None:
    raw = {"currency": "USD", "models": {}}
    assert PriceBook.from_mapping(raw).mig_price_basis == "compute"
    assert PriceBook.from_mapping({**raw, "mig_price_basis": "memory"}).mig_price_basis == "memory"
    with pytest.raises(ConfigError, match="mig_price_basis"):
        PriceBook.from_mapping({**raw, "mig_price_basis": "sms"})
