"""Credit strategies in torch: one file each and one entry in catalog.py, as on the TypeScript side (src/engine/credit)."""

from credit_lens.strategies.catalog import STRATEGIES, UnsupportedStrategy, effective_advantages, strategy_weights

__all__ = ["STRATEGIES", "UnsupportedStrategy", "effective_advantages", "strategy_weights"]
