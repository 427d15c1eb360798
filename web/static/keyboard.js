// The dashboard's Keyboard card: text typed on the host with the keymap
// of its layout (POST /api/hid/print), common shortcuts (POST
// /api/hid/events/send_shortcut), and the host's lock lights, live from
// kvmd's event stream (/api/ws). The full console (video, captured keys
// and mouse) is another page.
import { $, api, apiJSON, errorMessage, h } from './common.js';

const RECONNECT = 2000; // ms before a dropped event stream is reopened

// The shortcuts: [label, the keys' KeyboardEvent.code names, pressed in order].
const SHORTCUTS = [
  ['Ctrl+Alt+Del', 'ControlLeft,AltLeft,Delete'],
  ['Ctrl+Alt+Backspace', 'ControlLeft,AltLeft,Backspace'],
  ['Alt+Tab', 'AltLeft,Tab'],
  ['Alt+F4', 'AltLeft,F4'],
  ['Ctrl+Alt+F1', 'ControlLeft,AltLeft,F1'],
  ['Ctrl+Alt+F2', 'ControlLeft,AltLeft,F2'],
  ['Win', 'MetaLeft'],
  ['Win+R', 'MetaLeft,KeyR'],
  ['Esc', 'Escape'],
  ['Enter', 'Enter'],
  ['Print Screen', 'PrintScreen'],
  ['Caps Lock', 'CapsLock'],
];

function message(text, bad) {
  const el = $('kbd-msg');
  el.textContent = text;
  el.classList.toggle('warn', !!bad);
}

function setLed(id, on) {
  $(id).dataset.on = on ? '1' : '0';
}

function render(st) {
  const card = $('keyboard');
  let state = 'No keyboard: the USB gadget has none';
  if (st.enabled) {
    if (st.keyboard?.online) state = 'Connected: the host reads the keyboard';
    else if (st.online) state = 'The host is not reading the keyboard (asleep, or still starting)';
    else state = 'No host: the USB cable is not connected, or the gadget is not bound';
  }
  $('kbd-state').textContent = state + (st.busy ? ' · typing…' : '');
  card.dataset.online = st.keyboard?.online ? '1' : '0';
  card.dataset.busy = st.busy ? '1' : '0';
  setLed('kbd-led-caps', st.keyboard?.leds?.caps);
  setLed('kbd-led-num', st.keyboard?.leds?.num);
  setLed('kbd-led-scroll', st.keyboard?.leds?.scroll);
}

function showKeymaps(km) {
  const sel = $('kbd-keymap');
  const want = sel.value || km.default; // a choice made on this page is kept
  sel.replaceChildren(...km.available.map((name) => h('option', { value: name, textContent: name })));
  sel.value = km.available.includes(want) ? want : km.default;
}

async function post(path, init, done) {
  try {
    const res = await api(path, { method: 'POST', ...init });
    if (res.ok) message(done);
    else message(await errorMessage(res), true);
  } catch (e) {
    message('The request failed: ' + e.message, true);
  }
}

async function type(ev) {
  ev.preventDefault();
  const text = $('kbd-text').value;
  if (text === '') {
    message('Nothing to type.', true);
    return;
  }
  const keymap = $('kbd-keymap').value;
  const q = new URLSearchParams({ keymap, limit: '0' });
  if ($('kbd-slow').checked) q.set('slow', '1');
  const n = [...text].length;
  message('Typing ' + n + ' characters…');
  $('kbd-send').disabled = true;
  await post('/api/hid/print?' + q, {
    headers: { 'Content-Type': 'text/plain; charset=utf-8' },
    body: text,
  }, 'Typed ' + n + ' characters.');
  $('kbd-send').disabled = false;
}

function connect() {
  const ws = new WebSocket((location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/api/ws?stream=0');
  ws.onmessage = (ev) => {
    let msg;
    try { msg = JSON.parse(ev.data); } catch { return; }
    if (msg.event_type === 'hid' && msg.event) {
      render(msg.event);
      $('keyboard').dataset.live = '1';
    } else if (msg.event_type === 'hid_keymaps' && msg.event?.keymaps) {
      showKeymaps(msg.event.keymaps);
    }
  };
  ws.onclose = () => {
    $('keyboard').dataset.live = '0';
    setTimeout(connect, RECONNECT);
  };
}

for (const [label, keys] of SHORTCUTS) {
  const b = h('button', { type: 'button', className: 'secondary', textContent: label });
  b.dataset.keys = keys;
  b.addEventListener('click', () => post('/api/hid/events/send_shortcut?keys=' + encodeURIComponent(keys), {}, 'Sent ' + label + '.'));
  $('kbd-shortcuts').append(b);
}
$('kbd-form').addEventListener('submit', type);
$('kbd-stop').addEventListener('click', () => post('/api/hid/reset', {}, 'Stopped; every key and button released.'));
apiJSON('/api/hid/keymaps').then((r) => showKeymaps(r.keymaps)).catch((e) => message('Keymaps: ' + e.message, true));
connect();
