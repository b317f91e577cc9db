#!/usr/bin/env node
// Offline mermaid.ink-compatible renderer for the book's flowcharts.
//
// One headless Debian Chromium (driven by puppeteer-core, no browser download)
// keeps one page with mermaid.js loaded from node_modules; every request renders
// in that page, one at a time. Nothing is fetched from the network.
//
//   GET /svg/<b64>                  -> image/svg+xml (what mermaid-py's Mermaid() asks for)
//   GET /img/<b64>?format=png|jpeg|webp -> raster screenshot of the same SVG
//   GET /health                     -> JSON {service, ok, versions, pids, renders, ...}
//
// <b64> is mermaid.ink's encoding: base64 (URL-safe or standard, padding optional)
// of the UTF-8 diagram source, or of a JSON state {"code": ..., "mermaid": {...}};
// a "pako:" prefix means the bytes are zlib-deflated first.
//
// Usage: node server.js [--port N] [--chromium PATH]
//   port: --port, else env TRGLAB_MERMAID_PORT, else PORT, else 3377; binds 127.0.0.1 only.
//   chromium: --chromium, else env TRGLAB_CHROMIUM, else /usr/bin/chromium.
'use strict';

const http = require('http');
const fs = require('fs');
const os = require('os');
const path = require('path');
const zlib = require('zlib');
const crypto = require('crypto');

const HOST = '127.0.0.1';
const RENDER_TIMEOUT_MS = Number(process.env.TRGLAB_MERMAID_RENDER_TIMEOUT_MS || 20000);
const CACHE_SIZE = 128;
const CJK_FONTS = '"Noto Sans CJK SC", "Noto Sans SC", "Source Han Sans SC", "WenQuanYi Micro Hei"';
const FONT_FAMILY = `"trebuchet ms", verdana, arial, ${CJK_FONTS}, sans-serif`;

function fail(msg) {
  process.stderr.write(`mermaid_server: ${msg}\n`);
  process.exit(1);
}

function parseArgs(argv) {
  const opts = {
    port: process.env.TRGLAB_MERMAID_PORT || process.env.PORT || '3377',
    chromium: process.env.TRGLAB_CHROMIUM || '/usr/bin/chromium',
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if ((a === '--port' || a === '--chromium') && i + 1 < argv.length) {
      opts[a.slice(2)] = argv[++i];
    } else if (a.startsWith('--port=')) {
      opts.port = a.slice(7);
    } else if (a.startsWith('--chromium=')) {
      opts.chromium = a.slice(11);
    } else {
      fail(`unknown argument ${JSON.stringify(a)} (usage: node server.js [--port N] [--chromium PATH])`);
    }
  }
  const port = Number(opts.port);
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    fail(`port must be an integer in 1..65535, got ${JSON.stringify(opts.port)}`);
  }
  opts.port = port;
  return opts;
}

let puppeteer;
try {
  puppeteer = require('puppeteer-core');
} catch (e) {
  fail('puppeteer-core is not installed: run `make venv` (npm ci in mermaid_server/)');
}
let MERMAID_JS;
try {
  MERMAID_JS = require.resolve('mermaid/dist/mermaid.min.js');
} catch (e) {
  fail('mermaid is not installed: run `make venv` (npm ci in mermaid_server/)');
}
const MERMAID_VERSION = require('mermaid/package.json').version;
const PUPPETEER_VERSION = require('puppeteer-core/package.json').version;

// ---------------------------------------------------------------- decoding

class BadRequest extends Error {}

// Decode mermaid.ink's path segment into {code, config}.
function decodeDiagram(segment) {
  let s;
  try {
    s = decodeURIComponent(segment);
  } catch (e) {
    throw new BadRequest('diagram segment is not valid percent-encoding');
  }
  let deflated = false;
  if (s.startsWith('pako:')) {
    deflated = true;
    s = s.slice(5);
  } else if (s.startsWith('base64:')) {
    s = s.slice(7);
  }
  if (!/^[A-Za-z0-9+/_-]*={0,2}$/.test(s) || s.length === 0) {
    throw new BadRequest('diagram segment is not base64');
  }
  let bytes = Buffer.from(s, 'base64'); // Node accepts both alphabets, padding optional
  if (deflated) {
    try {
      bytes = zlib.inflateSync(bytes);
    } catch (e) {
      try {
        bytes = zlib.inflateRawSync(bytes);
      } catch (e2) {
        throw new BadRequest('pako: segment does not inflate');
      }
    }
  }
  const text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });
  let src;
  try {
    src = text.decode(bytes);
  } catch (e) {
    throw new BadRequest('diagram source is not valid UTF-8');
  }
  let code = src;
  let config = {};
  const trimmed = src.trim();
  if (trimmed.startsWith('{')) {
    // mermaid.live state: {"code": "...", "mermaid": "{...}" or {...}}
    try {
      const state = JSON.parse(trimmed);
      if (state && typeof state.code === 'string') {
        code = state.code;
        let m = state.mermaid;
        if (typeof m === 'string') m = JSON.parse(m);
        if (m && typeof m === 'object') config = m;
      }
    } catch (e) {
      // not JSON: treat as diagram text
    }
  }
  if (!code.trim()) throw new BadRequest('diagram source is empty');
  return { code, config };
}

