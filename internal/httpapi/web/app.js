// The sudoku-queue dashboard. It follows /v1/events (server-sent events,
// read with fetch so that a bearer token can be sent) and draws the
// figures, the chart and the jobs; the solve box posts to /v1/solve.
'use strict';

const $ = (id) => document.getElementById(id);
const tokenKey = 'sudoku-token';
const maxPoints = 300;
let points = [];

// auth returns the headers that carry the token, if one was given.
function auth(extra) {
  const h = Object.assign({}, extra || {});
  const t = localStorage.getItem(tokenKey);
  if (t) h['Authorization'] = 'Bearer ' + t;
  return h;
}

function askToken() {
  $('token-form').hidden = false;
}

$('token-form').addEventListener('submit', (e) => {
  e.preventDefault();
  localStorage.setItem(tokenKey, $('token').value.trim());
  $('token-form').hidden = true;
});

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function setConn(on) {
  const c = $('conn');
  c.textContent = on ? 'live' : 'reconnecting…';
  c.className = 'conn ' + (on ? 'on' : 'off');
}

// follow reads the event stream for ever, reconnecting after a failure.
async function follow() {
  for (;;) {
    try {
      const res = await fetch('/v1/events', { headers: auth(), cache: 'no-store' });
      if (res.status === 401) {
        askToken();
      } else if (res.ok && res.body) {
        setConn(true);
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        let buf = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += value;
          let i;
          while ((i = buf.indexOf('\n\n')) >= 0) {
            event(buf.slice(0, i));
            buf = buf.slice(i + 2);
          }
        }
      }
    } catch (e) {
      // The server went away; try again below.
    }
    setConn(false);
    await sleep(2000);
  }
}

// event handles one server-sent event block.
function event(block) {
  let type = 'message';
  const data = [];
  for (const line of block.split('\n')) {
    if (line.startsWith('event:')) type = line.slice(6).trim();
    else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
  }
  if (type === 'stats' && data.length) update(JSON.parse(data.join('\n')));
}

function fmt(n, digits) {
  if (n === null || n === undefined || Number.isNaN(n)) return '–';
  if (n >= 1e6) return (n / 1e6).toFixed(1) + 'M';
  if (n >= 1e3) return (n / 1e3).toFixed(1) + 'k';
  return n.toFixed(digits || 0);
}

// update draws one Stats snapshot. Until the first, the page says it is
// loading (… in the cards, "Loading…" for the jobs), not that there is
// nothing.
function update(st) {
  $('main').removeAttribute('aria-busy');
  for (const v of document.querySelectorAll('.card .value[title="loading"]')) v.removeAttribute('title');
  $('rate').textContent = fmt(st.solved_per_second);
  $('rate-total').textContent = fmt(st.solved_total) + ' since start';
  $('workers').textContent = st.workers === null || st.workers === undefined ? '–' : st.workers;
  const q = st.queue;
  $('pending').textContent = q ? fmt(q.pending) : '–';
  $('ackpending').textContent = q ? fmt(q.ack_pending) : '–';
  $('redelivered').textContent = q ? fmt(q.redelivered) : '–';
  const c = st.cache;
  $('hitratio').textContent = c.hit_ratio === null || c.hit_ratio === undefined ? '–' : (c.hit_ratio * 100).toFixed(1) + '%';
  const cacheState = { down: ' · cache down', none: ' · no cache' }[c.state] || '';
  $('hits').textContent = fmt(c.hits) + ' of ' + fmt(c.hits + c.misses) + cacheState;
  $('hits').classList.toggle('bad', c.state === 'down');

  const problems = [st.queue_error, st.jobs_error, st.cache_error].filter(Boolean);
  $('banner').hidden = problems.length === 0;
  $('banner').textContent = problems.join(' · ');

  if (st.history) points = st.history.slice(-maxPoints);
  else points.push(st.solved_per_second);
  if (points.length > maxPoints) points = points.slice(-maxPoints);
  const span = Math.round(maxPoints * st.interval_seconds);
  $('chart-span').textContent = 'last ' + (span >= 120 ? Math.round(span / 60) + ' minutes' : span + ' seconds');
  draw();
  if (st.jobs) jobs(st.jobs);
  else if (st.jobs_error) $('jobs-loading').hidden = true; // the banner says why
}

