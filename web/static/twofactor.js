// The 2FA page (admins): turn 2FA on by scanning a new secret and
// confirming a code of it (nothing is written before), or off.
import { $, api, errorMessage, initNav, markReady } from './common.js';

const SVG = 'http://www.w3.org/2000/svg';
const status = (text) => { $('tfa-status').textContent = text; };

async function call(method, path, body) {
  const init = { method };
  if (body) {
    init.headers = { 'Content-Type': 'application/json' };
    init.body = JSON.stringify(body);
  }
  const res = await api(path, init);
  if (!res.ok) throw new Error(await errorMessage(res));
  return (await res.json()).result;
}

/** drawQR draws the QR code's modules (rows of '0' and '1') as SVG squares. */
function drawQR(rows) {
  const n = rows.length;
  const svg = document.createElementNS(SVG, 'svg');
  svg.setAttribute('viewBox', `0 0 ${n} ${n}`);
  svg.setAttribute('shape-rendering', 'crispEdges');
  svg.setAttribute('role', 'img');
  svg.setAttribute('aria-label', 'QR code of the 2FA secret');
  let d = '';
  rows.forEach((row, y) => {
    for (let x = 0; x < row.length; x++) if (row[x] === '1') d += `M${x} ${y}h1v1h-1z`;
  });
  const path = document.createElementNS(SVG, 'path');
  path.setAttribute('d', d);
  path.setAttribute('fill', '#000');
  svg.append(path);
  $('tfa-qr').replaceChildren(svg);
}

async function load() {
  const res = await api('/api/auth/totp');
  if (!res.ok) {
    if (res.status === 403) status('Only an admin can change 2FA.');
    else if (res.status === 409) status(await errorMessage(res)); // says what to configure
    else status('2FA cannot be changed here: ' + (await errorMessage(res)));
    markReady();
    return;
  }
  const on = (await res.json()).result.enabled;
  status(on ? '2FA is on.' : '2FA is off.');
  $('tfa-begin').hidden = on;
  $('tfa-off').hidden = !on;
  markReady();
}

$('tfa-begin').addEventListener('click', async () => {
  try {
    const r = await call('POST', '/api/auth/totp/begin');
    drawQR(r.qr);
    $('tfa-secret').textContent = r.secret;
    $('tfa-enroll').hidden = false;
    $('tfa-code').focus();
  } catch (e) {
    status('Could not begin: ' + e.message);
  }
});

$('tfa-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  try {
    await call('POST', '/api/auth/totp/confirm', { code: $('tfa-code').value.trim() });
  } catch (e) {
    status('Not turned on: ' + e.message);
    return;
  }
  $('tfa-enroll').hidden = true;
  $('tfa-form').reset();
  await load();
  status('2FA is on. From now on, add the code to every password.');
});

$('tfa-off').addEventListener('click', async () => {
  if (!confirm('Turn 2FA off for every user?')) return;
  try {
    await call('DELETE', '/api/auth/totp');
  } catch (e) {
    status('Not turned off: ' + e.message);
    return;
  }
  await load();
});

initNav();
load();
