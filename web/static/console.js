// The console: the host's screen, live from the streamer the daemon runs
// (WebRTC, else Direct H.264 through WebCodecs, else MJPEG: video.js;
// scaled to fit), with the keyboard and mouse captured over it and sent
// as kvmd's /api/ws input messages, the signal's state over the picture
// when there is none to show, and the ATX buttons at hand.
//
// Keys go by KeyboardEvent.code ({"event_type":"key","event":{"key":"KeyA",
// "state":true}}), the mouse as an absolute position on the picture
// (mouse_move, x and y from -32768 to 32767 across it), its buttons
// (mouse_button) and its wheel (mouse_wheel), as PiKVM's page sends them
// (web/share/js/kvm/keyboard.js and mouse.js in github.com/pikvm/kvmd).
import { atxControls } from './atx.js';
import { $, api, apiJSON, errorMessage, initNav, markReady, setHost } from './common.js';
import { Player, modeName } from './video.js';

const RECONNECT = 2000; // ms before a dropped event stream is reopened
const SCROLL_RATE = 5; // wheel steps a notch, PiKVM's default
// Keys a stuck-key release lets go of whether or not this page pressed
// them: a modifier held when focus moved away stays held on the host.
const MODIFIERS = ['ControlLeft', 'ControlRight', 'ShiftLeft', 'ShiftRight',
  'AltLeft', 'AltRight', 'MetaLeft', 'MetaRight'];
// MouseEvent.button to kvmd's button names.
const BUTTONS = ['left', 'middle', 'right', 'up', 'down'];
const QUALITIES = [10, 20, 30, 40, 50, 60, 70, 80, 90, 100];
const FPS = [0, 5, 10, 15, 20, 25, 30, 45, 60];

const screen = $('screen');
const img = $('stream');
const overlay = $('overlay');

let ws = null;
let st = {}; // the streamer's state, kvmd's partial events merged in
let clients = 0;
let running = false; // a streamer ran at the last state
let ranBefore = false; // one ran before: a new one is a restart
let captured = false;
const heldKeys = new Set();
const heldButtons = new Set();
let pendingMove = null;
let moveFrame = 0;

function send(type, event) {
  if (ws && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ event_type: type, event }));
}

function message(text, bad) {
  const el = $('con-msg');
  el.textContent = text;
  el.classList.toggle('bad', !!bad);
}

// ---- The picture

const player = new Player({ screen, img, video: $('video'), canvas: $('canvas') }, () => render());
// ?video=webrtc|media|mjpeg keeps to one way (and the select does).
const asked = new URLSearchParams(location.search).get('video') || '';
$('con-video').value = asked;
$('con-video').addEventListener('change', (e) => player.force(e.target.value));

/** overlayText says why there is no picture, or '' when there is one. */
function overlayText() {
  if (!ws || ws.readyState !== WebSocket.OPEN) return 'Connecting…';
  if (st.error) return 'No stream: ' + st.error;
  const c = st.capture;
  if (c === null) return 'No capture device';
  switch (c?.status) {
    case 'no_signal': return 'No signal';
    case 'no_lock': return 'The signal is unstable: the capture cannot lock onto it';
    case 'out_of_range': return 'The signal is out of the capture device\'s range';
    case 'no_access': return 'The daemon may not open the capture device';
  }
  if (!st.streamer) return 'Starting the stream…';
  if (st.streamer.source?.online === false) return 'No signal';
  return '';
}

function render() {
  const text = overlayText();
  overlay.textContent = text;
  overlay.hidden = text === '';
  screen.dataset.signal = st.capture?.status || '';
  screen.dataset.overlay = text === '' ? '' : text;
  const src = st.streamer?.source;
  const parts = [];
  if (ws && ws.readyState === WebSocket.OPEN) {
    if (src?.resolution?.width) parts.push(`${src.resolution.width}×${src.resolution.height}`);
    if (st.streamer) parts.push(`${src?.captured_fps ?? 0} fps`);
    if (player.mode) {
      const s = player.stats;
      let v = modeName(player.mode);
      if (s.kbps !== null) v += ` ${s.kbps} kbit/s`;
      if (s.latency !== null) v += `, ${s.latency} ms`;
      parts.push(v);
    }
    parts.push(clients === 1 ? '1 viewer' : `${clients} viewers`);
    if (captured) parts.push('keyboard and mouse captured');
  } else {
    parts.push('Connection lost, reconnecting…');
  }
  const status = $('con-status');
  status.textContent = parts.join(' · ');
  status.title = status.textContent + (player.error ? '\n' + player.error : ''); // the whole of it where the bar cuts it
  screen.dataset.bitrate = player.stats.kbps ?? '';
  screen.dataset.latency = player.stats.latency ?? '';
  renderStreamControls();
}

