// make check-viewer: one `perf record` of examples/demo.py under -X perf,
// then the paths from it to a picture, each checked for the Python names:
//   - perf script output loaded into speedscope (served from localhost, in
//     headless Chromium): the sandwich table lists py::foo, py::bar, py::baz;
//   - the same output without -X perf: speedscope lists no py:: frame (the
//     check above can fail);
//   - `perf script report flamegraph` with the d3-flame-graph template:
//     the flame graph Chromium renders labels the three functions;
//   - hotspot's parser (hotspot-perfparser, what the GUI runs) names them;
//   - the Firefox Profiler's own importer, run headless by its command line
//     (profiler-cli, under the Node 24 it requires, locked in build/viewer):
//     its top-down call tree has py::<module> -> py::baz -> py::bar ->
//     py::foo, the evaluator's frames between them;
//   - `python -m perf_trampoline record --python --flamegraph` of the same
//     script: Chromium renders its flame graph with py::foo, and in the
//     Firefox Profiler's tree of its Python-level text py::foo is a child
//     of py::bar itself.
// Screenshots go to $SHOTS (build/viewer-shots/).  Nothing else is left:
// the temporary directory, the importer's daemons and the /tmp files of
// the recorded processes (perf-PID.map, py-perf-PID-N.so, ...) are removed
// at the end: only those written since the check started, and only if
// they are unchanged then (an older file of a pid that came round again,
// or a newer one of the process that has it now, is not ours).
//
// Environment: CHECK_PYTHON (the interpreter), VIEWER_DIR (where
// tools/viewer/install.sh put node_modules), SHOTS, and PICTURE (a path:
// also save the README's picture there).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';

const PYTHON = path.resolve(process.env.CHECK_PYTHON || 'build/python');
const VIEWER_DIR = path.resolve(process.env.VIEWER_DIR || 'build/viewer');
const SHOTS = path.resolve(process.env.SHOTS || 'build/viewer-shots');
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const PERFPARSER = '/usr/lib/x86_64-linux-gnu/libexec/hotspot-perfparser';
// The interpreter makes the script's path absolute.
const DEMO = path.resolve('examples/demo.py');
const NAMES = ['foo', 'bar', 'baz'].map((f) => `py::${f}:${DEMO}`);

const require = createRequire(path.join(VIEWER_DIR, 'package.json'));
const nodeModules = path.join(VIEWER_DIR, 'node_modules');
const SPEEDSCOPE = path.join(nodeModules, 'speedscope', 'dist', 'release');
const D3_TEMPLATE = path.join(nodeModules, 'd3-flame-graph', 'dist',
                              'templates', 'd3-flamegraph-base.html');
// The Firefox Profiler's command line and the Node binary it runs under
// (node-linux-ARCH: the package the `node` package would fetch, locked here).
const PROFILER_CLI = path.join(nodeModules, '@firefox-devtools', 'profiler-cli',
                               'dist', 'profiler-cli.js');
const NODE24 = path.join(nodeModules, `node-${process.platform}-${process.arch}`,
                         'bin', 'node');

// When the check started (less a second: a file's timestamp may lag the
// clock by a tick), to tell our processes' files in /tmp from older ones.
const STARTED_NS = BigInt(Date.now() - 1000) * 1000000n;

let tmp;           // our temporary directory
const ours = new Map();   // /tmp files of our recordings -> their identity
let pqDir;         // the importer's session directory (sockets, daemon pids)
let noPerf = '';   // why perf cannot work here, if it cannot
let browser;
let server;
let base;          // http://127.0.0.1:PORT
const served = new Map();   // URL path -> file
const outside = [];         // requests the pages made elsewhere

function run(cmd, args, opts = {}) {
  return execFileSync(cmd, args, { encoding: 'utf8', maxBuffer: 1 << 28,
                                   stdio: ['ignore', 'pipe', 'pipe'], ...opts });
}

