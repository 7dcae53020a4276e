"""Render a Snakemake HTML report in headless Chromium (Debian's chromium + chromium-driver, via selenium)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

CHROMIUM, DRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


def ensure_chromium() -> None:
    """Install Debian's chromium and chromium-driver if missing (root only); skip the test otherwise."""
    if Path(CHROMIUM).exists() and Path(DRIVER).exists():
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        pytest.skip("rendering the report needs Debian's chromium and chromium-driver (root installs them)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update", "-qq"],
                ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "chromium", "chromium-driver"]):
        subprocess.run(cmd, check=True, capture_output=True, env=env, timeout=600)


def rendered_figures(report: Path, screenshot: Path) -> dict[str, tuple[int, int]]:
    """Open ``report``, show every registered image result in the report's own viewer (its ``app.setView``,
    what clicking the result does) and return each one's rendered (naturalWidth, naturalHeight);
    the screenshot shows the first figure."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    try:
        driver.get(report.resolve().as_uri())
        deadline = time.time() + 60
        while not driver.execute_script("return typeof app !== 'undefined' && typeof results !== 'undefined'"):
            assert time.time() < deadline, "the report's app never started"
            time.sleep(0.2)
        paths = driver.execute_script(
            "return Object.keys(results).filter(p => results[p].mime_type.startsWith('image/'))")
        sizes = {}
        for i, path in enumerate(paths):
            driver.execute_script("app.setView({content: 'img', contentPath: results[arguments[0]].data_uri, "
                                  "resultPath: arguments[0]})", path)
            size = None
            while time.time() < deadline + 60:
                size = driver.execute_script(
                    "const img = [...document.querySelectorAll('#app img')]"
                    ".find(i => i.src === results[arguments[0]].data_uri);"
                    "return img && img.complete ? [img.naturalWidth, img.naturalHeight] : null;", path)
                if size:
                    break
                time.sleep(0.1)
            sizes[path] = tuple(size) if size else (0, 0)
            if i == 0:
                driver.save_screenshot(str(screenshot))
        return sizes
    finally:
        driver.quit()
