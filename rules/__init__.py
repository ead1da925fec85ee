"""lammer's pure rules core.

Cards, hand evaluators, pay tables and bet state machines for the Cover All Bonus,
Bonus Craps (with proper and invalid rolls) and Bust Bonus. Standard library only:
no I/O, no asyncio, no clocks, no randomness, no logging (enforced by ``rules/ruff.toml``),
so every function here is exact, replayable and testable exhaustively.
"""
