"""AWS clients configured as every part wants them, and what their failures mean."""