// A regular file's lstat() (null for anything else or nothing), and what
// tells that file apart from another one, or from itself rewritten.
function regularFile(file) {
  try {
    const st = fs.lstatSync(file, { bigint: true });
    return st.isFile() ? st : null;
  } catch {
    return null;
  }
}
const identity = (st) => `${st.dev}:${st.ino}:${st.size}:${st.mtimeNs}`;

// Marks for removal at the end the files in /tmp of `pid`, a process of
// ours that has ended (perf-PID.map, jit-PID.dump, py-perf-PID-N.so,
// jitted-PID-N.so): those written since the check started.
function forgetPerfFiles(pid) {
  const name = new RegExp(`^(?:perf-${pid}\\.map|jit-${pid}\\.dump|` +
                          `(?:py-perf|jitted)-${pid}-(?:0|[1-9][0-9]*)\\.so)$`);
  for (const f of fs.readdirSync('/tmp')) {
    if (!name.test(f)) continue;
    const st = regularFile(`/tmp/${f}`);
    if (st && st.mtimeNs >= STARTED_NS) ours.set(`/tmp/${f}`, identity(st));
  }
}

// Records examples/demo.py and returns the perf.data path; the pid is that of the shell, which execs
// the interpreter.
function record(name, xopts) {
  const data = path.join(tmp, `${name}.data`);
  const pidFile = path.join(tmp, `${name}.pid`);
  run('perf', ['record', '-F', '999', '-g', '-o', data, '--', 'sh', '-c',
               'echo $$ >"$0"; exec "$@"', pidFile, PYTHON, ...xopts, DEMO]);
  forgetPerfFiles(fs.readFileSync(pidFile, 'utf8').trim());
  return data;
}

// Only the interpreter's samples: a sample taken in the shell before its
// exec would make a second profile, and speedscope opens the first.
function perfScript(data, out) {
  fs.writeFileSync(out, run('perf', ['script', '-i', data, '--comms',
                                     path.basename(PYTHON)]));
  return out;
}

