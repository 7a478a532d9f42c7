// Opens a trace in Arize Phoenix in headless Chromium, as a person would, and prints what the
// page shows as JSON on stdout: {url, tree: [{level, name}], detail, html}.
//
//   node trace_view.cjs '{"url": ..., "trace": "invoke_agent demo-blocked",
//                         "span": "execute_tool environment", "tab": "Attributes",
//                         "screenshot": "/path/shot.png"}'
//
// `url` is a project's page; `trace` the text of the root span to click in its list; `span`
// (optional) a span to select in the trace's tree; `tab` (optional) a tab of the span's details;
// `wait_for` (optional) text to wait for in the details (up to 30 s) before reading the page.
// Needs OTELHOOKS_CHROMIUM (the browser) and OTELHOOKS_BROWSER_NODE_PATH (playwright-core's
// node_modules), as scripts/install-browser.sh prints them.
const path = require("node:path");
const { chromium } = require(path.join(process.env.OTELHOOKS_BROWSER_NODE_PATH, "playwright-core"));

// Click until the tree shows `name` selected (the page may still be settling its first
// selection, the root span, when the first click lands).
async function select(page, tree, name) {
  const deadline = Date.now() + 120000;
  while (Date.now() < deadline) {
    await tree.getByText(name, { exact: true }).first().click();
    await page.waitForTimeout(250);
    const selected = tree.locator(".span-node-wrap.is-selected").first();
    const text = (await selected.count()) ? await selected.innerText() : "";
    if (text.split("\n")[0].trim() === name) return;
  }
  throw new Error(`could not select ${name} in the trace tree`);
}

async function main() {
  const ask = JSON.parse(process.argv[2]);
  const browser = await chromium.launch({
    executablePath: process.env.OTELHOOKS_CHROMIUM,
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"],
  });
  try {
    const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    page.setDefaultTimeout(120000);  // waits for an event; generous for a loaded machine
    await page.goto(ask.url, { waitUntil: "networkidle" });
    await page.getByText(ask.trace, { exact: true }).first().click();
    const tree = page.locator('ul[data-testid="trace-tree"]');
    await tree.waitFor();
    if (ask.span) {
      await select(page, tree, ask.span);
    }
    const dialog = page.getByRole("dialog").first();
    if (ask.tab) {
      const tab = dialog.getByRole("tab", { name: ask.tab }).first();
      await tab.click();
      await dialog.locator('[role="tab"][aria-selected="true"]', { hasText: ask.tab }).first().waitFor();
    }
    await page.waitForLoadState("networkidle");
    if (ask.wait_for) {
      await dialog.getByText(ask.wait_for).first().waitFor().catch(() => {});
    }
    const nodes = await tree.locator(".span-node-wrap").evaluateAll((wraps) =>
      wraps.map((wrap) => ({
        level: Number(wrap.style.getPropertyValue("--trace-tree-nesting-level")),
        name: wrap.innerText.split("\n")[0].trim(),
      })),
    );
    if (ask.screenshot) {
      await page.screenshot({ path: ask.screenshot });
    }
    process.stdout.write(
      JSON.stringify({
        url: page.url(),
        tree: nodes,
        detail: await dialog.innerText(),
        html: await page.content(),
      }),
    );
  } finally {
    await browser.close();
  }
}

main().catch((error) => {
  process.stderr.write(String(error && error.stack ? error.stack : error) + "\n");
  process.exit(1);
});
