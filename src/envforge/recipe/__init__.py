"""The inputs: recipes and what their keys mean (profile variables, platforms, CUDA), the project layout, the embedded quickstart."""
