"""rdss console in a real headless Chromium."""