before(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'check-viewer-'));
  // The one reason to skip: this machine does not let us use perf events
  // (perf_event_paranoid, a container without CAP_PERFMON).  Everything
  // else (chromium, node modules, hotspot) is installed by install.sh and
  // must be there.
  const probe = spawnSync('perf', ['record', '-o', path.join(tmp, 'probe.data'),
                                   '--', 'true'], { encoding: 'utf8' });
  if (probe.status !== 0) {
    noPerf = `perf record cannot run here: ${(probe.stderr || '').trim().split('\n')[0]}`;
    return;
  }
  fs.mkdirSync(SHOTS, { recursive: true });

  // Named perf.data: `perf script report flamegraph` reads ./perf.data.
  served.set('/on.perf', perfScript(record('perf', ['-X', 'perf']),
                                    path.join(tmp, 'on.perf')));
  served.set('/off.perf', perfScript(record('off', []),
                                     path.join(tmp, 'off.perf')));
  const fg = path.join(tmp, 'flamegraph.html');
  run('perf', ['script', 'report', 'flamegraph', '--template', D3_TEMPLATE,
               '-o', fg], { cwd: tmp });
  served.set('/flamegraph.html', fg);

  server = http.createServer((req, res) => {
    const p = decodeURIComponent(new URL(req.url, 'http://localhost').pathname);
    let file = served.get(p);
    if (!file && p.startsWith('/speedscope/')) {
      file = path.join(SPEEDSCOPE, path.normalize(p.slice('/speedscope'.length)));
      if (!file.startsWith(SPEEDSCOPE + path.sep)) file = undefined;
    }
    fs.readFile(file || '/nonexistent', (err, body) => {
      if (err) { res.writeHead(404); res.end(); return; }
      const types = { '.html': 'text/html', '.js': 'text/javascript',
                      '.css': 'text/css', '.wasm': 'application/wasm' };
      res.writeHead(200, { 'content-type': types[path.extname(file)] ||
                                           'application/octet-stream' });
      res.end(body);
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${server.address().port}`;

  const { chromium } = require('playwright-core');
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
           '--disable-background-networking', '--disable-component-update',
           '--disable-sync'],
  });
});

after(async () => {
  if (browser) await browser.close();
  if (server) server.close();
  await stopProfilerDaemons();
  for (const [file, id] of ours) {
    const st = regularFile(file);
    if (st && identity(st) === id) fs.rmSync(file, { force: true });
  }
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

// A page that may reach our server only.
async function newPage() {
  const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
  await page.route('**/*', (route) => {
    const url = route.request().url();
    if (url.startsWith(base + '/') || url.startsWith('data:') ||
        url.startsWith('blob:')) return route.continue();
    outside.push(url);
    return route.abort();
  });
  return page;
}

// Loads a perf script file into speedscope and returns the names its
// sandwich table shows once sorted by total time (the Python functions
// enclose nearly every sample, so they sort to the top).
async function speedscope(page, profile, title) {
  const url = `${base}/speedscope/index.html#profileURL=` +
              encodeURIComponent(`${base}${profile}`) + `&title=${title}`;
  await page.goto(url);
  await page.getByText('Sandwich', { exact: false }).click();
  const total = page.getByText('Total', { exact: true });
  await total.waitFor();
  await total.click();
  await page.waitForTimeout(300);
  return page.innerText('body');
}

function skipIfNoPerf(t) {
  if (noPerf) { t.skip(noPerf); return true; }
  return false;
}

test('speedscope shows the Python functions of a -X perf profile', async (t) => {
  if (skipIfNoPerf(t)) return;
  const page = await newPage();
  const text = await speedscope(page, '/on.perf', 'demo');
  await page.screenshot({ path: path.join(SHOTS, 'speedscope-sandwich.png') });
  for (const name of NAMES) assert.ok(text.includes(name), `${name} not in:\n${text.slice(0, 3000)}`);
  await page.getByText('Left Heavy', { exact: false }).click();
  await page.waitForTimeout(500);
  await page.screenshot({ path: path.join(SHOTS, 'speedscope-left-heavy.png') });
  if (process.env.PICTURE) {
    // The README's picture (make check-viewer PICTURE=examples/speedscope-demo.png): the
    // whole flame chart without the toolbar, at a width a README shows.
    const small = await browser.newPage({ viewport: { width: 960, height: 560 } });
    await speedscope(small, '/on.perf', 'demo');
    await small.getByText('Left Heavy', { exact: false }).click();
    await small.waitForTimeout(500);
    await small.screenshot({ path: path.resolve(process.env.PICTURE),
                             clip: { x: 0, y: 120, width: 960, height: 420 } });
    await small.close();
  }
  await page.close();
  assert.deepEqual(outside, []);
});

test('without -X perf speedscope shows no py:: frame', async (t) => {
  if (skipIfNoPerf(t)) return;
  const page = await newPage();
  const text = await speedscope(page, '/off.perf', 'demo-off');
  assert.match(text, /_PyEval_EvalFrameDefault/);
  assert.doesNotMatch(text, /py::/);
  await page.close();
});

// Opens a d3-flame-graph page and returns the labels Chromium lays out at
// a readable width; d3 fills them in during its transition, so wait (up
// to 20 s) until the names are there.
async function flameGraphLabels(page, url, shot) {
  await page.goto(`${base}${url}`);
  const labels = () => [...document.querySelectorAll('svg foreignObject div, svg text')]
    .filter((e) => e.getBoundingClientRect().width > 40).map((e) => e.textContent);
  await page.waitForFunction(`(${labels})().filter((l) => l.startsWith('py::')).length >= 3`,
                             null, { timeout: 20000 }).catch(() => {});
  await page.waitForTimeout(300);
  const shown = await page.evaluate(`(${labels})()`);
  await page.screenshot({ path: path.join(SHOTS, shot) });
  return shown;
}

test('perf script report flamegraph labels the Python functions', async (t) => {
  if (skipIfNoPerf(t)) return;
  const page = await newPage();
  const shown = await flameGraphLabels(page, '/flamegraph.html', 'flamegraph.png');
  for (const name of NAMES) assert.ok(shown.includes(name), `${name} not in ${JSON.stringify(shown)}`);
  await page.close();
  assert.deepEqual(outside, []);
});

test("hotspot's perf parser names the Python functions", (t) => {
  if (skipIfNoPerf(t)) return;
  const out = path.join(tmp, 'hotspot.stream');
  // XDG_RUNTIME_DIR in our directory: Qt would create /tmp/runtime-root.
  run(PERFPARSER, ['--input', path.join(tmp, 'perf.data'), '--output', out],
      { env: { ...process.env, XDG_RUNTIME_DIR: tmp } });
  const stream = fs.readFileSync(out, 'latin1');
  for (const name of NAMES) assert.ok(stream.includes(name), `${name} not in hotspot's stream`);
});

// --- the Firefox Profiler ----------------------------------------------
// profiler-cli loads a file with the profiler's own importers into a
// daemon (one per session, reached through a socket in pqDir), then
// answers queries about it.

function pq(args) {
  return run(NODE24, [PROFILER_CLI, ...args],
             { env: { ...process.env, PROFILER_CLI_SESSION_DIR: pqDir } });
}

// The top-down call tree (a JSON tree of {name, children}) of a `perf
// script` text, as the Firefox Profiler imports it.
function firefoxTree(file, session) {
  if (!pqDir) pqDir = fs.mkdtempSync(path.join(tmp, 'pq-'));
  pq(['load', file, '--session', session]);
  const out = JSON.parse(pq(['thread', 'samples-top-down', '--session', session,
                             '--max-lines', '5000', '--json']));
  return out.regularCallTree;
}

// Stops the daemons our sessions started, and waits for them to exit (the
// stop request is answered before the daemon is gone); one still running
// after 5 s is killed by its pid.
async function stopProfilerDaemons() {
  if (!pqDir || !fs.existsSync(pqDir)) return;
  const pids = fs.readdirSync(pqDir).filter((f) => f.endsWith('.json')).map(
    (f) => JSON.parse(fs.readFileSync(path.join(pqDir, f), 'utf8')).pid);
  try { pq(['stop', '--all']); } catch { /* the kill below */ }
  const alive = (pid) => { try { process.kill(pid, 0); return true; } catch { return false; } };
  for (let i = 0; i < 50 && pids.some(alive); i++) {
    await new Promise((r) => setTimeout(r, 100));
  }
  for (const pid of pids.filter(alive)) process.kill(pid, 'SIGKILL');
}

// The first root-to-node path of the tree that holds the names of
// `chain` in that order, other frames allowed between them; null if none.
function findChain(node, chain, trail = []) {
  const here = [...trail, node.name];
  const left = chain.slice(chain[0] === node.name ? 1 : 0);
  if (left.length === 0) return here;
  for (const child of node.children || []) {
    const found = findChain(child, left, here);
    if (found) return found;
  }
  return null;
}

function pyNames(node, seen = new Set()) {
  if (node.name.startsWith('py::')) seen.add(node.name);
  for (const child of node.children || []) pyNames(child, seen);
  return seen;
}

const CHAIN = [`py::<module>:${DEMO}`, ...[...NAMES].reverse()];   // module, baz, bar, foo

test("the Firefox Profiler's importer shows the Python call chain", (t) => {
  if (skipIfNoPerf(t)) return;
  assert.match(run(NODE24, ['--version']), /^v24\./);
  const tree = firefoxTree(served.get('/on.perf'), 'full');
  const found = findChain(tree, CHAIN);
  assert.ok(found, `no ${CHAIN.join(' -> ')} in the Firefox Profiler's tree; ` +
                   `its py:: frames: ${JSON.stringify([...pyNames(tree)])}`);
  // The full text: the evaluator's frames sit between two Python frames
  // (what the Python-level view below drops).
  const between = found.slice(found.indexOf(CHAIN[2]) + 1, -1);
  assert.ok(between.includes('_PyEval_EvalFrameDefault'),
            `py::bar -> py::foo without the evaluator between: ${JSON.stringify(found)}`);
});

// Removes at the end the perf files of the processes sampled in a
// perf.data (only those of our interpreter, the command the recording
// ran; see forgetPerfFiles).
function removePerfFiles(data) {
  const comm = path.basename(PYTHON);
  const pids = new Set();
  for (const line of run('perf', ['script', '-i', data, '-F', 'comm,pid']).split('\n')) {
    const m = line.trim().match(/^(.*\S)\s+(\d+)$/);
    if (m && m[1] === comm) pids.add(m[2]);
  }
  for (const pid of pids) forgetPerfFiles(pid);
}

test('perf_trampoline record: its flame graph and Python-level text', async (t) => {
  if (skipIfNoPerf(t)) return;
  const dir = fs.mkdtempSync(path.join(tmp, 'record-'));
  const name = path.join(dir, 'demo');
  const rec = spawnSync(PYTHON, ['-m', 'perf_trampoline', 'record', '--python', '--flamegraph',
                                 '--template', D3_TEMPLATE, '-o', name,
                                 '--', PYTHON, 'examples/demo.py'],
                        { encoding: 'utf8', maxBuffer: 1 << 28, timeout: 300000 });
  if (fs.existsSync(`${name}.data`)) removePerfFiles(`${name}.data`);
  assert.equal(rec.status, 0, `record exited ${rec.status}:\n${rec.stdout}${rec.stderr}`);
  for (const ext of ['.data', '.txt', '.folded', '.html']) {
    assert.ok(fs.existsSync(name + ext), `record wrote no ${name}${ext}:\n${rec.stdout}`);
  }

  served.set('/record.html', `${name}.html`);
  const page = await newPage();
  const shown = await flameGraphLabels(page, '/record.html', 'record-flamegraph.png');
  assert.ok(shown.includes(NAMES[0]), `${NAMES[0]} not in ${JSON.stringify(shown)}`);
  await page.close();
  assert.deepEqual(outside, []);

  // The Python-level text: one Python frame straight under the other, the
  // native frames below py::foo kept.
  const tree = firefoxTree(`${name}.txt`, 'python');
  const found = findChain(tree, CHAIN);
  assert.ok(found, `no ${CHAIN.join(' -> ')} in the Firefox Profiler's tree of ${name}.txt; ` +
                   `its py:: frames: ${JSON.stringify([...pyNames(tree)])}`);
  // Under every py::bar, py::foo is a child, never a deeper descendant.
  const gaps = [];
  let direct = 0;
  (function walk(node) {
    if (node.name === CHAIN[2]) {
      (function below(n, between) {
        for (const c of n.children || []) {
          if (c.name === CHAIN[3]) {
            if (between.length) gaps.push(between); else direct++;
          } else {
            below(c, [...between, c.name]);
          }
        }
      })(node, []);
    }
    for (const c of node.children || []) walk(c);
  })(tree);
  assert.deepEqual(gaps, [], 'frames between py::bar and py::foo in the Python-level text');
  assert.ok(direct > 0, `py::foo is never a child of py::bar: ${JSON.stringify(found)}`);
  const from = found.indexOf(CHAIN[0]);
  assert.deepEqual(found.slice(from), CHAIN,
                   `frames between the Python ones: ${JSON.stringify(found.slice(from))}`);
  // ...and the native frames py::foo runs kept below it.
  let foo = tree;
  for (const n of found.slice(1)) foo = foo.children.find((c) => c.name === n);
  assert.ok((foo.children || []).length > 0, 'no native frame under py::foo');
});
