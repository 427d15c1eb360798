// The ATX controls: the host's power and disk LEDs and its power and reset
// buttons, on the dashboard's ATX card (live from kvmd's event stream,
// /api/ws) and on the console (atxControls). Power off (long press) and
// reset ask for a confirmation first: they can lose the host's unsaved work.
import { $, api, errorMessage } from './common.js';
import { onEvent, onStreamClosed } from './events.js';

// The actions: [button id's suffix, kvmd's button, confirmation question or null].
const ACTIONS = [
  ['power', 'power', null],
  ['power-long', 'power_long', 'Hold the power button for 5.5 s? This forces the host off.'],
  ['reset', 'reset', 'Press the reset button? The host restarts at once.'],
];

/**
 * atxControls wires the buttons and the confirmation whose ids start with
 * p ('atx' for atx-power, atx-confirm...), telling message(text, bad) how
 * a click went, and returns what shows the LEDs and busy state of kvmd's
 * atx event.
 */
export function atxControls(p, message) {
  let pending = null; // the button awaiting confirmation
  const run = async (button) => {
    message('');
    try {
      const res = await api('/api/atx/click?button=' + button, { method: 'POST' });
      if (!res.ok) message(await errorMessage(res), true);
    } catch (e) {
      message('The request failed: ' + e.message, true);
    }
  };
  const answer = (yes) => {
    $(p + '-confirm').hidden = true;
    if (yes && pending) run(pending);
    pending = null;
  };
  for (const [id, button, question] of ACTIONS) {
    $(p + '-' + id).addEventListener('click', () => {
      if (!question) return run(button);
      pending = button;
      $(p + '-confirm-text').textContent = question;
      $(p + '-confirm').hidden = false;
      $(p + '-confirm-yes').focus();
    });
  }
  $(p + '-confirm-yes').addEventListener('click', () => answer(true));
  $(p + '-confirm-no').addEventListener('click', () => answer(false));
  return (st) => {
    for (const led of ['power', 'hdd']) $(p + '-led-' + led).dataset.on = st.leds?.[led] ? '1' : '0';
    for (const [id] of ACTIONS) $(p + '-' + id).disabled = !!st.busy;
  };
}

// The dashboard's card.
function card() {
  const show = atxControls('atx', (text, bad) => {
    const el = $('atx-msg');
    el.textContent = text;
    el.classList.toggle('warn', !!bad);
  });
  const render = (st) => {
    $('atx').dataset.enabled = st.enabled ? '1' : '0';
    $('atx-disabled').hidden = !!st.enabled;
    $('atx-controls').hidden = !st.enabled;
    show(st);
    for (const led of ['power', 'hdd']) $('atx-led-' + led).textContent = st.leds?.[led] ? 'on' : 'off';
    $('atx-busy').hidden = !st.busy;
  };
  onEvent('atx', (st) => {
    render(st);
    $('atx').dataset.live = '1';
  });
  onStreamClosed(() => {
    $('atx').dataset.live = '0';
  });
}

if ($('atx')) card();
