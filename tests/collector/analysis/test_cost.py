"""Price book: NVML names to models, prices per plan and node, break-even, strict loading."""

from __future__ import annotations

from pathlib import Path

import pytest

from collector.analysis.cost import PriceBook, canonical_model
from gpufleet.settings import ConfigError


@pytest.mark.parametrize(
    ("name", "model"),
    [
        ("NVIDIA H100 80GB HBM3", "H100"),
        ("NVIDIA H100 NVL", "H100"),
        ("NVIDIA A100-SXM4-80GB", "A100"),
        ("NVIDIA A100 80GB PCIe", "A100"),
        ("NVIDIA A100-PCIE-40GB", "A100-40GB"),
        ("Tesla T4", "T4"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA H200", "H200"),
        ("NVIDIA B200", "B200"),
        ("H100", "H100"),
        ("A100-40GB", "A100-40GB"),
        ("NVIDIA GeForce RTX 4090", "NVIDIA GeForce RTX 4090"),
    ],
)
def test_canonical_model(name: str, model: str) -> None:
    assert canonical_model(name) == model


def test_example_book_has_every_advertised_model_with_sources() -> None:
    book = PriceBook.example()
    assert book.currency == "USD"
    source_ids = {s["id"] for s in book.sources}
    for model in ("H100", "H200", "A100", "L40S", "L4", "T4", "B200"):
        price = book.model_price(model)
        assert price is not None and price.source in source_ids, model
        assert 0 < price.reserved_per_gpu_hour < price.on_demand_per_gpu_hour, model


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "book.yaml"
    path.write_text(text, encoding="utf-8")
    return path


BOOK = """
currency: EUR
models:
  H100: {on_demand_per_gpu_hour: 4.0, reserved_per_gpu_hour: 2.5}
  NVIDIA L4: {on_demand_per_gpu_hour: 0.8, reserved_per_gpu_hour: 0.6}
node_overrides:
  onprem-1:
    H100: {reserved_per_gpu_hour: 1.0, current_plan: reserved}
"""


def test_prices_by_plan_node_and_nvml_name(tmp_path: Path) -> None:
    book = PriceBook.load(write(tmp_path, BOOK))
    assert book.currency == "EUR"
    assert book.price_per_gpu_hour("NVIDIA H100 80GB HBM3") == 4.0
    assert book.price_per_gpu_hour("H100", plan="reserved") == 2.5
    assert book.price_per_gpu_hour("L4") == 0.8  # key given as an NVML name
    # the override changes only what it names
    assert book.price_per_gpu_hour("H100", node="onprem-1", plan="reserved") == 1.0
    assert book.price_per_gpu_hour("H100", node="onprem-1") == 4.0
    assert book.price_per_gpu_hour("H100", node="other") == 4.0
    assert book.break_even_utilisation("H100") == pytest.approx(0.625)
    assert book.break_even_utilisation("H100", node="onprem-1") == pytest.approx(0.25)


def test_unknown_model_costs_nothing_and_says_so(tmp_path: Path) -> None:
    book = PriceBook.load(write(tmp_path, BOOK))
    assert book.price_per_gpu_hour("NVIDIA GeForce RTX 4090") == 0.0
    assert not book.has_price("NVIDIA GeForce RTX 4090")
    assert book.has_price("NVIDIA H100 80GB HBM3")
    assert book.break_even_utilisation("T4") == 1.0
    with pytest.raises(ValueError, match="spot"):
        book.price_per_gpu_hour("H100", plan="spot")


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("models: {}", "currency"),
        ("currency: USD\nmodels: {H100: {on_demand_per_gpu_hour: -1, reserved_per_gpu_hour: 1}}",
         "models.H100.on_demand_per_gpu_hour"),
        ("currency: USD\nmodels: {H100: {on_demand_per_gpu_hour: 1}}",
         "models.H100.reserved_per_gpu_hour"),
        ("currency: USD\nmodels: {H100: {on_demand_per_gpu_hour: 1, reserved_per_gpu_hour: 1,"
         " current_plan: spot}}", "current_plan"),
        ("currency: USD\nprices: {}", "prices"),
        ("currency: USD\nmodels: {H100: {on_demand_per_gpu_hour: 1, reserved_per_gpu_hour: 1,"
         " ondemand: 2}}", "ondemand"),
        ("- a list", "mapping"),
    ],
)  # fmt: skip
def test_bad_books_name_the_key(tmp_path: Path, text: str, names: str) -> None:
    with pytest.raises(ConfigError, match=names):
        PriceBook.load(write(tmp_path, text))


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope\.yaml"):
        PriceBook.load(tmp_path / "nope.yaml")