// ---------------------------------------------------------------- browser

const state = {
  browser: null,
  page: null,
  chromiumVersion: null,
  userDataDir: null,
  renders: 0,
  errors: 0,
  lastRenderMs: null,
  started: Date.now(),
  readyMs: null,
  blockedRequests: 0,
};

const PAGE_HTML = `<!doctype html><html><head><meta charset="utf-8">
<style>
  html, body { margin: 0; padding: 0; background: white; font-family: ${FONT_FAMILY}; }
  #shot { display: inline-block; padding: 8px; background: white; }
</style></head><body><div id="shot"></div></body></html>`;

async function startBrowser(chromium) {
  if (!fs.existsSync(chromium)) {
    fail(`chromium not found at ${chromium}: install Debian's chromium or set TRGLAB_CHROMIUM`);
  }
  state.userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'trglab-mermaid-chromium-'));
  const browser = await puppeteer.launch({
    executablePath: chromium,
    headless: true,
    pipe: true, // Chromium exits when this process goes away
    userDataDir: state.userDataDir,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--font-render-hinting=none',
    ],
  });
  state.browser = browser;
  state.chromiumVersion = await browser.version();
  browser.on('disconnected', () => {
    if (!state.shuttingDown) {
      process.stderr.write('mermaid_server: chromium went away; exiting\n');
      cleanup();
      process.exit(3);
    }
  });
  const page = await browser.newPage();
  await page.setViewport({ width: 1600, height: 1200, deviceScaleFactor: 1 });
  // No network: the page only ever needs what we inject.
  await page.setRequestInterception(true);
  page.on('request', (req) => {
    const url = req.url();
    if (url.startsWith('data:') || url === 'about:blank') req.continue();
    else {
      state.blockedRequests++;
      req.abort('blockedbyclient');
    }
  });
  page.on('pageerror', (err) => process.stderr.write(`mermaid_server: page error: ${err.message}\n`));
  await page.setContent(PAGE_HTML, { waitUntil: 'load' });
  await page.addScriptTag({ path: MERMAID_JS });
  const ok = await page.evaluate(() => typeof window.mermaid !== 'undefined');
  if (!ok) fail('mermaid.js did not load into the page');
  state.page = page;
}

// Fixed settings: plain SVG <text> labels (htmlLabels false), strict security, a
// CJK-capable font stack so that Chinese labels are measured and drawn as glyphs.
function mermaidConfig(userConfig, theme) {
  const cfg = Object.assign({}, userConfig || {});
  cfg.startOnLoad = false;
  cfg.securityLevel = 'strict';
  cfg.htmlLabels = false;
  cfg.suppressErrorRendering = true;
  cfg.fontFamily = cfg.fontFamily || FONT_FAMILY;
  cfg.flowchart = Object.assign({}, cfg.flowchart || {}, { htmlLabels: false });
  if (theme) cfg.theme = theme;
  return cfg;
}

function svgIdFor(code, cfg) {
  const h = crypto.createHash('sha1').update(code).update('\0').update(JSON.stringify(cfg)).digest('hex');
  return `mermaid-${h.slice(0, 12)}`;
}

// One page, one render at a time.
let queue = Promise.resolve();
function serialized(fn) {
  const run = queue.then(fn, fn);
  queue = run.catch(() => {});
  return run;
}

function withTimeout(promise, ms, what) {
  let timer;
  const t = new Promise((_, reject) => {
    timer = setTimeout(() => reject(Object.assign(new Error(`${what} took longer than ${ms} ms`), { timeout: true })), ms);
  });
  return Promise.race([promise, t]).finally(() => clearTimeout(timer));
}

