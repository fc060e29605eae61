"""spinlib: models, optimal controllers and simulators for multi-access speculative inference."""
from .acceptance import expected_tokens, tokens_table
from .presets import PRESETS, random_scenario
from .emulator.montecarlo import simulate_rounds
from .rounds import Allocation, evaluate
from .scenario import Payload, Radio, Scenario, Server, User
from .validation import ValidationError

__version__ = "0.1.0"
__all__ = ["Allocation", "Payload", "PRESETS", "Radio", "Scenario", "Server", "User", "ValidationError",
           "evaluate", "expected_tokens", "random_scenario", "simulate_rounds", "tokens_table"]
