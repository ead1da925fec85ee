"""Bulk odds: vectorised hand evaluation (numpy) and the Cover All Bonus par sheet.

``rules/`` settles real rounds and stays standard library only; this package evaluates
millions of hands at once for the odds, and proves on every hand that it agrees with
``rules.poker``. Dependencies point one way: ``bulk`` imports ``rules``, never the reverse.

Modules: ``evaluator`` (batch hand values, equal to ``rules.poker``'s), ``combos`` (every
k-card hand as an array, suit-symmetry classes), ``cover_all_odds`` (the par sheet:
exact columns and the seeded simulation), ``chart`` (the PNG chart).
"""
