// Drives the in-sandbox chromium from outside through deskboxd's CDP route
// with Playwright's connectOverCDP, as a user's script would.  Run by
// tests/integration/test_cdp.py: CDP_URL (…/v1/sandboxes/ID/browser/cdp),
// DESKBOX_TOKEN, PAGE_URL (as the browser inside sees it).  Prints one JSON
// line: {"title", "text" (the body's), "pages"} or {"error"}.
import { chromium } from 'playwright-core';

const headers = { Authorization: `Bearer ${process.env.DESKBOX_TOKEN}` };
let browser;
try {
  browser = await chromium.connectOverCDP(process.env.CDP_URL, { headers, timeout: 60000 });
  const ctx = browser.contexts()[0];
  const page = ctx.pages()[0] || (await ctx.newPage());
  await page.goto(process.env.PAGE_URL, { timeout: 60000 });
  await page.bringToFront();
  const title = await page.title();
  const text = await page.evaluate(() => document.body.innerText);
  console.log(JSON.stringify({ title, text, pages: ctx.pages().length }));
} catch (err) {
  console.log(JSON.stringify({ error: String(err && err.stack || err) }));
} finally {
  // Leaves the browser running: close() of a connectOverCDP browser only
  // disconnects.
  if (browser) await browser.close();
}
