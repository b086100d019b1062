// Drives the task page in Debian's headless Chromium (puppeteer-core over the DevTools
// protocol), for tests/task_page_browser.rs:
//   node page_test.mjs --url http://127.0.0.1:PORT/tasks [--token T] [--screenshot PATH]
// It starts the browser, prints "ready", and reads the task's id from its standard input
// (so that the task starts once the browser is up, however long that took). Then it opens the page, enters the token when asked, waits for the task's row, reads its
// progress bar twice (the second read must be higher), saves a screenshot while the task
// runs, presses Cancel and waits for the row to say cancelled. It prints one JSON line of
// what it saw and exits 0, or prints the failure and exits 1. Every wait is bounded.
import puppeteer from "puppeteer-core";

function arg(name, fallback) {
  const i = process.argv.indexOf("--" + name);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}

const url = arg("url");
let task = arg("task");
const token = arg("token");
const screenshot = arg("screenshot");
const executablePath = process.env.CHROMIUM || "/usr/bin/chromium";
const WAIT = 45000;
if (!url) {
  console.error("usage: node page_test.mjs --url URL [--token T] [--screenshot PATH] [--task ID]");
  process.exit(2);
}

/** The first line of standard input. */
function readLine() {
  return new Promise((resolve, reject) => {
    let buf = "";
    process.stdin.setEncoding("utf8");
    process.stdin.on("data", (d) => {
      buf += d;
      const nl = buf.indexOf("\n");
      if (nl >= 0) {
        // Nothing more is read: the handle goes, so that it keeps the process up no longer.
        process.stdin.destroy();
        resolve(buf.slice(0, nl).trim());
      }
    });
    process.stdin.on("end", () => reject(new Error("standard input ended before a task id")));
  });
}

const seen = { login: false };
const launchStarted = Date.now();
const browser = await puppeteer.launch({
  executablePath,
  headless: true,
  timeout: 120000,
  protocolTimeout: 120000,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check"],
});
seen.launchMs = Date.now() - launchStarted;
const started = Date.now();
try {
  if (!task) {
    console.log("ready");
    task = await readLine();
  }
  const row = `tr[data-id="${task}"]`;
  const page = await browser.newPage();
  await page.setViewport({ width: 1180, height: 360, deviceScaleFactor: 1 });
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  await page.goto(url, { waitUntil: "domcontentloaded", timeout: WAIT });
  // Either the token form (authentication on) or the board (off).
  await page.waitForSelector("#login:not([hidden]), #board:not([hidden])", { timeout: WAIT });
  if (await page.$("#login:not([hidden])")) {
    if (!token) throw new Error("the page asks for a token and none was given");
    seen.login = true;
    await page.type("#token", token);
    await page.click("#login button[type=submit]");
  }
  await page.waitForSelector(`${row} progress`, { timeout: WAIT });
  seen.tool = await page.$eval(`${row} td.tool`, (td) => td.firstChild.textContent);
  seen.owner = await page.$eval(`${row} td.owner`, (td) => td.textContent);
  // Two reads of the bar: the second higher than the first.
  await page.waitForFunction((sel) => document.querySelector(sel)?.value > 0, { timeout: WAIT }, `${row} progress`);
  seen.first = await page.$eval(`${row} progress`, (b) => b.value);
  await page.waitForFunction(
    (sel, first) => document.querySelector(sel)?.value > first,
    { timeout: WAIT },
    `${row} progress`,
    seen.first,
  );
  seen.second = await page.$eval(`${row} progress`, (b) => b.value);
  seen.max = await page.$eval(`${row} progress`, (b) => b.max);
  seen.message = await page.$eval(`${row} .msg`, (m) => m.textContent);
  if (screenshot) {
    // Part way (a quarter of the bar), the age ticking.
    await page.waitForFunction(
      (sel) => { const b = document.querySelector(sel); return b && b.value >= b.max / 4; },
      { timeout: WAIT },
      `${row} progress`,
    );
    seen.shotAtMs = Date.now() - started;
    await page.screenshot({ path: screenshot, fullPage: true });
    seen.screenshot = screenshot;
    seen.shotDoneMs = Date.now() - started;
  }
  await page.click(`${row} button.cancel`);
  seen.clickedMs = Date.now() - started;
  await page.waitForSelector(`${row}[data-status="cancelled"]`, { timeout: WAIT });
  seen.status = await page.$eval(`${row} .badge`, (b) => b.textContent);
  seen.after = await page.$eval(`${row} .msg`, (m) => m.textContent);
  seen.cancelButtons = (await page.$$(`${row} button.cancel:not([hidden])`)).length;
  seen.errors = errors;
  seen.ms = Date.now() - started;
  console.log(JSON.stringify(seen));
} catch (e) {
  console.error("page test failed: " + (e && e.stack ? e.stack : e));
  console.error("seen so far: " + JSON.stringify(seen));
  process.exitCode = 1;
} finally {
  await browser.close();
}