const cache = new Map(); // key -> svg (LRU by insertion order)
function cacheGet(key) {
  if (!cache.has(key)) return undefined;
  const v = cache.get(key);
  cache.delete(key);
  cache.set(key, v);
  return v;
}
function cachePut(key, v) {
  cache.set(key, v);
  while (cache.size > CACHE_SIZE) cache.delete(cache.keys().next().value);
}

async function renderSvg(code, cfg) {
  const id = svgIdFor(code, cfg);
  const key = id;
  const hit = cacheGet(key);
  if (hit) return { svg: hit, id, cached: true };
  const svg = await serialized(() =>
    withTimeout(
      state.page.evaluate(
        async (code, id, cfg) => {
          window.mermaid.initialize(cfg);
          try {
            const out = await window.mermaid.render(id, code);
            return { svg: out.svg };
          } catch (e) {
            return { error: String((e && (e.message || e.str)) || e) };
          } finally {
            // mermaid leaves a scratch container behind on errors
            for (const el of document.querySelectorAll(`#d${id}, #${id}`)) el.remove();
          }
        },
        code,
        id,
        cfg,
      ),
      RENDER_TIMEOUT_MS,
      'render',
    ),
  );
  if (svg.error) throw new BadRequest(svg.error.split('\n').filter(Boolean).join(' | '));
  cachePut(key, svg.svg);
  return { svg: svg.svg, id, cached: false };
}

async function renderImage(svg, format, bgColor, scale) {
  return serialized(() =>
    withTimeout(
      (async () => {
        const page = state.page;
        await page.evaluate(
          (svg, bg) => {
            const shot = document.getElementById('shot');
            shot.style.background = bg;
            shot.innerHTML = svg;
            const el = shot.querySelector('svg');
            // mermaid sets width="100%" + max-width; give the raster its natural size
            const mw = el && el.style.maxWidth;
            if (mw) {
              el.style.width = mw;
              el.removeAttribute('width');
            }
          },
          svg,
          bgColor,
        );
        if (scale !== 1) await page.setViewport({ width: 1600, height: 1200, deviceScaleFactor: scale });
        const el = await page.$('#shot');
        const opts = { type: format };
        if (format !== 'png') opts.quality = 90;
        const buf = await el.screenshot(opts);
        if (scale !== 1) await page.setViewport({ width: 1600, height: 1200, deviceScaleFactor: 1 });
        await page.evaluate(() => {
          document.getElementById('shot').innerHTML = '';
        });
        return buf;
      })(),
      RENDER_TIMEOUT_MS,
      'screenshot',
    ),
  );
}

// ---------------------------------------------------------------- HTTP

function send(res, status, type, body, extra) {
  res.writeHead(status, Object.assign({ 'Content-Type': type, 'Cache-Control': 'no-store' }, extra || {}));
  res.end(body);
}

function sendError(res, status, msg) {
  send(res, status, 'text/plain; charset=utf-8', `${msg}\n`);
}

