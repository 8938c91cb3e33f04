"""Running real brokers for integration tests: `pybroker.testing`'s, re-exported, and the
repository's root."""
from __future__ import annotations

from pathlib import Path

from pybroker.testing import BrokerProcess, broker_config, broker_in_thread

__all__ = ["ROOT", "BrokerProcess", "broker_config", "broker_in_thread"]

ROOT = Path(__file__).resolve().parents[1]
