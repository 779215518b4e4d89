"""The HTML report in a real browser (headless Chromium): every figure decodes and is drawn at a
non-zero size, the page asks the network for nothing, and a screenshot is saved to look at.
Skipped, with the reason, where no Chromium is installed (`.ci/run` installs Debian's
`chromium-headless-shell`)."""

import json
import re
import shutil
import subprocess
from pathlib import Path

import matplotlib.image
import pytest
from test_plots_report import build_report, make_tables

BROWSERS = ("chromium-headless-shell", "chromium", "google-chrome", "chrome")
BROWSER = next((path for name in BROWSERS if (path := shutil.which(name))), None)

pytestmark = pytest.mark.skipif(BROWSER is None, reason="no Chromium on this machine (Debian: "
                                "apt-get install chromium-headless-shell)")

# A page that loads the report in a frame and writes what it finds into its own DOM, which
# Chromium's --dump-dom then prints.
PROBE = """<!doctype html><html><body><pre id="result">pending</pre>
<iframe id="report" src="REPORT" style="width:1200px;height:3000px"></iframe>
<script>
document.getElementById("report").onload = () => {
  const doc = document.getElementById("report").contentDocument;
  const images = [...doc.images].map(img => ({
    src: img.src.slice(0, 30), complete: img.complete, natural: img.naturalWidth,
    shown: img.getBoundingClientRect().width, height: img.getBoundingClientRect().height}));
  const requests = doc.defaultView.performance.getEntriesByType("resource").map(e => e.name);
  document.getElementById("result").textContent = JSON.stringify({images, requests});
};
</script></body></html>"""


def chromium(*args, timeout=120) -> str:
    command = [BROWSER, "--headless", "--no-sandbox", "--disable-gpu",
               "--host-resolver-rules=MAP * ~NOTFOUND", *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    _, page = build_report(tmp_path_factory.mktemp("browser"), make_tables())
    return page


def test_every_figure_decodes_and_is_drawn_and_nothing_is_fetched(report):
    probe = report.parent / "probe.html"
    probe.write_text(PROBE.replace("REPORT", report.as_uri()))
    dom = chromium("--allow-file-access-from-files", "--virtual-time-budget=10000",
                   "--dump-dom", probe.as_uri())
    found = json.loads(re.search(r'<pre id="result">(.*?)</pre>', dom, re.S).group(1)
                       .replace("&quot;", '"').replace("&amp;", "&"))
    figures = sorted(Path(report.parent.parent / "figures" / "regression").glob("*.png"))
    assert len(found["images"]) == len(figures) > 0
    for image in found["images"]:
        assert image["complete"] and image["natural"] > 0, image  # decoded
        assert image["shown"] > 0 and image["height"] > 0, image  # laid out at a real size
        assert image["src"].startswith("data:image/png"), image
    assert not [r for r in found["requests"] if not r.startswith("data:")], found["requests"]


def test_a_screenshot_of_the_report(report):
    shot = report.parent / "report-screenshot.png"
    chromium("--window-size=1200,2400", f"--screenshot={shot}", report.as_uri())
    pixels = matplotlib.image.imread(shot)
    assert pixels.shape[0] == 2400 and pixels.shape[1] == 1200
    assert pixels.std() > 0.05  # not a blank page