async function handle(req, res) {
  const url = new URL(req.url, `http://${HOST}`);
  const parts = url.pathname.split('/').filter(Boolean);
  if (req.method !== 'GET' && req.method !== 'HEAD') return sendError(res, 405, 'only GET is supported');
  if (parts.length === 1 && parts[0] === 'health') {
    const ok = !!(state.page && state.browser && state.browser.connected);
    const proc = state.browser && state.browser.process();
    return send(
      res,
      ok ? 200 : 503,
      'application/json',
      JSON.stringify({
        service: 'trglab-mermaid',
        ok,
        pid: process.pid,
        chromium_pid: proc ? proc.pid : null,
        port: state.port,
        mermaid: MERMAID_VERSION,
        puppeteer_core: PUPPETEER_VERSION,
        chromium: state.chromiumVersion,
        node: process.version,
        user_data_dir: state.userDataDir,
        ready_ms: state.readyMs,
        uptime_s: Math.round((Date.now() - state.started) / 1000),
        renders: state.renders,
        errors: state.errors,
        last_render_ms: state.lastRenderMs,
        blocked_requests: state.blockedRequests,
      }),
    );
  }
  if (parts.length !== 2 || (parts[0] !== 'svg' && parts[0] !== 'img')) {
    return sendError(res, 404, 'not found: use /svg/<base64>, /img/<base64>?format=png or /health');
  }
  const t0 = process.hrtime.bigint();
  let diagram;
  try {
    diagram = decodeDiagram(parts[1]);
  } catch (e) {
    state.errors++;
    return sendError(res, 400, e.message);
  }
  const theme = url.searchParams.get('theme');
  if (theme && !['default', 'neutral', 'dark', 'forest', 'base'].includes(theme)) {
    return sendError(res, 400, `unknown theme ${JSON.stringify(theme)}`);
  }
  const cfg = mermaidConfig(diagram.config, theme);
  try {
    const { svg, cached } = await renderSvg(diagram.code, cfg);
    if (parts[0] === 'svg') {
      const ms = Number(process.hrtime.bigint() - t0) / 1e6;
      state.renders++;
      state.lastRenderMs = ms;
      return send(res, 200, 'image/svg+xml; charset=utf-8', svg, {
        'X-Render-Ms': ms.toFixed(1),
        'X-Cache': cached ? 'hit' : 'miss',
      });
    }
    const format = (url.searchParams.get('format') || 'jpeg').toLowerCase();
    const types = { png: 'image/png', jpeg: 'image/jpeg', jpg: 'image/jpeg', webp: 'image/webp' };
    if (!types[format]) return sendError(res, 400, `unknown format ${JSON.stringify(format)} (png, jpeg, webp)`);
    let bg = url.searchParams.get('bgColor') || 'white';
    if (/^[0-9a-fA-F]{3,8}$/.test(bg)) bg = `#${bg}`;
    else if (bg.startsWith('!')) bg = bg.slice(1);
    if (!/^#?[A-Za-z0-9]+$/.test(bg)) return sendError(res, 400, 'bad bgColor');
    let scale = Number(url.searchParams.get('scale') || 1);
    if (!(scale >= 1 && scale <= 3)) return sendError(res, 400, 'scale must be between 1 and 3');
    const buf = await renderImage(svg, format === 'jpg' ? 'jpeg' : format, bg, scale);
    const ms = Number(process.hrtime.bigint() - t0) / 1e6;
    state.renders++;
    state.lastRenderMs = ms;
    return send(res, 200, types[format], buf, { 'X-Render-Ms': ms.toFixed(1) });
  } catch (e) {
    state.errors++;
    if (e instanceof BadRequest) return sendError(res, 400, `mermaid syntax error: ${e.message}`);
    if (e.timeout) return sendError(res, 504, e.message);
    process.stderr.write(`mermaid_server: ${e.stack || e}\n`);
    return sendError(res, 500, `render failed: ${String(e.message || e).split('\n')[0]}`);
  }
}

let cleanedUp = false;
function cleanup() {
  if (cleanedUp) return;
  cleanedUp = true;
  try {
    const proc = state.browser && state.browser.process();
    if (proc && proc.exitCode === null) proc.kill('SIGKILL');
  } catch (e) {}
  if (state.userDataDir) {
    try {
      fs.rmSync(state.userDataDir, { recursive: true, force: true });
    } catch (e) {}
  }
}

async function shutdown(signal) {
  if (state.shuttingDown) return;
  state.shuttingDown = true;
  process.stderr.write(`mermaid_server: ${signal}, shutting down\n`);
  try {
    if (state.server) state.server.close();
    if (state.browser) await withTimeout(state.browser.close(), 3000, 'browser close');
  } catch (e) {}
  cleanup();
  process.exit(0);
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  state.port = opts.port;
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('exit', cleanup);
  // Bind first so that a busy port fails fast, before Chromium starts.
  const server = http.createServer({ maxHeaderSize: 1 << 20 }, (req, res) => {
    handle(req, res).catch((e) => {
      process.stderr.write(`mermaid_server: ${e.stack || e}\n`);
      try {
        sendError(res, 500, 'internal error');
      } catch (e2) {}
    });
  });
  state.server = server;
  await new Promise((resolve) => {
    server.once('error', (e) => {
      if (e.code === 'EADDRINUSE') fail(`port ${opts.port} on ${HOST} is already in use`);
      fail(`cannot listen on ${HOST}:${opts.port}: ${e.message}`);
    });
    server.listen(opts.port, HOST, resolve);
  });
  try {
    await startBrowser(opts.chromium);
  } catch (e) {
    cleanup();
    fail(`chromium did not start (${opts.chromium}): ${String(e.message || e).split('\n')[0]}`);
  }
  state.readyMs = Date.now() - state.started;
  process.stdout.write(
    `mermaid_server: ready on http://${HOST}:${opts.port} in ${state.readyMs} ms ` +
      `(mermaid ${MERMAID_VERSION}, ${state.chromiumVersion}, pid ${process.pid})\n`,
  );
}

main();
