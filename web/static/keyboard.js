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

/** post sends a request; done is the message of its success, or a function that shows it from the answer. */
async function post(path, init, done) {
  try {
    const res = await api(path, { method: 'POST', ...init });
    if (!res.ok) message(await errorMessage(res), true);
    else if (typeof done === 'function') await done(res);
    else message(done);
  } catch (e) {
    message('The request failed: ' + e.message, true);
  }
}

/** shownChar writes a character for the message: as itself, or by its code point when it would not show. */
function shownChar(c) {
  if (!/[\p{C}\p{Z}\p{M}]/u.test(c)) return c;
  return 'U+' + c.codePointAt(0).toString(16).toUpperCase().padStart(4, '0');
}

/**
 * typed says what a print typed: the answer's skipped (this daemon's, kvmd's print answers
 * nothing) is what the layout cannot type, left out rather than typed as another character.
 */
async function typed(res, n, keymap) {
  let skipped;
  try {
    skipped = (await res.json())?.result?.skipped;
  } catch {
    // An answer without a body (kvmd's shape): nothing to add.
  }
  if (!skipped?.count) {
    message('Typed ' + n + ' characters.');
    return;
  }
  const chars = (skipped.chars || []).map(shownChar).join(' ');
  message('Typed ' + (n - skipped.count) + ' of ' + n + ' characters; skipped ' + skipped.count +
    ' that the ' + keymap + ' layout cannot type: ' + chars, true);
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
  }, (res) => typed(res, n, keymap));
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
