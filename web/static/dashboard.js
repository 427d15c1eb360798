// The dashboard: /api/info rendered as cards, refreshed every two seconds.
import {
  $, ApiError, NONE, apiJSON, fmtBytes, fmtClock, fmtDuration, h, initNav, markReady, num,
  setHost, show,
} from './common.js';

const INFO = '/api/info?fields=auth,gpio,health,meta,node,system,uptime,usb,video&legacy=0';
const PERIOD = 2000; // ms between the end of one request and the next
const TIMEOUT = 10000; // ms before a request that hangs counts as failed

/** replaceList replaces the children of element id with items (or one NONE item). */
function replaceList(id, items) {
  $(id).replaceChildren(...(items.length ? items : [h('li', {}, NONE)]));
}

function renderBoard(info) {
  const platform = info.system?.platform;
  show('board-model', platform?.base);
  show('board-serial', platform?.serial);
  show('board-uptime', num(info.uptime?.total) ? fmtDuration(info.uptime.total) : null);
  show('board-host', info.node?.host);
}

// Plain-language messages for the firmware's throttling flags:
// [flag, message while it happens, message when it happened before].
const THROTTLE = [
  ['undervoltage', 'Under-voltage now: use a better power supply.',
    'Under-voltage happened since boot: check the power supply.'],
  ['freq_capped', 'CPU frequency capped now (heat or power).',
    'CPU frequency capping happened since boot.'],
  ['throttled', 'Throttled now: the board is too hot or under-powered.',
    'Throttling happened since boot.'],
];

/**
 * throttleItems turns health.throttling into list items. The kernel's
 * under-voltage alarm (source "hwmon") sees only under-voltage, and the
 * daemon remembers it only since it started: say so rather than claim
 * the rest is fine.
 */
function throttleItems(t) {
  if (!t || !t.parsed_flags) return [];
  const hwmon = t.source === 'hwmon';
  const items = [];
  for (const [flag, now, past] of THROTTLE) {
    if (hwmon && flag !== 'undervoltage') continue;
    const f = t.parsed_flags[flag];
    if (f?.now) items.push(h('li', { className: 'warn' }, now));
    else if (f?.past && !t.ignore_past) {
      items.push(h('li', { className: 'past' }, hwmon ? 'Under-voltage happened since kvmd started.' : past));
    }
  }
  if (!items.length) {
    items.push(h('li', { className: 'ok' }, hwmon
      ? 'No under-voltage since kvmd started.'
      : 'No throttling: power and temperature are fine.'));
  }
  if (hwmon) {
    items.push(h('li', { className: 'muted' },
      'Only the kernel\'s under-voltage alarm is readable here: no throttling or frequency capping, and nothing from before kvmd started.'));
  }
  return items;
}

function renderHealth(health) {
  const temp = health?.temp?.cpu;
  show('cpu-temp', num(temp) ? temp.toFixed(1) + ' °C' : null);
  const load = health?.cpu?.percent;
  show('cpu-load', num(load) ? Math.round(load) + ' %' : null);
  const mem = health?.mem;
  show('mem', num(mem?.percent) ? `${mem.percent.toFixed(1)} % of ${fmtBytes(mem.total)} used` : null);
  replaceList('throttling', throttleItems(health?.throttling));
}

function usbFunction(f) {
  let text = f.kind || f.type || f.name || NONE;
  if (f.image) {
    text += ': ' + f.image.split('/').pop();
    if (f.read_only) text += ' (read-only)';
  }
  if (f.enabled === false) text += ' (disabled)';
  return h('li', { title: f.image || f.name || '' }, text);
}

// USB faults by status, for the headline; the reason says what to do.
const USB_FAULT = {
  no_udc: 'No USB device controller',
  no_gadget: 'No USB gadget configured',
};

