"""Credit Lens for PyTorch trainers: credit strategies as per-token advantages, and run directories the views read."""

from credit_lens.batch import SECTION_CODES, TokenBatch
from credit_lens.strategies import STRATEGIES, UnsupportedStrategy, effective_advantages, strategy_weights

__all__ = [
    "SECTION_CODES",
    "STRATEGIES",
    "TokenBatch",
    "UnsupportedStrategy",
    "effective_advantages",
    "strategy_weights",
]
