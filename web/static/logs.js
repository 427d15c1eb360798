// The log viewer: streams /api/log into the page, with follow, pause,
// filter and download.
import {
  $, api, apiJSON, errorMessage, fmtStamp, h, initNav, markReady, setHost,
} from './common.js';

const MAX_LINES = 20000; // kept in memory; the oldest go first
const READY_AFTER = 1000; // ms after the headers a silent follow counts as rendered

const view = $('log-lines');
const seek = $('log-seek');
const follow = $('log-follow');
const pauseButton = $('log-pause');
const filter = $('log-filter');

let lines = []; // every line received, oldest first
let pending = 0; // how many of the last lines wait for Resume
let visible = 0; // how many shown lines match the filter
let query = ''; // the filter, lower-cased
let paused = false;
let state = 'loading'; // a key of STATES, or an error message
let request = null; // the AbortController of the running request

const STATES = { loading: 'Loading…', following: 'Following…', ended: 'Stream ended' };

function renderStatus() {
  const text = STATES[state];
  if (text === undefined) $('log-status').textContent = state;
  else if (paused) $('log-status').textContent = state === 'ended' ? 'Paused; stream ended' : 'Paused';
  else $('log-status').textContent = text;
}

function renderCount() {
  const shown = lines.length - pending;
  let text = `${shown} line${shown === 1 ? '' : 's'}`;
  if (query) text += `, ${visible} matching`;
  if (pending) text += `, ${pending} waiting`;
  $('log-count').textContent = text;
}

function setState(s) {
  state = s;
  renderStatus();
}

const matches = (text) => !query || text.toLowerCase().includes(query);

/** atBottom tells whether the view is scrolled to its end, so new lines should keep it there. */
const atBottom = () => view.scrollHeight - view.scrollTop - view.clientHeight < 8;

/** showPending puts the lines received while paused on the page. */
function showPending() {
  if (!pending) return;
  const stick = atBottom();
  const frag = document.createDocumentFragment();
  for (let i = lines.length - pending; i < lines.length; i++) {
    const line = h('span', { className: 'log-line' }, lines[i]);
    line.hidden = !matches(lines[i]);
    if (!line.hidden) visible++;
    frag.append(line);
  }
  pending = 0;
  view.append(frag);
  if (stick) view.scrollTop = view.scrollHeight;
}

/** add takes newly received lines, dropping the oldest beyond MAX_LINES. */
function add(batch) {
  for (const line of batch) lines.push(line);
  pending += batch.length;
  const over = lines.length - MAX_LINES;
  if (over > 0) {
    lines.splice(0, over);
    for (let i = 0; i < over && view.firstElementChild; i++) {
      if (!view.firstElementChild.hidden) visible--;
      view.firstElementChild.remove();
    }
    pending = Math.min(pending, lines.length);
  }
  if (!paused) showPending();
  renderCount();
}

const trimCR = (s) => (s.endsWith('\r') ? s.slice(0, -1) : s);

/** read adds the lines of a streamed body as they come, carrying partial lines across chunks. */
async function read(body) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let rest = '';
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    rest += decoder.decode(value, { stream: true });
    const parts = rest.split('\n');
    rest = parts.pop();
    add(parts.map(trimCR));
    markReady();
  }
  rest += decoder.decode();
  if (rest) add([trimCR(rest)]);
}

/** start (re)starts the request for the chosen window, dropping what was shown. */
async function start() {
  request?.abort();
  const ctrl = (request = new AbortController());
  lines = [];
  pending = visible = 0;
  view.replaceChildren();
  renderCount();
  setState('loading');
  const params = new URLSearchParams({ seek: seek.value });
  if (follow.checked) params.set('follow', '1');
  let timer = 0;
  try {
    const res = await api('/api/log?' + params, { signal: ctrl.signal, headers: { Accept: 'text/plain' } });
    if (!res.ok) {
      const msg = await errorMessage(res);
      setState(res.status === 503 ? 'Log unavailable: ' + msg : 'Cannot read the log: ' + msg);
      return;
    }
    setState(follow.checked ? 'following' : 'loading');
    timer = setTimeout(markReady, READY_AFTER);
    await read(res.body);
    setState('ended');
  } catch {
    if (ctrl.signal.aborted) return; // replaced by a newer request, or leaving the page
    setState(lines.length ? 'Connection lost; stream ended' : 'Cannot reach the device.');
  } finally {
    clearTimeout(timer);
    if (!ctrl.signal.aborted) markReady();
  }
}

function togglePause() {
  paused = !paused;
  pauseButton.textContent = paused ? 'Resume' : 'Pause';
  if (!paused) showPending();
  renderStatus();
  renderCount();
}

function applyFilter() {
  const stick = atBottom();
  query = filter.value.toLowerCase();
  visible = 0;
  for (const line of view.children) {
    line.hidden = !matches(line.textContent);
    if (!line.hidden) visible++;
  }
  if (stick) view.scrollTop = view.scrollHeight;
  renderCount();
}

/** download saves every line received, shown or not, as a text file. */
function download() {
  const blob = new Blob([lines.map((l) => l + '\n').join('')], { type: 'text/plain;charset=utf-8' });
  const a = h('a', { href: URL.createObjectURL(blob), download: `kvmd-log-${fmtStamp(new Date())}.txt` });
  document.body.append(a);
  a.click();
  a.remove();
  // Revoking at once can cancel the download in some browsers.
  setTimeout(() => URL.revokeObjectURL(a.href), 10000);
}

initNav();
seek.addEventListener('change', start);
follow.addEventListener('change', start);
pauseButton.addEventListener('click', togglePause);
filter.addEventListener('input', applyFilter);
$('log-download').addEventListener('click', download);
// Stop the stream when leaving; restart it when the page comes back from the back/forward cache.
addEventListener('pagehide', () => request?.abort());
addEventListener('pageshow', (e) => e.persisted && start());
apiJSON('/api/info?fields=node&legacy=0').then((info) => setHost(info.node?.host), () => {});
start();
