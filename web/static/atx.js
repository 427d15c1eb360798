// The dashboard's ATX card: the host's power and disk LEDs, live from
// kvmd's event stream (/api/ws), and its power and reset buttons. Power
// off (long press) and reset ask for a confirmation first: they can lose
// the host's unsaved work.
import { $, api, errorMessage } from './common.js';

const RECONNECT = 2000; // ms before a dropped event stream is reopened

// The actions: [button id, API path, confirmation question or null].
const ACTIONS = [
  ['atx-power', '/api/atx/click?button=power', null],
  ['atx-power-long', '/api/atx/click?button=power_long', 'Hold the power button for 5.5 s? This forces the host off.'],
  ['atx-reset', '/api/atx/click?button=reset', 'Press the reset button? The host restarts at once.'],
];

let pending = null; // the action awaiting confirmation

function setLed(id, on) {
  const el = $(id);
  el.dataset.on = on ? '1' : '0';
  el.textContent = on ? 'on' : 'off';
}

function render(st) {
  const card = $('atx');
  card.dataset.enabled = st.enabled ? '1' : '0';
  $('atx-disabled').hidden = !!st.enabled;
  $('atx-controls').hidden = !st.enabled;
  setLed('atx-led-power', st.leds?.power);
  setLed('atx-led-hdd', st.leds?.hdd);
  $('atx-busy').hidden = !st.busy;
  for (const [id] of ACTIONS) $(id).disabled = !!st.busy;
}

function message(text, bad) {
  const el = $('atx-msg');
  el.textContent = text;
  el.classList.toggle('warn', !!bad);
}

async function run(path) {
  message('');
  try {
    const res = await api(path, { method: 'POST' });
    if (!res.ok) message(await errorMessage(res), true);
  } catch (e) {
    message('The request failed: ' + e.message, true);
  }
}

function ask(action) {
  pending = action;
  $('atx-confirm-text').textContent = action[2];
  $('atx-confirm').hidden = false;
  $('atx-confirm-yes').focus();
}

function connect() {
  const ws = new WebSocket((location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/api/ws?stream=0');
  ws.onmessage = (ev) => {
    let msg;
    try { msg = JSON.parse(ev.data); } catch { return; }
    if (msg.event_type === 'atx' && msg.event) {
      render(msg.event);
      $('atx').dataset.live = '1';
    }
  };
  ws.onclose = () => {
    $('atx').dataset.live = '0';
    setTimeout(connect, RECONNECT);
  };
}

for (const action of ACTIONS) {
  $(action[0]).addEventListener('click', () => (action[2] ? ask(action) : run(action[1])));
}
$('atx-confirm-yes').addEventListener('click', () => {
  $('atx-confirm').hidden = true;
  if (pending) run(pending[1]);
  pending = null;
});
$('atx-confirm-no').addEventListener('click', () => {
  $('atx-confirm').hidden = true;
  pending = null;
});
connect();
