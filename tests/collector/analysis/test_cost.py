"""Price book: NVML names to models, prices per plan and node, break-even, strict loading."""

from __future__ import annotations

from pathlib import Path

import pytest

from collector.analysis import cost
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


SHIPPED = sorted((Path(cost.__file__).parents[1] / "data").glob("**/pricebook*.yaml")) + sorted(
    (Path(cost.__file__).parents[1] / "data" / "pricebooks").glob("*.yaml")
)


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_every_shipped_book_loads_with_each_price_cited(path: Path) -> None:
    book = PriceBook.load(path)
    urls = {s["id"]: s.get("url", "") for s in book.sources}
    assert book.models
    for model, price in book.models.items():
        assert urls.get(price.source, "").startswith("https://"), (path.name, model)
        for plan in price.options()[1:]:
            assert 0 < plan.per_gpu_hour < price.on_demand_per_gpu_hour, (model, plan)


def test_the_shipped_books_include_a_cny_one_and_another_cloud() -> None:
    currencies = {PriceBook.load(p).currency for p in SHIPPED}
    assert currencies == {"USD", "CNY"} and len(SHIPPED) == 3


def test_plans_keep_todays_format_and_add_terms(tmp_path: Path) -> None:
    """A book in today's two-price format gets a 1y plan at reserved_per_gpu_hour; plans:
    adds 3y and spot, a 1y entry there sets the reserved price, current: counts GPUs."""
    legacy = PriceBook.load(write(tmp_path, BOOK)).model_price("H100")
    assert legacy is not None
    assert [(p.name, p.per_gpu_hour, p.term_months) for p in legacy.options()] == [
        ("on_demand", 4.0, 0), ("1y", 2.5, 12)]  # fmt: skip
    text = """
currency: CNY
models:
  A10:
    on_demand_per_gpu_hour: 10
    plans: {monthly: 7, 1y: {per_gpu_hour: 5, upfront_share: 1}, spot: 3}
    current: {plan: monthly, gpus: 4}
"""
    price = PriceBook.load(write(tmp_path, text)).model_price("NVIDIA A10")
    assert price is not None
    assert price.reserved_per_gpu_hour == 5 and price.per_gpu_hour("reserved") == 5
    assert (price.current_plan, price.current_gpus) == ("monthly", 4)
    assert [(p.name, p.per_gpu_hour) for p in price.options()] == [
        ("on_demand", 10), ("monthly", 7), ("1y", 5), ("spot", 3)]  # fmt: skip
    assert price.plan("1y") is not None and price.plan("1y").upfront_share == 1  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("plans", "names"),
    [
        ("plans: {2y: 3}", r"plans\.2y"),
        ("plans: {3y: -1}", r"plans\.3y\.per_gpu_hour.*-1"),
        ("plans: {3y: {per_gpu_hour: 1, upfront_share: 2}}", r"upfront_share.*2"),
        ("plans: {spot: {per_gpu_hour: 1, term_months: 3}}", r"spot\.term_months"),
        ("plans: {1y: 2}", r"plans\.1y\.per_gpu_hour.*differs"),
        ("current: {plan: 3y}", r"current_plan.*3y"),
        ("current: {plan: 1y, gpus: -2}", r"current\.gpus.*-2"),
        ("current: {plan: spot}", r"current\.plan.*spot"),
    ],
)  # fmt: skip
def test_bad_plans_name_the_key_and_value(tmp_path: Path, plans: str, names: str) -> None:
    prices = "on_demand_per_gpu_hour: 4, reserved_per_gpu_hour: 3"
    text = f"currency: USD\nmodels:\n  H100: {{{prices}, {plans}}}\n"
    with pytest.raises(ConfigError, match=names):
        PriceBook.load(write(tmp_path, text))
