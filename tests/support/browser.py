"""Debian's headless Chromium (``make chromium``: chromium and chromium-driver), driven by
selenium, as the console's and the analytics report's tests use it; its console log kept."""

from __future__ import annotations

from typing import Any

from selenium import webdriver
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.support.wait import WebDriverWait

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


def chromium(width: int = 1280, height: int = 1400) -> webdriver.Chrome:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", f"--window-size={width},{height}"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=CHROMEDRIVER))
    driver.set_page_load_timeout(120)
    return driver


def wait_drawn(browser: webdriver.Chrome, expected: set[str], seconds: float = 60) -> None:
    """Wait until the page has drawn exactly the charts ``expected`` (their ``data-chart`` ids,
    marked ``data-drawn`` by the renderer); if it never does, fail saying what the browser shows
    (its URL, title, text and console log), not only an empty set."""

    def drawn(_: Any) -> set[str]:
        return {str(c.get_attribute("data-chart")) for c in browser.find_elements("css selector", "canvas[data-drawn]")}

    try:
        WebDriverWait(browser, seconds).until(lambda b: drawn(b) == expected)
    except TimeoutException:
        shown = str(browser.execute_script("return document.body ? document.body.innerText : ''"))[:400]
        logs = [entry["message"] for entry in browser.get_log("browser")]  # type: ignore[no-untyped-call]
        raise AssertionError(
            f"drawn {sorted(drawn(browser))}, expected {sorted(expected)} at {browser.current_url}: "
            f"{browser.title!r} {shown!r} {logs}"
        ) from None
