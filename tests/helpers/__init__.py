"""What tests share: fixtures, data and checks that more than one test module uses.

A test module imports from here, never from another ``test_*.py`` (a test module is
collected for its tests; importing one runs its module code again under another name).
"""