// draw plots points on the canvas, scaled to its size on screen.
function draw() {
  const cv = $('chart');
  const dpr = window.devicePixelRatio || 1;
  const w = cv.clientWidth, h = cv.clientHeight;
  if (cv.width !== Math.round(w * dpr) || cv.height !== Math.round(h * dpr)) {
    cv.width = Math.round(w * dpr);
    cv.height = Math.round(h * dpr);
  }
  const g = cv.getContext('2d');
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.clearRect(0, 0, w, h);
  const top = Math.max(1, ...points) * 1.15;
  const left = 44, bottom = h - 18;
  g.font = '11px system-ui, sans-serif';
  g.fillStyle = '#687082';
  g.strokeStyle = '#dde1e8';
  g.lineWidth = 1;
  for (let i = 0; i <= 4; i++) {
    const y = 6 + ((bottom - 6) * i) / 4;
    g.beginPath(); g.moveTo(left, y); g.lineTo(w, y); g.stroke();
    const v = (top * (4 - i)) / 4;
    g.fillText(fmt(v, top < 10 ? 1 : 0), 2, y + 4);
  }
  g.fillText('now', w - 24, h - 4);
  if (points.length < 2) return;
  const dx = (w - left) / (maxPoints - 1);
  const x0 = w - (points.length - 1) * dx;
  const y = (v) => bottom - ((bottom - 6) * v) / top;
  g.beginPath();
  g.moveTo(x0, bottom);
  points.forEach((v, i) => g.lineTo(x0 + i * dx, y(v)));
  g.lineTo(x0 + (points.length - 1) * dx, bottom);
  g.closePath();
  g.fillStyle = 'rgba(37, 99, 235, 0.15)';
  g.fill();
  g.beginPath();
  points.forEach((v, i) => (i ? g.lineTo(x0 + i * dx, y(v)) : g.moveTo(x0, y(v))));
  g.strokeStyle = '#2563eb';
  g.lineWidth = 2;
  g.stroke();
}
window.addEventListener('resize', draw);

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

// jobStates says what each state means, for the badge's tooltip.
const jobStates = {
  publishing: 'its batches are being published',
  published: 'every batch is out; results are coming in',
  finished: 'every result is in',
  cancelled: 'cancelled: the work not done left the queue; the results done stay',
  failed: 'the submission stopped: the job has no results',
};

// jobCounts returns what became of a job's lines: sent to the workers,
// cached, repeated, invalid (those that apply), so that a job nobody had
// to solve still shows its lines.
function jobCounts(j) {
  const counts = el('div', 'counts');
  const parts = [
    ['queued', j.queued, j.state === 'finished' ? 'solved by workers' : 'to workers', 'distinct puzzles sent to the workers'],
    ['cached', j.cached, 'cached', 'answered from the cache'],
    ['repeated', j.repeated, 'repeated', 'repeats of an earlier line of the job'],
    ['invalid', j.invalid, 'invalid', 'lines that are not puzzles'],
  ].filter((p) => p[1] > 0);
  if (parts.length === 0) {
    // Nothing published yet (or ever, for a job that failed early).
    counts.append(el('span', 'n empty', j.lines > 0 ? fmt(j.lines) + ' lines read' : 'no lines'));
  }
  for (const [cls, n, label, title] of parts) {
    const s = el('span', 'n ' + cls, fmt(n) + ' ' + label);
    s.title = title;
    counts.append(s);
  }
  return counts;
}