function options(el, values, label, current) {
  const vals = values.includes(current) ? values : [...values, current].sort((a, b) => a - b);
  el.replaceChildren(...vals.map((v) => {
    const o = document.createElement('option');
    o.value = String(v);
    o.textContent = label(v);
    return o;
  }));
  el.value = String(current);
}

function renderStreamControls() {
  const f = st.features;
  if (!f) return;
  $('con-stream-controls').hidden = false;
  const quality = $('con-quality');
  quality.hidden = !f.quality;
  $('con-quality').previousElementSibling.hidden = !f.quality;
  const applied = st.applied || st.params || {};
  if (f.quality && document.activeElement !== quality) {
    options(quality, QUALITIES, (v) => v + ' %', applied.quality ?? 80);
  }
  const fps = $('con-fps');
  if (document.activeElement !== fps) {
    const lim = st.limits?.desired_fps || { min: 0, max: 60 };
    options(fps, FPS.filter((v) => v >= lim.min && v <= lim.max), (v) => (v === 0 ? 'max' : String(v)), applied.desired_fps ?? 30);
  }
}

async function setParam(name, value) {
  message('');
  try {
    const res = await api('/api/streamer/set_params?' + new URLSearchParams({ [name]: value }), { method: 'POST' });
    if (!res.ok) message(await errorMessage(res), true);
  } catch (e) {
    message('The request failed: ' + e.message, true);
  }
}
$('con-quality').addEventListener('change', (e) => setParam('quality', e.target.value));
$('con-fps').addEventListener('change', (e) => setParam('desired_fps', e.target.value));

function onStreamer(ev) {
  if (ev.features) st = { ...ev };
  else Object.assign(st, ev);
  const now = !!st.streamer;
  // A streamer that started again (it died, or its params changed)
  // ended the MJPEG stream this page had: ask for the new one's.
  if (now && !running && ranBefore && player.mode === 'mjpeg') player.start('mjpeg');
  if (now) ranBefore = true;
  running = now;
  if (st.features) {
    if (!player.mode && asked) {
      player.h264 = !!st.features.h264;
      player.force(asked);
    } else {
      player.setH264(!!st.features.h264);
    }
  }
  render();
  markReady();
}

// ---- The event stream

