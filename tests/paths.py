"""Where the repository and the test fixtures are, for tests at any depth."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
