"""The pattern catalogue: one folder per failure class (see repairbot/pattern.py)."""