function connect() {
  ws = new WebSocket((location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/api/ws');
  ws.onopen = () => render();
  ws.onmessage = (ev) => {
    let msg;
    try { msg = JSON.parse(ev.data); } catch { return; }
    switch (msg.event_type) {
      case 'streamer': onStreamer(msg.event || {}); break;
      case 'clients': clients = msg.event?.count ?? 0; render(); break;
      case 'atx': renderATX(msg.event || {}); break;
    }
  };
  ws.onclose = () => {
    ws = null;
    captured = false;
    heldKeys.clear();
    heldButtons.clear();
    render();
    setTimeout(connect, RECONNECT);
  };
}

// ---- Keyboard and mouse

function setCaptured(on) {
  captured = on;
  screen.dataset.captured = on ? '1' : '0';
  if (!on) releaseHeld();
  render();
}

function releaseHeld() {
  for (const k of heldKeys) send('key', { key: k, state: false });
  heldKeys.clear();
  for (const b of heldButtons) send('mouse_button', { button: b, state: false });
  heldButtons.clear();
}

/** releaseAll lets go of every key and button the host may hold. */
function releaseAll() {
  releaseHeld();
  for (const k of MODIFIERS) send('key', { key: k, state: false });
  for (const b of BUTTONS.slice(0, 3)) send('mouse_button', { button: b, state: false });
  message('Released the keys and mouse buttons.');
}

screen.addEventListener('focus', () => setCaptured(true));
screen.addEventListener('blur', () => setCaptured(false));
document.addEventListener('visibilitychange', () => {
  if (document.hidden) releaseHeld();
});

screen.addEventListener('keydown', (e) => {
  if (!captured || !e.code) return;
  e.preventDefault();
  if (e.repeat) return; // the host repeats a held key itself
  heldKeys.add(e.code);
  send('key', { key: e.code, state: true });
});
screen.addEventListener('keyup', (e) => {
  if (!captured || !e.code) return;
  e.preventDefault();
  heldKeys.delete(e.code);
  send('key', { key: e.code, state: false });
});

/** pictureRect is where the picture is drawn in the page: the element's box less the bars object-fit leaves. */
function pictureRect() {
  const r = player.element().getBoundingClientRect();
  const size = player.size();
  const nw = size?.w || st.streamer?.source?.resolution?.width;
  const nh = size?.h || st.streamer?.source?.resolution?.height;
  if (!nw || !nh || !r.width || !r.height) return null;
  const scale = Math.min(r.width / nw, r.height / nh);
  const w = nw * scale;
  const h = nh * scale;
  return { x: r.left + (r.width - w) / 2, y: r.top + (r.height - h) / 2, w, h };
}

/** remap maps v from 0..span-1 to -32768..32767, as PiKVM's tools.remap. */
function remap(v, span) {
  const out = Math.round(v * 65535 / ((span - 1) || 1) - 32768);
  return Math.min(Math.max(out, -32768), 32767);
}

function hostPosition(e) {
  const r = pictureRect();
  if (!r) return null;
  return { x: remap(e.clientX - r.x, r.w), y: remap(e.clientY - r.y, r.h) };
}

function flushMove() {
  moveFrame = 0;
  if (pendingMove) send('mouse_move', { to: pendingMove });
  pendingMove = null;
}

screen.addEventListener('mousemove', (e) => {
  if (!captured) return;
  const to = hostPosition(e);
  if (!to) return;
  pendingMove = to;
  if (!moveFrame) moveFrame = requestAnimationFrame(flushMove);
});
screen.addEventListener('mousedown', (e) => {
  if (!captured) {
    screen.focus(); // the first click captures; it is not sent
    e.preventDefault();
    return;
  }
  e.preventDefault();
  const to = hostPosition(e);
  if (to) {
    pendingMove = to;
    flushMove();
  }
  const b = BUTTONS[e.button];
  if (!b) return;
  heldButtons.add(b);
  send('mouse_button', { button: b, state: true });
});
screen.addEventListener('mouseup', (e) => {
  if (!captured) return;
  e.preventDefault();
  const b = BUTTONS[e.button];
  // Only a button this page pressed: the release of the capturing click
  // is not sent either.
  if (!b || !heldButtons.delete(b)) return;
  send('mouse_button', { button: b, state: false });
});
screen.addEventListener('contextmenu', (e) => e.preventDefault());
screen.addEventListener('wheel', (e) => {
  if (!captured) return;
  e.preventDefault();
  const delta = { x: -Math.sign(e.deltaX) * SCROLL_RATE, y: -Math.sign(e.deltaY) * SCROLL_RATE };
  if (delta.x || delta.y) send('mouse_wheel', { delta });
}, { passive: false });

$('con-release').addEventListener('click', releaseAll);
$('con-send').addEventListener('click', () => {
  const keys = $('con-shortcut').value.split(',');
  for (const k of keys) send('key', { key: k, state: true });
  for (const k of [...keys].reverse()) send('key', { key: k, state: false });
  message('Sent ' + $('con-shortcut').selectedOptions[0].textContent + '.');
});
$('con-fullscreen').addEventListener('click', () => {
  screen.requestFullscreen?.().then(() => screen.focus()).catch(() => {});
});

// ---- ATX

const showATX = atxControls('con', message);
function renderATX(a) {
  $('con-atx').hidden = !a.enabled;
  showATX(a);
}

initNav();
apiJSON('/api/info?fields=node').then((info) => setHost(info.node?.host)).catch(() => {});
addEventListener('pagehide', () => player.stop()); // ends a WebRTC session at once
connect();
