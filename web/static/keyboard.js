// The dashboard's Keyboard card: text typed on the host with the keymap
// of its layout (POST /api/hid/print), common shortcuts (POST
// /api/hid/events/send_shortcut), and the host's lock lights, live from
// kvmd's event stream (/api/ws). The full console (video, captured keys
// and mouse) is another page.
import { $, api, errorMessage, h, mountTemplate } from './common.js';
import { onEvent, onStreamClosed } from './events.js';

function message(text, bad) {
  const el = $('kbd-msg');
  el.textContent = text;
  el.classList.toggle('warn', !!bad);
}

function setLed(id, on) {
  $(id).dataset.on = on ? '1' : '0';
}

function render(st) {
  mountForm();
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

/**
 * mountForm puts the text form in place, once, from its template: the page
 * comes without it and gets it with the first answer about the keyboard.
 * When a page has been parsed, Chromium lays the whole page out for the
 * form controls it holds, hidden ones too, before the page's load event:
 * about a quarter of the dashboard's load time when its forms were in the
 * page from the start (issue 30). A form that shows before the device has
 * answered could do nothing yet anyway.
 */
function mountForm() {
  if (!mountTemplate('kbd-form-tpl')) return;
  $('kbd-form').addEventListener('submit', type);
  $('kbd-stop').addEventListener('click', () => post('/api/hid/reset', {}, 'Stopped; every key and button released.'));
}

function showKeymaps(km) {
  mountForm();
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

// The shortcut buttons are in the page (index.html), each with the keys it
// presses: made by the script at load, they cost the dashboard about a
// tenth of its load time in Chromium (issue 30).
$('kbd-shortcuts').addEventListener('click', (ev) => {
  const b = ev.target.closest('button[data-keys]');
  if (!b) return;
  post('/api/hid/events/send_shortcut?keys=' + encodeURIComponent(b.dataset.keys), {}, 'Sent ' + b.textContent + '.');
});
onEvent('hid', (st) => {
  render(st);
  $('keyboard').dataset.live = '1';
});
onEvent('hid_keymaps', (ev) => {
  if (ev.keymaps) showKeymaps(ev.keymaps);
});
onStreamClosed(() => {
  $('keyboard').dataset.live = '0';
});