// jobs lists the newest jobs with their progress bars and counts.
function jobs(list) {
  $('jobs-loading').hidden = true;
  $('jobs-empty').hidden = list.length > 0;
  const ul = $('jobs');
  ul.replaceChildren(...list.map((j) => {
    const li = el('li', 'job');
    li.dataset.job = j.id;
    const top = el('div', 'top');
    top.append(el('span', 'id', j.id));
    const unsolved = j.state === 'finished' && j.unsolved > 0;
    const state = el('span', 'state ' + j.state + (unsolved ? ' unsolved' : ''),
      j.state + (unsolved ? ', ' + fmt(j.unsolved) + ' unsolved' : ''));
    state.title = jobStates[j.state] || '';
    if (unsolved) state.title += '; ' + j.unsolved + ' lines without a unique solution';
    top.append(state);
    li.append(top);
    const pct = Math.floor(j.progress * 100);
    const bar = el('div', 'bar' + (pct >= 100 ? ' done' : '') + (j.state === 'failed' ? ' failed' : ''));
    bar.setAttribute('role', 'progressbar');
    bar.setAttribute('aria-valuemin', '0');
    bar.setAttribute('aria-valuemax', '100');
    bar.setAttribute('aria-valuenow', String(pct));
    bar.dataset.job = j.id;
    const fill = el('div', 'fill');
    fill.style.width = pct + '%';
    bar.append(fill, el('span', 'pct', pct + '%'));
    li.append(bar);
    if (j.state === 'failed') li.append(el('div', 'error', j.error || 'failed'));
    li.append(jobCounts(j));
    const created = new Date(j.created);
    const meta = [fmt(j.done) + ' of ' + fmt(j.lines) + ' lines done'];
    if (j.queued > 0 && j.rate > 0) meta.push(fmt(j.rate) + ' lines/s');
    meta.push(created.toLocaleTimeString());
    li.append(el('div', 'meta', meta.join(' · ')));
    return li;
  }));
}

// solve posts the puzzle in the box and shows the answer.
$('solve-form').addEventListener('submit', async (e) => {
  e.preventDefault();
  const status = $('solve-status');
  const button = $('solve');
  const text = $('puzzle').value;
  button.disabled = true;
  status.className = 'status';
  status.textContent = 'solving…';
  $('grid').hidden = true;
  const t0 = performance.now();
  try {
    const res = await fetch('/v1/solve', {
      method: 'POST', headers: auth({ 'Content-Type': 'text/plain' }), body: text,
    });
    const body = await res.json();
    const ms = Math.round(performance.now() - t0);
    if (!res.ok) {
      if (res.status === 401) askToken();
      status.className = 'status error';
      status.textContent = body.error ? body.error.message : 'HTTP ' + res.status;
      return;
    }
    const ok = body.status === 'unique' || body.status === 'solved';
    status.className = 'status ' + (ok ? 'ok' : 'error');
    status.textContent = body.status + (body.error ? ': ' + body.error : '') + ' · ' +
      (body.cached ? 'from the cache' : 'solved by a worker') + ' · ' + body.guesses + ' guesses · ' + ms + ' ms';
    grid(body.puzzle, body.solution);
  } catch (err) {
    status.className = 'status error';
    status.textContent = 'the server did not answer: ' + err;
  } finally {
    button.disabled = false;
  }
});

// grid shows the solution with the givens set apart (or the puzzle alone).
function grid(puzzle, solution) {
  const tbody = $('grid').tBodies[0];
  const rows = [];
  for (let r = 0; r < 9; r++) {
    const tr = el('tr');
    for (let c = 0; c < 9; c++) {
      const i = r * 9 + c;
      const given = puzzle && puzzle[i] >= '1' && puzzle[i] <= '9';
      const v = given ? puzzle[i] : solution ? solution[i] : '';
      tr.append(el('td', given ? 'given' : 'solved', v));
    }
    rows.push(tr);
  }
  tbody.replaceChildren(...rows);
  $('grid').hidden = false;
}

draw();
follow();
