"""The live loop: `gangplan serve`."""
