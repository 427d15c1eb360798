// Helpers shared by the pages: API calls, session expiry, formatting, the
// navigation bar. Importing this module has no side effects.

/** Shown for a value the device does not have. */
export const NONE = '—';

/** $ returns the element with the given id. */
export const $ = (id) => document.getElementById(id);

/**
 * mountTemplate puts the content of the <template> with the given id in
 * its place, once: true when it did, false when it was done before.
 */
export function mountTemplate(id) {
  const tpl = $(id);
  if (!tpl) return false;
  tpl.replaceWith(tpl.content);
  return true;
}

/** markReady tells the browser tests that the page's first state is rendered. */
export function markReady() {
  document.body.dataset.ready = '1';
}

/** loginURL is where to send the user when the session is gone. */
export function loginURL() {
  const next = location.pathname + location.search;
  return '/login?next=' + encodeURIComponent(next) + '&expired=1';
}

/**
 * api fetches a same-origin API path with the session cookie. A 401 (no
 * session) or 403 (a session that expired or was ended: the cookie is the
 * only credential the pages send) means the session has ended: the page goes
 * to the login page and the returned promise
 * never settles, so callers need no special case for it. Network failures
 * reject as fetch does; every other status is returned as is.
 */
export async function api(path, init = {}) {
  const res = await fetch(path, { credentials: 'same-origin', ...init });
  // A 403 for a role too low is no ended session: it is returned as is.
  if (res.status === 403 && (await errorMessage(res.clone())).startsWith('Forbidden: this needs')) return res;
  if (res.status === 401 || res.status === 403) {
    location.replace(loginURL());
    return new Promise(() => {});
  }
  return res;
}

/** ApiError is an answer other than 2xx, with kvmd's error message. */
export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

/** errorMessage reads the error_msg of kvmd's JSON envelope from res. */
export async function errorMessage(res) {
  try {
    const body = await res.json();
    const msg = body && body.result && body.result.error_msg;
    if (msg) return String(msg);
  } catch {
    // Not JSON (a proxy's error page): fall back to the status.
  }
  return 'HTTP ' + res.status + (res.statusText ? ' ' + res.statusText : '');
}

/** apiJSON fetches path and returns the result of kvmd's envelope, or throws ApiError. */
export async function apiJSON(path, init) {
  const res = await api(path, init);
  if (!res.ok) throw new ApiError(res.status, await errorMessage(res));
  const body = await res.json();
  return body.result;
}

/** show sets the text of element id, or NONE when value is null or empty. */
export function show(id, value) {
  $(id).textContent = value === null || value === undefined || value === '' ? NONE : String(value);
}

/**
 * h builds an element: h('li', {className: 'warn'}, 'text', child).
 * Attributes are set as properties; children are nodes or text.
 */
export function h(tag, props, ...children) {
  const el = Object.assign(document.createElement(tag), props);
  el.append(...children.map((c) => (c === null || c === undefined ? NONE : c)));
  return el;
}

/** fmtDuration formats seconds as "3 d 4 h 12 min" or "48 min 31 s". */
export function fmtDuration(total) {
  if (typeof total !== 'number' || !isFinite(total) || total < 0) return NONE;
  const t = Math.floor(total);
  const parts = [
    [Math.floor(t / 86400), 'd'],
    [Math.floor(t / 3600) % 24, 'h'],
    [Math.floor(t / 60) % 60, 'min'],
    [t % 60, 's'],
  ];
  // The largest non-zero unit and the two after it: precise enough at a glance.
  let first = parts.findIndex(([n]) => n > 0);
  if (first < 0) first = parts.length - 1;
  const shown = parts.slice(first, first + 3).filter(([n], i) => n > 0 || i === 0);
  return shown.map(([n, unit]) => n + ' ' + unit).join(' ');
}

/** fmtBytes formats a byte count in binary units: "3.7 GiB". */
export function fmtBytes(n) {
  if (typeof n !== 'number' || !isFinite(n)) return NONE;
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return (i === 0 ? String(n) : n.toFixed(1)) + ' ' + units[i];
}

/** num tells whether v is a finite number (JSON null is not). */
export const num = (v) => typeof v === 'number' && isFinite(v);

const pad = (n) => String(n).padStart(2, '0');

/** fmtClock formats a Date's local time as "14:03:07". */
export function fmtClock(d) {
  return pad(d.getHours()) + ':' + pad(d.getMinutes()) + ':' + pad(d.getSeconds());
}

/** fmtStamp formats a Date's local time as "20261121-140307", for file names. */
export function fmtStamp(d) {
  return '' + d.getFullYear() + pad(d.getMonth() + 1) + pad(d.getDate()) + '-' +
    pad(d.getHours()) + pad(d.getMinutes()) + pad(d.getSeconds());
}

/** setHost shows the device's host name in the header and the title. */
export function setHost(host) {
  if (!host) return;
  $('site-name').textContent = host;
  const page = document.title.split(' · ')[0];
  document.title = page + ' · ' + host;
}

/**
 * initNav wires the header of the app pages: the log-out button ends the
 * session and goes to the login page.
 */
export function initNav() {
  const button = $('logout');
  button.addEventListener('click', async () => {
    button.disabled = true;
    try {
      await fetch('/api/auth/logout', { method: 'POST', credentials: 'same-origin' });
    } catch {
      // The session may still be valid: say so rather than pretend.
      button.disabled = false;
      button.textContent = 'Log out (failed, retry)';
      return;
    }
    location.replace('/login');
  });
}