function renderUSB(usb) {
  const state = $('usb-state');
  const fns = usb?.gadget?.functions;
  const fault = usb && USB_FAULT[usb.status];
  if (fault) {
    state.textContent = fault;
  } else if (!usb || !usb.gadget) {
    state.textContent = 'No USB gadget';
  } else if (usb.connected) {
    state.textContent = 'Connected to the target computer' + (usb.state ? ` (${usb.state})` : '');
  } else {
    state.textContent = 'Not connected';
  }
  state.className = 'state ' + (usb?.connected ? 'good' : 'bad');
  if (usb?.reason) {
    $('usb-udc').textContent = usb.reason;
  } else {
    $('usb-udc').textContent = usb?.udc ? `Controller ${usb.udc}: ${usb.state || NONE}` : '';
  }
  replaceList('usb-functions', Array.isArray(fns) ? fns.map(usbFunction) : []);
}

/** videoState says in words what the capture device sees. */
function videoState(v) {
  if (!v || !v.device) return ['Capture device not found', 'bad'];
  const r = v.resolution;
  const mode = r ? `${r.width}×${r.height}` + (num(v.fps) ? ` at ${v.fps} fps` : '') : '';
  if (v.signal === true) {
    if (mode) return ['Signal: ' + mode, 'good'];
    if (v.status === 'no_lock') return ['Signal present, but the capture cannot lock onto it', 'bad'];
    if (v.status === 'out_of_range') return ['Signal out of range for the capture device', 'bad'];
    return ['Signal present', 'good'];
  }
  if (v.signal === false) return ['No signal', 'bad'];
  if (v.status === 'no_access') return ['No access to the capture device (the daemon needs group video)', 'bad'];
  // A USB dongle cannot tell; it still has a capture format.
  if (v.status === 'no_detection') return ['The capture device cannot detect a signal' + (mode ? ` (capturing ${mode})` : ''), ''];
  return ['Signal state unknown' + (mode ? ` (capturing ${mode})` : ''), ''];
}

function renderVideo(video) {
  const [text, cls] = videoState(video);
  const state = $('hdmi-state');
  state.textContent = text;
  state.className = 'state ' + cls;
  const dev = video?.device ? [video.driver, video.card, video.device, video.bridge?.name].filter(Boolean) : [];
  show('hdmi-device', dev.join(' · '));
}

const level = (l) => (l === true ? 'high' : l === false ? 'low' : NONE);

function renderGPIO(gpio) {
  const rows = Object.entries(gpio || {}).map(([name, p]) =>
    h('tr', {},
      h('td', {}, name),
      h('td', {}, p?.gpio ?? NONE),
      h('td', {}, p?.direction ?? NONE),
      h('td', { title: p?.active_low ? 'active low' : '' }, level(p?.level))));
  $('gpio').tBodies[0].replaceChildren(...rows);
  $('gpio-empty').hidden = rows.length > 0;
}

function render(info) {
  setHost(info.node?.host);
  renderBoard(info);
  renderHealth(info.health);
  renderUSB(info.usb);
  renderVideo(info.video);
  renderGPIO(info.gpio);
  show('version-kvmd', info.system?.kvmd?.version);
  show('version-kernel', info.system?.kernel?.release);
  show('version-machine', info.system?.kernel?.machine);
}

let timer = 0;
let running = false;

// The status line is a live region: only its words are read out, when they
// change, not the time that changes every two seconds.
const status = $('dash-status');
const statusWords = h('span');
const statusTime = h('span');
statusTime.setAttribute('aria-hidden', 'true');
status.replaceChildren(statusWords, statusTime);

function setStatus(words, time, bad) {
  if (statusWords.textContent !== words) statusWords.textContent = words;
  statusTime.textContent = time;
  status.classList.toggle('bad', bad);
}

/** refresh fetches and renders once, then schedules the next one: requests never overlap. */
async function refresh() {
  clearTimeout(timer);
  if (running) return;
  running = true;
  try {
    render(await apiJSON(INFO, { signal: AbortSignal.timeout?.(TIMEOUT) }));
    setStatus('Last updated ', fmtClock(new Date()), false);
    markReady();
  } catch (e) {
    setStatus(e instanceof ApiError ? `Device error (${e.message}), retrying…` : 'Connection lost, retrying…', '', true);
  } finally {
    running = false;
  }
  // A hidden tab does not poll; it refreshes as soon as it is shown again.
  if (!document.hidden) timer = setTimeout(refresh, PERIOD);
}

document.addEventListener('visibilitychange', () => {
  if (!document.hidden) refresh();
});
initNav();
refresh();
