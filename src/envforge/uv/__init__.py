"""The only code that starts uv: its environment, its settings as data, and finding the recipe's Python."""
